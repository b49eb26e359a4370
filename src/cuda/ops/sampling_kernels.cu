// src/cuda/ops/sampling_kernels.cu — greedy and temperature / top-k / top-p sampling on the GPU
// (sampling.h): argmax reduction; row statistics; (logit, id) keys sorted by CUB's segmented radix
// sort; one block per row scanning the ranked probabilities in fp64. Tested by
// tests/cuda/test_ops_sampling.cpp against the CPU sampler (src/runtime/sampler.h).
#include <cub/cub.cuh>

#include <cmath>
#include <limits>

#include "cuda/common/cuda_status.h"
#include "cuda/ops/sampling.h"

namespace kascade::cuda {
namespace {

constexpr int kThreads = 1024;      // argmax
constexpr int kArgmaxLoads = 8;     // argmax loads in flight per thread
constexpr int kScanThreads = 512;   // row statistics and the ranked scans (register budget: no spills)

struct MaxOp {
  __device__ double operator()(double a, double b) const { return a > b ? a : b; }
};

size_t align_up(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

__device__ __forceinline__ uint32_t ordered_bits(float f) {
  const uint32_t u = __float_as_uint(f + 0.0f);  // -0 → +0: equal logits compare equal, as on the CPU
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Greedy: the largest logit, ties to the lower id; −1 when the row holds a NaN.
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int64_t vocab, int32_t* __restrict__ tokens) {
  const float* row = logits + blockIdx.x * vocab;
  float best = -INFINITY;
  int64_t best_id = vocab;  // "none yet": loses every comparison
  bool nan = false;
  // kArgmaxLoads loads in flight per thread (the row is read once; latency, not bandwidth, bounds a
  // pass over a 128K-token vocabulary), compared in ascending i: each thread keeps its first max.
  for (int64_t base = threadIdx.x; base < vocab; base += static_cast<int64_t>(kThreads) * kArgmaxLoads) {
    float v[kArgmaxLoads];
#pragma unroll
    for (int k = 0; k < kArgmaxLoads; ++k) {
      const int64_t i = base + static_cast<int64_t>(k) * kThreads;
      v[k] = i < vocab ? __ldg(row + i) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kArgmaxLoads; ++k) {
      const int64_t i = base + static_cast<int64_t>(k) * kThreads;
      if (i >= vocab) break;
      if (isnan(v[k])) nan = true;
      else if (best_id == vocab || v[k] > best) best = v[k], best_id = i;
    }
  }
  __shared__ float s_val[kThreads];
  __shared__ int64_t s_id[kThreads];
  __shared__ int s_nan;
  if (threadIdx.x == 0) s_nan = 0;
  __syncthreads();
  if (nan) atomicOr(&s_nan, 1);
  s_val[threadIdx.x] = best;
  s_id[threadIdx.x] = best_id;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float v = s_val[threadIdx.x + stride];
      const int64_t id = s_id[threadIdx.x + stride];
      const int64_t mine = s_id[threadIdx.x];
      const bool better = id != vocab && (mine == vocab || v > s_val[threadIdx.x] ||
                                          (v == s_val[threadIdx.x] && id < mine));
      if (better) s_val[threadIdx.x] = v, s_id[threadIdx.x] = id;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) tokens[blockIdx.x] = s_nan ? -1 : static_cast<int32_t>(s_id[0]);
}

// Per row: max logit (NaN when any logit is NaN), Z = Σ exp((l − max) / T) in fp64, and the sort keys
// (~ordered(logit) << 32 | id: ascending key = descending logit, ties to the lower id).
__global__ void __launch_bounds__(kScanThreads) row_stats_kernel(const float* __restrict__ logits, int64_t vocab, double temperature,
                                 double* __restrict__ stats, uint64_t* __restrict__ keys) {
  using Reduce = cub::BlockReduce<double, kScanThreads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ float s_max;
  __shared__ int s_nan;
  const float* row = logits + blockIdx.x * vocab;
  uint64_t* key_row = keys + blockIdx.x * vocab;
  float m = -INFINITY;
  bool nan = false;
  for (int64_t i = threadIdx.x; i < vocab; i += kScanThreads) {
    const float v = row[i];
    nan |= isnan(v);
    m = fmaxf(m, v);
    key_row[i] = (static_cast<uint64_t>(~ordered_bits(v)) << 32) | static_cast<uint64_t>(i);
  }
  if (threadIdx.x == 0) s_nan = 0;
  __syncthreads();
  if (nan) atomicOr(&s_nan, 1);
  const double row_max = Reduce(temp).Reduce(static_cast<double>(m), MaxOp{});
  if (threadIdx.x == 0) s_max = static_cast<float>(row_max);
  __syncthreads();
  const double mx = static_cast<double>(s_max);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kScanThreads) sum += exp((static_cast<double>(row[i]) - mx) / temperature);
  __syncthreads();
  const double z = Reduce(temp).Sum(sum);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = (s_nan || !isfinite(mx)) ? NAN : mx;
    stats[2 * blockIdx.x + 1] = z;
  }
}

