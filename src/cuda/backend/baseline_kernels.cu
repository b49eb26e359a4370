// src/cuda/backend/baseline_kernels.cu — baseline selection kernels of the CUDA backend
// (baseline_kernels.h): Quest page scores (per-channel page min/max, fp64 scores in the CPU
// backend's operation order), Quest page selection (rank of every page by counting, O(pages²) per
// row — simple, not tuned: baselines exist for accuracy studies) and the score gather behind
// LessIsMore's host merge.
// Tested by tests/cuda/test_backend_policies.cpp and test_backend_ops.cpp (Quest rows equal the
// CPU backend's exactly).
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/backend/baseline_kernels.h"
#include "cuda/common/device_errors.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kScoreThreads = 128;
constexpr int kPagesPerBlock = 16;
constexpr int kMaxHeadDim = 128;
constexpr int kSelectThreads = 256;
constexpr int kGatherThreads = 256;

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// kv_len of sequence b clamped to [0, max_seq_len]; `flag` says whether this thread reports it.
__device__ __forceinline__ int clamped_kv_len(const int32_t* kv_lens, int b, int max_seq_len, uint32_t* flags,
                                              bool flag) {
  int n = kv_lens[b];
  if (n < 0 || n > max_seq_len) {
    if (flag) atomicOr(flags, static_cast<uint32_t>(kErrorKvLen));
    n = n < 0 ? 0 : max_seq_len;
  }
  return n;
}

template <typename T>
__global__ void __launch_bounds__(kScoreThreads) quest_page_scores_kernel(const QuestScoreParams p) {
  __shared__ float page_min[kPagesPerBlock][kMaxHeadDim + 1];  // +1: heads of different pages hit different banks
  __shared__ float page_max[kPagesPerBlock][kMaxHeadDim + 1];
  const int g = blockIdx.y, b = blockIdx.z;
  const int n = clamped_kv_len(p.kv_lens, b, p.max_seq_len, p.error_flags,
                               blockIdx.x == 0 && g == 0 && threadIdx.x == 0);
  const int num_qpages = (n + p.quest_page - 1) / p.quest_page;
  const int page0 = blockIdx.x * kPagesPerBlock;
  if (page0 >= num_qpages) return;
  const int d = p.head_dim;
  const T* keys = static_cast<const T*>(p.k);
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_pages_per_seq;
  for (int i = threadIdx.x; i < kPagesPerBlock * d; i += kScoreThreads) {
    const int local = i / d, c = i % d;
    const int page = page0 + local;
    if (page >= num_qpages) continue;
    const int begin = page * p.quest_page;
    const int end = min(n, begin + p.quest_page);
    float lo = 0.0f, hi = 0.0f;
    for (int j = begin; j < end; ++j) {
      const int slot = j / p.kv_page_size;
      const int page_id = slot < p.max_pages_per_seq ? table[slot] : -1;
      float x = 0.0f;
      if (page_id < 0 || page_id >= p.num_pages) {
        atomicOr(p.error_flags, static_cast<uint32_t>(kErrorPage));
      } else {
        const int64_t row = (static_cast<int64_t>(page_id) * p.kv_page_size + j % p.kv_page_size) * p.num_kv_heads + g;
        x = to_float(keys[row * d + c]);
      }
      // std::min / std::max as the CPU backend applies them: (x < lo) ? x : lo, (hi < x) ? x : hi.
      lo = j == begin ? x : (x < lo ? x : lo);
      hi = j == begin ? x : (hi < x ? x : hi);
    }
    page_min[local][c] = lo;
    page_max[local][c] = hi;
  }
  __syncthreads();
  const int group = p.num_heads / p.num_kv_heads;
  const T* queries = static_cast<const T*>(p.q);
  for (int i = threadIdx.x; i < kPagesPerBlock * group; i += kScoreThreads) {
    const int local = i / group;
    const int page = page0 + local;
    if (page >= num_qpages) continue;
    const int h = g * group + i % group;
    const T* q = queries + (static_cast<int64_t>(b) * p.num_heads + h) * d;
    double s = 0.0;
    for (int c = 0; c < d; ++c) {  // ascending channels, no contraction: the CPU's sum, bit for bit
      const double qc = static_cast<double>(to_float(q[c]));
      const double a = __dmul_rn(qc, static_cast<double>(page_min[local][c]));
      const double m = __dmul_rn(qc, static_cast<double>(page_max[local][c]));
      s = __dadd_rn(s, a < m ? m : a);
    }
    p.scores[(static_cast<int64_t>(b) * p.num_heads + h) * p.score_stride + page] = s;
  }
}

