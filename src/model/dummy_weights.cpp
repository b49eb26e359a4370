// dummy_weights.cpp — seeded random weights for any config (src/model/dummy_weights.h).
// Tested by tests/unit/model/test_dummy_weights.cpp (shapes, determinism, moments of the values).
#include "model/dummy_weights.h"

#include <unistd.h>

#include <cmath>
#include <limits>
#include <new>
#include <numbers>
#include <string>
#include <vector>

namespace kascade {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A uniform double in (0, 1) from the top 53 bits of a hash.
double unit_open(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

bool is_norm_weight(const std::string& name) {
  return name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
}

// Fills n elements of `dtype` at `out`: standard normals × std from (stream, pair index).
void fill_normal(void* out, DType dtype, int64_t n, uint64_t stream, double std_dev) {
  const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (pairs >= (int64_t{1} << 16))
  for (int64_t p = 0; p < pairs; ++p) {
    const uint64_t key = stream ^ splitmix64(static_cast<uint64_t>(p));
    const double u1 = unit_open(splitmix64(key));
    const double u2 = unit_open(splitmix64(key ^ 0x5851f42d4c957f2dull));
    const double radius = std::sqrt(-2.0 * std::log(u1)) * std_dev;
    const double angle = 2.0 * std::numbers::pi * u2;
    store_from_float(out, dtype, 2 * p, static_cast<float>(radius * std::cos(angle)));
    if (2 * p + 1 < n) store_from_float(out, dtype, 2 * p + 1, static_cast<float>(radius * std::sin(angle)));
  }
}

}  // namespace

Result<Weights> make_dummy_weights(const ModelConfig& config, DType dtype, uint64_t seed) {
  KC_ASSIGN_OR_RETURN(std::vector<WeightSpec> specs, expected_weights(config));
  // Bytes in 128-bit arithmetic: up to 2^24 layers of 2^48-element matrices cannot overflow.
  unsigned __int128 total = 0;
  for (const WeightSpec& spec : specs) {
    unsigned __int128 n = dtype_size(dtype);
    for (int64_t d : spec.shape) n *= static_cast<uint64_t>(d);  // dims in [1, 2^24] (validated)
    total += n;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const uint64_t memory = pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                                                     : std::numeric_limits<uint64_t>::max();
  if (total > memory)
    return resource_exhausted("dummy weights of ", architecture_name(config.architecture), " need ",
                              static_cast<double>(total), " bytes in ", dtype_name(dtype), ", more than the machine's ",
                              memory, " bytes of memory");

  auto buffers = std::make_shared<std::vector<std::vector<uint8_t>>>();
  std::vector<NamedTensor> tensors;
  try {
    buffers->reserve(specs.size());
    for (const WeightSpec& spec : specs) {
      TensorView view;
      view.dtype = dtype;
      view.shape = spec.shape;
      buffers->emplace_back(view.nbytes());
      view.data = buffers->back().data();
      tensors.push_back({spec.name, view});
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate ", static_cast<uint64_t>(total), " bytes of dummy weights");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    void* out = buffers->at(i).data();
    const int64_t n = tensors[i].view.numel();
    if (is_norm_weight(specs[i].name)) {
      for (int64_t j = 0; j < n; ++j) store_from_float(out, dtype, j, 1.0f);
    } else {
      fill_normal(out, dtype, n, splitmix64(seed ^ fnv1a(specs[i].name)), config.initializer_range);
    }
  }
  return Weights::from_tensors(config, std::move(tensors), buffers);
}

}  // namespace kascade