// Finds, over ranks [0, limit), the first rank whose inclusive prefix sum of value(rank) satisfies
// pred(prefix); returns it (limit when none) and the total sum over [0, limit) in *total.
template <typename Value, typename Pred>
__device__ int64_t scan_first(int64_t limit, Value value, Pred pred, double* total) {
  using Scan = cub::BlockScan<double, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ unsigned long long s_first;
  __shared__ double s_carry;
  if (threadIdx.x == 0) s_first = static_cast<unsigned long long>(limit), s_carry = 0.0;
  __syncthreads();
  for (int64_t base = 0; base < limit; base += kScanThreads) {
    const int64_t i = base + threadIdx.x;
    const double v = i < limit ? value(i) : 0.0;
    double inclusive;
    Scan(temp).InclusiveSum(v, inclusive);
    inclusive += s_carry;
    if (i < limit && pred(inclusive)) atomicMin(&s_first, static_cast<unsigned long long>(i));
    __syncthreads();
    if (threadIdx.x == kScanThreads - 1) s_carry = inclusive;
    __syncthreads();
  }
  *total = s_carry;
  return static_cast<int64_t>(s_first);
}

__global__ void __launch_bounds__(kScanThreads) pick_kernel(const float* __restrict__ logits, int64_t vocab, const uint64_t* __restrict__ sorted,
                            const double* __restrict__ stats, double temperature, int64_t keep, float top_p,
                            const double* __restrict__ uniforms, int32_t* __restrict__ tokens) {
  const int64_t r = blockIdx.x;
  const double mx = stats[2 * r], z = stats[2 * r + 1];
  if (isnan(mx)) {
    if (threadIdx.x == 0) tokens[r] = -1;
    return;
  }
  const float* row = logits + r * vocab;
  const uint64_t* ranked = sorted + r * vocab;
  const auto id_at = [&](int64_t rank) { return static_cast<int64_t>(ranked[rank] & 0xffffffffull); };
  // p as the CPU computes it: fp64 exp / Z, rounded to fp32.
  const auto prob = [&](int64_t rank) {
    return static_cast<double>(static_cast<float>(exp((static_cast<double>(row[id_at(rank)]) - mx) / temperature) / z));
  };
  double kept_mass;
  scan_first(keep, prob, [](double) { return false; }, &kept_mass);
  __syncthreads();
  const double cut = static_cast<double>(top_p);
  const bool nucleus = top_p < 1.0f;
  double total;
  const int64_t last = scan_first(keep, [&](int64_t rank) { return prob(rank) / kept_mass; },
                                  [&](double c) { return nucleus && c >= cut; }, &total);
  __syncthreads();
  const int64_t count = last < keep ? last + 1 : keep;
  if (last < keep) {  // total over the nucleus [0, count)
    scan_first(count, [&](int64_t rank) { return prob(rank) / kept_mass; }, [](double) { return false; }, &total);
    __syncthreads();
  }
  const double u = uniforms[r];
  double unused;
  const int64_t pick = scan_first(count, [&](int64_t rank) { return (prob(rank) / kept_mass) / total; },
                                  [&](double c) { return u < c; }, &unused);
  if (threadIdx.x == 0) tokens[r] = static_cast<int32_t>(id_at(pick < count ? pick : count - 1));
}

__global__ void offsets_kernel(int32_t* offsets, int32_t rows, int64_t vocab) {
  for (int32_t r = threadIdx.x; r <= rows; r += blockDim.x) offsets[r] = static_cast<int32_t>(r * vocab);
}

Result<size_t> cub_sort_bytes(int32_t max_rows, int64_t vocab) {
  size_t bytes = 0;
  const uint64_t* no_keys = nullptr;
  const int32_t* no_offsets = nullptr;
  KC_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedRadixSort::SortKeys(
      nullptr, bytes, no_keys, static_cast<uint64_t*>(nullptr), static_cast<int64_t>(max_rows) * vocab, max_rows,
      no_offsets, no_offsets, 0, 64, static_cast<cudaStream_t>(nullptr)));
  return bytes;
}

Status check_shape(int32_t max_rows, int64_t vocab) {
  KC_CHECK_ARG(max_rows >= 1 && vocab >= 1, "device sampler: max_rows = ", max_rows, ", vocab = ", vocab);
  KC_CHECK_ARG(static_cast<int64_t>(max_rows) * vocab <= std::numeric_limits<int32_t>::max(),
               "device sampler: ", max_rows, " rows x ", vocab, " logits exceed the int32 range of the sort");
  return ok_status();
}

}  // namespace

