// tests/cuda/cuda_test_support.h — what the CUDA kernel tests share: skipping without a GPU,
// owning device buffers with NaN/0xFF poison and canary guards, a random paged decode problem
// (shuffled pages, awkward lengths) with host and device views, and fp64 / naive same-precision
// recomputations of decode attention for the FA3 tolerance rule (harness within_naive_error).
// The helpers are exercised by every test in tests/cuda/; the fp64 recomputation is itself checked
// against src/ref in DenseDecode tests (both must agree within the rule).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/plan_support.h"  // KC_SKIP_BELOW_SM90
#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "kascade/status.h"
#include "testing/harness.h"  // KC_ASSERT_OK

namespace kascade::testing {

// True when the CUDA runtime reports at least one device.
bool cuda_device_available();

#define KC_SKIP_WITHOUT_GPU()                                                     \
  do {                                                                            \
    if (!::kascade::testing::cuda_device_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Skips a test of an sm_90 launch feature (thread-block clusters, programmatic dependent launch) on an
// older device; `what` names the feature.
#define KC_SKIP_BELOW_SM90(what)                                                                     \
  do {                                                                                              \
    auto kc_sm90_ = ::kascade::cuda::detail::current_device_has_clusters();                        \
    ASSERT_TRUE(kc_sm90_.ok()) << kc_sm90_.status().to_string();                                   \
    if (!*kc_sm90_) GTEST_SKIP() << what << " need(s) compute capability 9.0";                      \
  } while (0)

#define KC_ASSERT_CUDA(expr)                                                         \
  do {                                                                               \
    const cudaError_t kc_e_ = (expr);                                                \
    ASSERT_EQ(kc_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(kc_e_);     \
  } while (0)

// A device allocation of `bytes` with `guard` bytes of canary (0xA5) on each side; the payload is
// filled with `fill` (0xFF by default: NaN for f16/bf16/f32, -1 for int32).
class DeviceBuffer {
 public:
  static constexpr size_t kGuard = 256;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, uint8_t fill = 0xFF);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return base_ ? base_ + kGuard : nullptr; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t bytes);
  void fill(uint8_t byte);
  std::vector<uint8_t> download() const;
  template <typename T>
  std::vector<T> download_as() const {
    std::vector<uint8_t> raw = download();
    std::vector<T> out(raw.size() / sizeof(T));
    std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
    return out;
  }
  // Whether both canary zones still hold 0xA5.
  bool guards_intact() const;

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

template <typename T>
DeviceBuffer upload_vector(const std::vector<T>& values) {
  DeviceBuffer buffer(std::max<size_t>(values.size() * sizeof(T), 1));
  buffer.upload(values.data(), values.size() * sizeof(T));
  return buffer;
}

// Converts a downloaded buffer of `dtype` to floats.
std::vector<float> to_floats(const std::vector<uint8_t>& raw, DType dtype);

struct DecodeCase {
  DType dtype = DType::kF16;
  int32_t num_heads = 8;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 128;
  int32_t page_size = 16;  // 0: contiguous (one page per sequence of max_seq_len rounded to 2^k)
  std::vector<int32_t> kv_lens;
  int32_t max_seq_len = 0;  // 0: the longest kv_len
  float q_range = 2.0f, k_range = 2.0f, v_range = 1.0f;
};

// One decode step's inputs: q [B, H, d], a paged K/V cache with pages shuffled across sequences,
// the block table (entries past a sequence's pages are -1), kv_lens. Values are drawn in the dtype
// (the float copies equal what the device holds). Without a CUDA device only the host side exists
// (device views then hold null pointers).
class DecodeProblem {
 public:
  DecodeProblem(const DecodeCase& c, std::mt19937_64& rng);

  const DecodeCase& spec() const { return case_; }
  int32_t batch() const { return static_cast<int32_t>(case_.kv_lens.size()); }
  int32_t page_size() const { return page_size_; }
  int32_t max_seq_len() const { return max_seq_len_; }
  float scale() const;

  QueryBatch host_q() const;
  PagedKv host_kv() const;
  QueryBatch device_q() const;
  PagedKv device_kv() const;

  // Replaces q (host and device) with fresh random values; replaces kv_lens (host and device,
  // each <= the pages allocated for the sequence).
  void redraw_q(std::mt19937_64& rng);
  void set_kv_lens(const std::vector<int32_t>& kv_lens);

  // Host float images: q[(b*H + h)*d + c]; key/value of (b, j, g) as a pointer to d floats.
  const float* q_row(int32_t b, int32_t h) const;
  const float* k_row(int32_t b, int32_t j, int32_t g) const;
  const float* v_row(int32_t b, int32_t j, int32_t g) const;
  const std::vector<int32_t>& kv_lens() const { return kv_lens_; }

 private:
  int64_t row_offset(int32_t b, int32_t j, int32_t g) const;
  DecodeCase case_;
  int32_t page_size_ = 0, max_seq_len_ = 0, max_pages_ = 0, num_pages_ = 0;
  std::vector<float> q_, k_, v_;
  std::vector<uint8_t> q_bytes_, k_bytes_, v_bytes_;
  std::vector<int32_t> block_table_, kv_lens_, cu_q_lens_;
  DeviceBuffer q_d_, k_d_, v_d_, table_d_, lens_d_;
};

// Per (b, head): the keys that head attends (dense: 0..n-1; sparse: the row's entries).
using KeyLists = std::vector<std::vector<int32_t>>;  // [B * H]
KeyLists dense_key_lists(const DecodeProblem& p);
// rows: host copy [B, num_rows, k_max] / row_lens [B, num_rows]; head_map [G] or empty.
KeyLists sparse_key_lists(const DecodeProblem& p, const std::vector<int32_t>& indices,
                          const std::vector<int32_t>& row_lens, int32_t num_rows, int32_t k_max,
                          IndexGranularity granularity, const std::vector<int32_t>& head_map);

// One query row's attention over `keys` (non-empty): the fp64 result (o64: d values, lse64) and
// the naive same-precision one (logits, weights and output rounded to `dtype`), written at the
// given pointers. k_row / v_row give the d floats of key j. Shared by the decode and prefill
// recomputations.
void recompute_row(const float* q, const std::vector<int32_t>& keys, const std::function<const float*(int32_t)>& k_row,
                   const std::function<const float*(int32_t)>& v_row, int32_t d, double scale, DType dtype, double* o64,
                   double* lse64, float* naive_o);

// lse against the fp64 reference, within 1e-4 + 1e-5|lse|; an infinite reference needs -inf.
// Rows are reported as (row / heads, row % heads) with `row_name` naming the pair.
::testing::AssertionResult check_lse(const std::vector<float>& got, const std::vector<double>& want, int32_t heads,
                                     const char* row_name);

struct AttentionResult {
  std::vector<double> o64, lse64;  // fp64 recomputation: o [B*H*d], lse [B*H]
  std::vector<float> naive_o;      // same-precision naive implementation (scores, p and o rounded)
};
AttentionResult recompute_attention(const DecodeProblem& p, const KeyLists& keys);

// Checks o (device dtype) and lse against the fp64 recomputation: o by the FA3 rule
// (<= 2 x naive error + 2 unit roundoffs), lse within 1e-4 + 1e-5|lse|; -inf/0 for empty lists.
::testing::AssertionResult check_attention(const DecodeProblem& p, const KeyLists& keys,
                                           const std::vector<float>& got_o, const std::vector<float>& got_lse);

// Random duplicate-free subset of [0, n) of size k (ascending when `sorted`).
std::vector<int32_t> random_subset(std::mt19937_64& rng, int32_t n, int32_t k, bool sorted);

}  // namespace kascade::testing
