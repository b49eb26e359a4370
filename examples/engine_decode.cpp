// examples/engine_decode.cpp — Kascade inside an engine that owns its paged KV cache: the engine makes
// a backend (kascade/backends.h), a policy over it (kascade/policy.h), and for each decode step calls
// begin_forward once and attention() once per layer with views of its own buffers
// (kascade/attention.h). The same code runs on the CPU backend (host memory) and the CUDA backend
// (device memory): every buffer goes through backend->allocate / copy_from_host.
//
// The data: a 4-layer model (8 query heads, 2 KV heads, head dim 64, pages of 16 keys in a shuffled
// page order), two sequences of 700 and 1500 keys. Each sequence hides 8 "needle" keys that its
// queries point at, in every layer, so that attention concentrates on them as it does in real
// models. The step runs with dense attention and with Kascade (anchors 0 and 2, Top-k 10 %), and
// prints per layer the layer's role, the share of keys it read and how far its output is from the
// dense one; then it checks that the anchors' Top-k found every needle. Exit status 1 if not, or if
// an output differs from dense by more than 2 % of its scale.
//   engine_decode [cpu|cuda]
// Built and run against an installed kascade by tests/scripts/test_install.sh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kascade/backends.h"
#include "kascade/dtype.h"
#include "kascade/policy.h"