Result<size_t> DeviceSampler::workspace_bytes(int32_t max_rows, int64_t vocab) {
  KC_RETURN_IF_ERROR(check_shape(max_rows, vocab));
  KC_ASSIGN_OR_RETURN(const size_t cub_bytes, cub_sort_bytes(max_rows, vocab));
  const size_t keys = static_cast<size_t>(max_rows) * static_cast<size_t>(vocab) * sizeof(uint64_t);
  return 2 * align_up(keys) + align_up((max_rows + 1) * sizeof(int32_t)) + align_up(max_rows * 2 * sizeof(double)) +
         align_up(cub_bytes);
}

Result<std::unique_ptr<DeviceSampler>> DeviceSampler::create(int32_t max_rows, int64_t vocab, cudaStream_t stream) {
  KC_ASSIGN_OR_RETURN(const size_t total, workspace_bytes(max_rows, vocab));
  std::unique_ptr<DeviceSampler> s(new DeviceSampler());
  s->max_rows_ = max_rows;
  s->vocab_ = vocab;
  s->stream_ = stream;
  KC_ASSIGN_OR_RETURN(s->cub_bytes_, cub_sort_bytes(max_rows, vocab));
  const cudaError_t error = cudaMalloc(&s->memory_, total);
  if (error != cudaSuccess) {
    s->memory_ = nullptr;
    (void)cudaGetLastError();
    return resource_exhausted("device sampler: cannot allocate ", total, " bytes of device memory: ",
                              cudaGetErrorString(error));
  }
  char* p = static_cast<char*>(s->memory_);
  const size_t keys = static_cast<size_t>(max_rows) * static_cast<size_t>(vocab) * sizeof(uint64_t);
  s->keys_in_ = reinterpret_cast<uint64_t*>(p);
  p += align_up(keys);
  s->keys_out_ = reinterpret_cast<uint64_t*>(p);
  p += align_up(keys);
  s->offsets_ = reinterpret_cast<int32_t*>(p);
  p += align_up((max_rows + 1) * sizeof(int32_t));
  s->stats_ = reinterpret_cast<double*>(p);
  p += align_up(max_rows * 2 * sizeof(double));
  s->cub_scratch_ = p;
  offsets_kernel<<<1, 256, 0, stream>>>(s->offsets_, max_rows, vocab);
  KC_CUDA_RETURN_IF_LAUNCH_FAILED("offsets_kernel");
  Result<std::unique_ptr<DeviceSampler>> result(std::unique_ptr<DeviceSampler>(s.release()));
  return result;
}

DeviceSampler::~DeviceSampler() {
  if (memory_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFree(memory_);
  }
}

Status DeviceSampler::sample(const float* logits, int32_t rows, const SamplingParams& config, const double* uniforms,
                             int32_t* tokens) {
  KC_CHECK_ARG(rows >= 1 && rows <= max_rows_, "device sampler: ", rows, " rows; planned for 1..", max_rows_);
  KC_CHECK_ARG(logits != nullptr && tokens != nullptr, "device sampler: null pointer");
  KC_CHECK_ARG(std::isfinite(config.temperature) && config.temperature >= 0.0f, "device sampler: temperature ",
               config.temperature, " must be finite and >= 0");
  KC_CHECK_ARG(config.top_k >= 0 && config.top_p > 0.0f && config.top_p <= 1.0f, "device sampler: top_k ",
               config.top_k, " (>= 0) and top_p ", config.top_p, " (in (0, 1])");
  if (config.temperature == 0.0f) {
    argmax_kernel<<<rows, kThreads, 0, stream_>>>(logits, vocab_, tokens);
    KC_CUDA_RETURN_IF_LAUNCH_FAILED("argmax_kernel");
    return ok_status();
  }
  KC_CHECK_ARG(uniforms != nullptr, "device sampler: uniforms are null");
  const double temperature = static_cast<double>(config.temperature);
  row_stats_kernel<<<rows, kScanThreads, 0, stream_>>>(logits, vocab_, temperature, stats_, keys_in_);
  KC_CUDA_RETURN_IF_LAUNCH_FAILED("row_stats_kernel");
  size_t bytes = cub_bytes_;
  const int32_t* begin = offsets_;
  KC_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedRadixSort::SortKeys(
      cub_scratch_, bytes, static_cast<const uint64_t*>(keys_in_), keys_out_, static_cast<int64_t>(rows) * vocab_, rows,
      begin, begin + 1, 0, 64, stream_));
  const int64_t keep = config.top_k > 0 ? std::min<int64_t>(config.top_k, vocab_) : vocab_;
  pick_kernel<<<rows, kScanThreads, 0, stream_>>>(logits, vocab_, keys_out_, stats_, temperature, keep, config.top_p,
                                              uniforms, tokens);
  KC_CUDA_RETURN_IF_LAUNCH_FAILED("pick_kernel");
  return ok_status();
}

}  // namespace kascade::cuda