__global__ void __launch_bounds__(kSelectThreads) quest_select_kernel(const QuestSelectParams p) {
  using BlockScan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  const int h = blockIdx.x, b = blockIdx.y;
  const int tid = threadIdx.x;
  const int64_t row = static_cast<int64_t>(b) * p.num_heads + h;
  const bool reporter = tid == 0 && h == 0;
  const int n = clamped_kv_len(p.kv_lens, b, p.max_seq_len, p.error_flags, reporter);
  int k = p.k_per_seq[b];
  if (k < 0 || k > n) {
    if (reporter) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
    k = k < 0 ? 0 : n;
  }
  const int qp = p.quest_page;
  const int num_qpages = (n + qp - 1) / qp;
  const int last_size = n - (num_qpages - 1) * qp;  // keys of the last page (meaningful when num_qpages > 0)
  const double* score = p.scores + row * p.score_stride;
  uint8_t* taken = p.taken + row * p.score_stride;

  // 1. A page is taken when the pages ranked before it (higher score, or equal score and lower
  //    page) hold fewer than k keys. Every page holds qp keys except the last.
  for (int pg = tid; pg < num_qpages; pg += kSelectThreads) {
    const double mine = score[pg];
    int64_t rank = 0;
    for (int other = 0; other < num_qpages; ++other) {
      const double s = score[other];
      rank += (s > mine || (s == mine && other < pg)) ? 1 : 0;
    }
    const int last = num_qpages - 1;
    const bool last_before = pg != last && score[last] > mine;  // `last` is never below pg
    const int64_t keys_before = rank * qp - (last_before ? qp - last_size : 0);
    taken[pg] = keys_before < k ? 1 : 0;
  }
  __syncthreads();

  // 2. Keys of the taken pages in ascending order: contiguous page ranges per thread, block scan.
  const int chunk = (num_qpages + kSelectThreads - 1) / kSelectThreads;
  const int first = min(num_qpages, tid * chunk);
  const int end = min(num_qpages, first + chunk);
  int count = 0;
  for (int pg = first; pg < end; ++pg) {
    if (taken[pg]) count += pg == num_qpages - 1 ? last_size : qp;
  }
  int offset = 0, total = 0;
  BlockScan(scan_storage).ExclusiveSum(count, offset, total);
  int32_t* out = p.indices + row * p.k_max;
  bool overflow = false;
  for (int pg = first; pg < end; ++pg) {
    if (!taken[pg]) continue;
    const int key_end = min(n, (pg + 1) * qp);
    for (int j = pg * qp; j < key_end; ++j, ++offset) {
      if (offset < p.k_max) {
        out[offset] = j;
      } else {
        overflow = true;
      }
    }
  }
  if (overflow) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
  const int len = min(total, p.k_max);
  for (int i = len + tid; i < p.k_max; i += kSelectThreads) out[i] = -1;
  if (tid == 0) p.row_lens[row] = len;
}

__global__ void __launch_bounds__(kGatherThreads) gather_scores_kernel(const GatherScoresParams p) {
  const int i = blockIdx.x * kGatherThreads + threadIdx.x;
  const int r = blockIdx.y, b = blockIdx.z;
  if (i >= p.k_max) return;
  const int64_t row = static_cast<int64_t>(b) * p.num_rows + r;
  const int len = p.row_lens[row];
  float value = 0.0f;
  if (i < len) {
    const int32_t key = p.indices[row * p.k_max + i];
    if (key >= 0 && key < p.score_stride) value = p.scores[row * p.score_stride + key];
  }
  p.gathered[row * p.k_max + i] = value;
}

}  // namespace

cudaError_t launch_quest_page_scores(const QuestScoreParams& params, int batch, cudaStream_t stream) {
  if (batch < 1 || batch > 65535 || params.num_kv_heads < 1 || params.num_kv_heads > 65535 ||
      params.head_dim < 1 || params.head_dim > kMaxHeadDim || params.quest_page < 1 || params.kv_page_size < 1 ||
      params.score_stride < 1 || params.num_heads % params.num_kv_heads != 0)
    return cudaErrorInvalidValue;
  const int64_t blocks = (params.score_stride + kPagesPerBlock - 1) / kPagesPerBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), params.num_kv_heads, batch);
  if (params.element == KvElement::kF16) {
    quest_page_scores_kernel<__half><<<grid, kScoreThreads, 0, stream>>>(params);
  } else {
    quest_page_scores_kernel<__nv_bfloat16><<<grid, kScoreThreads, 0, stream>>>(params);
  }
  return cudaGetLastError();
}

cudaError_t launch_quest_select(const QuestSelectParams& params, int batch, cudaStream_t stream) {
  if (batch < 1 || batch > 65535 || params.num_heads < 1 || params.quest_page < 1 || params.k_max < 1)
    return cudaErrorInvalidValue;
  quest_select_kernel<<<dim3(params.num_heads, batch), kSelectThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

cudaError_t launch_gather_scores(const GatherScoresParams& params, int batch, cudaStream_t stream) {
  if (batch < 1 || batch > 65535 || params.num_rows < 1 || params.num_rows > 65535 || params.k_max < 1)
    return cudaErrorInvalidValue;
  const dim3 grid((params.k_max + kGatherThreads - 1) / kGatherThreads, params.num_rows, batch);
  gather_scores_kernel<<<grid, kGatherThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace kascade::cuda::detail
