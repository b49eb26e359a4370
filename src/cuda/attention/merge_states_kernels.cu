// src/cuda/attention/merge_states_kernels.cu — the merge of two partial attention states
// (merge_states.h): one warp per row; lane 0 reads both LSEs and broadcasts them, so outputs may
// alias input a. Tested by tests/cuda/test_merge_states.cpp against ref::merge_states_ref.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/attention/merge_states_kernels.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kMergeThreads = 256;

__global__ void __launch_bounds__(kMergeThreads) merge_states_kernel(const float* o_a, const float* lse_a,
                                                                     const float* o_b, const float* lse_b,
                                                                     int64_t rows, int head_dim, float* o,
                                                                     float* lse) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kMergeThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  float la = 0.0f, lb = 0.0f;
  if (lane == 0) {
    la = lse_a[row];
    lb = lse_b[row];
  }
  la = __shfl_sync(0xffffffffu, la, 0);
  lb = __shfl_sync(0xffffffffu, lb, 0);
  const float m = fmaxf(la, lb);
  const bool empty = m == -INFINITY;
  const float wa = empty ? 0.0f : expf(la - m);
  const float wb = empty ? 0.0f : expf(lb - m);
  const float sum = wa + wb;
  const float inv = empty ? 0.0f : 1.0f / sum;
  for (int c = lane; c < head_dim; c += 32) {
    const int64_t i = row * head_dim + c;
    o[i] = empty ? 0.0f : (o_a[i] * wa + o_b[i] * wb) * inv;
  }
  __syncwarp();
  if (lane == 0) lse[row] = empty ? -INFINITY : m + logf(sum);
}

}  // namespace

cudaError_t launch_merge_states(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b,
                                int64_t rows, int head_dim, float* o, float* lse, cudaStream_t stream) {
  const int64_t rows_per_block = kMergeThreads / 32;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (rows < 1 || head_dim < 1 || blocks > 0x7fffffff) return cudaErrorInvalidValue;
  merge_states_kernel<<<static_cast<unsigned>(blocks), kMergeThreads, 0, stream>>>(o_a, lse_a, o_b, lse_b, rows,
                                                                                    head_dim, o, lse);
  return cudaGetLastError();
}

}  // namespace kascade::cuda::detail