namespace {

using kascade::AttentionBackend;
using kascade::BackendBuffer;
using kascade::DType;
using kascade::Status;

constexpr int32_t kLayers = 4, kHeads = 8, kKvHeads = 2, kHeadDim = 64, kPageSize = 16, kNeedles = 8;
constexpr DType kDtype = DType::kBF16;  // the CUDA kernels take bf16 / f16; the CPU backend any
const std::vector<int32_t> kKvLens = {700, 1500};

#define CHECK_OK(expr)                                                               \
  do {                                                                               \
    const Status check_status_ = (expr);                                             \
    if (!check_status_.ok()) {                                                       \
      std::fprintf(stderr, "engine_decode: %s: %s\n", #expr, check_status_.to_string().c_str()); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

template <typename T>
T take(kascade::Result<T> result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "engine_decode: %s: %s\n", what, result.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(result).value();
}

// A buffer in the backend's memory holding `host` (as `dtype` when the values are floats).
BackendBuffer upload_floats(AttentionBackend& backend, const std::vector<float>& host, DType dtype) {
  std::vector<uint8_t> bytes(host.size() * kascade::dtype_size(dtype));
  kascade::convert_buffer(host.data(), DType::kF32, bytes.data(), dtype, static_cast<int64_t>(host.size()));
  BackendBuffer buffer = take(backend.allocate(bytes.size()), "allocate");
  CHECK_OK(backend.copy_from_host(buffer.data(), bytes.data(), bytes.size()));
  return buffer;
}
BackendBuffer upload_ints(AttentionBackend& backend, const std::vector<int32_t>& host) {
  BackendBuffer buffer = take(backend.allocate(host.size() * sizeof(int32_t)), "allocate");
  CHECK_OK(backend.copy_from_host(buffer.data(), host.data(), host.size() * sizeof(int32_t)));
  return buffer;
}
std::vector<float> download_floats(AttentionBackend& backend, const BackendBuffer& buffer, DType dtype, size_t n) {
  std::vector<uint8_t> bytes(n * kascade::dtype_size(dtype));
  CHECK_OK(backend.copy_to_host(bytes.data(), buffer.data(), bytes.size()));
  std::vector<float> host(n);
  kascade::convert_buffer(bytes.data(), dtype, host.data(), DType::kF32, static_cast<int64_t>(n));
  return host;
}

// What the engine holds: per layer K and V pages, one block table, the lengths, and this step's queries.
struct EngineState {
  int32_t batch = 0, num_pages = 0, max_pages_per_seq = 0;
  std::vector<int32_t> block_table;                  // [batch, max_pages_per_seq]
  std::vector<std::vector<int32_t>> needles;         // [batch][kNeedles] key positions
  std::vector<std::vector<float>> k, v, q;           // per layer: [pages, page, G, d], same, [batch, H, d]
};

EngineState make_state(uint64_t seed) {
  EngineState s;
  s.batch = static_cast<int32_t>(kKvLens.size());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int32_t len : kKvLens) s.max_pages_per_seq = std::max(s.max_pages_per_seq, (len + kPageSize - 1) / kPageSize);
  s.num_pages = s.batch * s.max_pages_per_seq;
  std::vector<int32_t> pages(s.num_pages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);  // pages anywhere in the pool, as an engine's allocator leaves them
  s.block_table = pages;
  // Needle positions per sequence, and one unit direction per (sequence, KV group) they share with the queries.
  std::vector<std::vector<float>> direction(s.batch * kKvHeads, std::vector<float>(kHeadDim));
  for (auto& u : direction) {
    float norm = 0.0f;
    for (float& x : u) norm += (x = normal(rng)) * x;
    for (float& x : u) x /= std::sqrt(norm);
  }
  for (int32_t b = 0; b < s.batch; ++b) {
    std::set<int32_t> picked;
    std::uniform_int_distribution<int32_t> position(0, kKvLens[b] - 2);
    while (static_cast<int32_t>(picked.size()) < kNeedles) picked.insert(position(rng));
    s.needles.emplace_back(picked.begin(), picked.end());
  }
  const size_t kv_elems = static_cast<size_t>(s.num_pages) * kPageSize * kKvHeads * kHeadDim;
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    std::vector<float> k(kv_elems), v(kv_elems), q(static_cast<size_t>(s.batch) * kHeads * kHeadDim);
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    for (int32_t b = 0; b < s.batch; ++b) {
      for (int32_t g = 0; g < kKvHeads; ++g) {
        const std::vector<float>& u = direction[b * kKvHeads + g];
        for (const int32_t j : s.needles[b]) {  // needle keys: 12 u (+ a little noise)
          const int32_t page = s.block_table[b * s.max_pages_per_seq + j / kPageSize];
          float* row = &k[((static_cast<size_t>(page) * kPageSize + j % kPageSize) * kKvHeads + g) * kHeadDim];
          for (int32_t i = 0; i < kHeadDim; ++i) row[i] = 12.0f * u[i] + 0.1f * normal(rng);
        }
        for (int32_t h = g * (kHeads / kKvHeads); h < (g + 1) * (kHeads / kKvHeads); ++h) {  // queries: 8 u + noise
          float* row = &q[(static_cast<size_t>(b) * kHeads + h) * kHeadDim];
          for (int32_t i = 0; i < kHeadDim; ++i) row[i] = 8.0f * u[i] + 0.5f * normal(rng);
        }
      }
    }
    s.k.push_back(std::move(k));
    s.v.push_back(std::move(v));
    s.q.push_back(std::move(q));
  }
  return s;
}

struct StepResult {
  std::vector<std::vector<float>> outputs;  // per layer [batch, H, d]
  kascade::AttendedStatistics statistics;
  kascade::IndexSnapshot indices;           // the last selecting layer's rows
};

// One decode step of every layer through `policy`, on `backend`'s memory.
StepResult decode_step(AttentionBackend& backend, kascade::AttentionPolicy& policy, const EngineState& s) {
  std::vector<int32_t> cu_q_lens(s.batch + 1), q_lens(s.batch, 1);
  std::iota(cu_q_lens.begin(), cu_q_lens.end(), 0);
  const BackendBuffer block_table = upload_ints(backend, s.block_table);
  const BackendBuffer kv_lens = upload_ints(backend, kKvLens);
  const BackendBuffer cu_q = upload_ints(backend, cu_q_lens);
  const size_t out_elems = static_cast<size_t>(s.batch) * kHeads * kHeadDim;
  const BackendBuffer out = take(backend.allocate(out_elems * kascade::dtype_size(kDtype)), "allocate");

  CHECK_OK(policy.begin_forward({kascade::ForwardMode::kDecode, s.batch, q_lens.data(), kKvLens.data()}));
  StepResult result;
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    const BackendBuffer k = upload_floats(backend, s.k[layer], kDtype);
    const BackendBuffer v = upload_floats(backend, s.v[layer], kDtype);
    const BackendBuffer q = upload_floats(backend, s.q[layer], kDtype);
    kascade::QueryBatch query{q.data(), kDtype, s.batch, s.batch, kHeads, kHeadDim, cu_q.as<const int32_t>()};
    kascade::PagedKv cache{k.data(), v.data(), kDtype, s.num_pages, kPageSize, kKvHeads, kHeadDim,
                           block_table.as<const int32_t>(), s.max_pages_per_seq, kv_lens.as<const int32_t>()};
    const kascade::AttentionOutput output{out.data(), kDtype, nullptr};
    CHECK_OK(policy.attention(layer, query, cache, {1.0f / std::sqrt(static_cast<float>(kHeadDim))}, output));
    result.outputs.push_back(download_floats(backend, out, kDtype, out_elems));
  }
  result.statistics = policy.statistics();
  result.indices = take(policy.snapshot_indices(), "snapshot_indices");
  return result;
}

kascade::PolicyConfig policy_config(const std::string& name) {
  kascade::PolicyConfig c;
  c.name = name;
  c.num_layers = kLayers;
  c.num_heads = kHeads;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.budget.rho_ppm = 100000;  // Top-k 10 %
  c.budget.k_min = 16;
  if (name == "kascade") c.schedule = take(kascade::identity_schedule({0, 2}, kLayers, kKvHeads), "schedule");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string device = argc > 1 ? argv[1] : "cpu";
  std::shared_ptr<AttentionBackend> backend;
  if (device == "cuda") {
    kascade::CudaBackendOptions options;
    options.max_batch = static_cast<int32_t>(kKvLens.size());
    options.max_seq_len = 2048;
    backend = take(kascade::make_cuda_backend(options), "make_cuda_backend");
  } else if (device == "cpu") {
    backend = kascade::make_cpu_backend();
  } else {
    std::fprintf(stderr, "usage: %s [cpu|cuda]\n", argv[0]);
    return 2;
  }
  const EngineState state = make_state(20261205);
  auto dense = take(kascade::make_policy(policy_config("dense"), backend), "make_policy(dense)");
  auto kascade_policy = take(kascade::make_policy(policy_config("kascade"), backend), "make_policy(kascade)");
  const StepResult reference = decode_step(*backend, *dense, state);
  const StepResult sparse = decode_step(*backend, *kascade_policy, state);

  std::printf("backend %s, %d layers, H %d, G %d, d %d, kv_lens %d and %d, pages of %d\n", backend->name(), kLayers,
              kHeads, kKvHeads, kHeadDim, kKvLens[0], kKvLens[1], kPageSize);
  std::printf("| layer | role | keys read | max |o - o_dense| / max |o_dense| |\n|---|---|---|---|\n");
  double worst = 0.0;
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    const std::vector<float>& a = sparse.outputs[layer];
    const std::vector<float>& b = reference.outputs[layer];
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    }
    const double relative = diff / std::max(scale, 1e-30);
    worst = std::max(worst, relative);
    const auto role = take(kascade_policy->role(layer, kascade::ForwardMode::kDecode), "role");
    std::printf("| %d | %s | %.3f | %.4f |\n", layer, kascade::layer_role_name(role),
                sparse.statistics.layer(kascade::ForwardMode::kDecode, layer).fraction(), relative);
  }
  // The last anchor's rows: every needle of every sequence in every KV group's row.
  const kascade::IndexSnapshot& rows = sparse.indices;
  int32_t found = 0, wanted = 0;
  for (int32_t b = 0; b < state.batch; ++b) {
    for (int32_t r = 0; r < rows.num_rows; ++r) {
      const int32_t* row = &rows.indices[(static_cast<size_t>(b) * rows.num_rows + r) * rows.k_max];
      const std::set<int32_t> keys(row, row + rows.row_lens[b * rows.num_rows + r]);
      for (const int32_t j : state.needles[b]) found += keys.count(j) > 0 ? 1 : 0;
      wanted += kNeedles;
    }
  }
  std::printf("needles in the Top-k rows of layer %d: %d of %d; worst output difference %.4f\n",
              rows.producer_layer, found, wanted, worst);
  if (found != wanted || worst > 0.02) {
    std::fprintf(stderr, "engine_decode: Kascade did not match dense attention on planted needles\n");
    return 1;
  }
  return 0;
}
