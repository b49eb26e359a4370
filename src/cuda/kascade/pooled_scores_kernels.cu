// src/cuda/kascade/pooled_scores_kernels.cu — pooling of the anchor's post-softmax scores
// (DESIGN.md §2.2, §2.4): from the logits σ·q·k and the exact per-head LSE written by the scoring
// pass, p_h[j] = exp(logit − lse_h), reduced over the heads of each pooling row with a sum
// (kascade: one row per KV group; kascade-pooled: one row over all heads) or a max (omnikv), or
// one row per head (oracle). The logits are key-major per KV group ([B, G, stride, GP], GP = the
// group size rounded up to a power of two), so a key's heads of one group are one 4·GP-byte vector
// load; consecutive threads take consecutive keys (coalesced), four keys each per step, one KV
// group at a time with the four keys' loads in flight. The arithmetic is pool_device.cuh's (one
// FFMA + MUFU.EX2 per probability), shared with the fused pooling of row_topk_kernel.cu, so both
// give the same bits. Memory-bound. Optionally also counts the
// first radix digit of every pooled score into a per-row histogram (shared-memory histogram per
// block, then one global atomic per non-empty bin), so the Top-k kernel skips its first pass over
// the row. Shared counts go through BinCache: the scores of a row crowd into one or two bins.
// Tested by tests/cuda/test_anchor_decode.cpp against ref::pooled_scores_decode_ref.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/pool_device.cuh"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kPoolThreads = 256;
constexpr int kPoolKeysPerThread = 4;
constexpr int kPoolSteps = 4;  // a block covers kPoolSteps x 1024 keys (amortises its histogram)
constexpr int kPoolKeysPerStep = kPoolThreads * kPoolKeysPerThread;
constexpr int kPoolKeysPerBlock = kPoolSteps * kPoolKeysPerStep;

template <int GP, bool kMax>
__global__ void __launch_bounds__(kPoolThreads) pool_scores_kernel(const PoolScoresParams p) {
  __shared__ int hist[kTopkBins];
  const int r = blockIdx.y, b = blockIdx.z;
  int n = p.kv_lens[b];
  n = n < 0 ? 0 : (n > p.max_seq_len ? p.max_seq_len : n);
  const int block_base = blockIdx.x * kPoolKeysPerBlock;
  if (block_base >= n) return;  // whole block idle
  const bool with_hist = p.first_histograms != nullptr;
  if (with_hist) {
    for (int i = threadIdx.x; i < kTopkBins; i += kPoolThreads) hist[i] = 0;
    __syncthreads();
  }
  const PoolRowHeads rh = pool_row_heads(p.num_heads, p.num_kv_heads, p.num_rows, r);
  const float* lse_b = p.lse + static_cast<int64_t>(b) * p.num_heads;
  float* out = p.pooled + (static_cast<int64_t>(b) * p.num_rows + r) * p.stride;
  BinCache cache;
  for (int step = 0; step < kPoolSteps; ++step) {
    const int step_base = block_base + step * kPoolKeysPerStep;
    if (step_base >= n) break;
    int keys[kPoolKeysPerThread];
#pragma unroll
    for (int e = 0; e < kPoolKeysPerThread; ++e) {
      const int j = step_base + e * kPoolThreads + threadIdx.x;
      keys[e] = j < n ? j : -1;
    }
    float acc[kPoolKeysPerThread] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kv = rh.kv_first; kv <= rh.kv_last; ++kv) {
      const float* group_logits = p.logits + (static_cast<int64_t>(b) * p.num_kv_heads + kv) * p.stride * GP;
      pool_group_keys<kMax, GP>(group_logits, lse_b, rh, kv, keys, acc);
    }
#pragma unroll
    for (int e = 0; e < kPoolKeysPerThread; ++e) {
      const int j = step_base + e * kPoolThreads + threadIdx.x;
      if (j < n) out[j] = acc[e];
      if (with_hist) cache.add(hist, j < n ? static_cast<int>(float_order_key(acc[e]) >> kTopkFirstShift) : -1);
    }
  }
  if (!with_hist) return;
  cache.flush(hist);
  __syncthreads();
  int32_t* global = p.first_histograms + (static_cast<int64_t>(b) * p.num_rows + r) * kTopkBins;
  for (int i = threadIdx.x; i < kTopkBins; i += kPoolThreads) {
    if (hist[i] != 0) atomicAdd(global + i, hist[i]);
  }
}

}  // namespace

cudaError_t launch_pool_scores(const PoolScoresParams& params, int batch, cudaStream_t stream) {
  if (batch < 1 || params.num_rows < 1 || params.num_heads % params.num_rows != 0 || params.num_kv_heads < 1 ||
      params.num_heads % params.num_kv_heads != 0 || params.stride % 4 != 0 ||
      params.logits_heads < params.num_heads / params.num_kv_heads)
    return cudaErrorInvalidValue;
  const dim3 grid((params.max_seq_len + kPoolKeysPerBlock - 1) / kPoolKeysPerBlock, params.num_rows, batch);
  const auto launch = [&](auto sum_kernel, auto max_kernel) {
    (params.reduce_max != 0 ? max_kernel : sum_kernel)<<<grid, kPoolThreads, 0, stream>>>(params);
    return cudaGetLastError();
  };
  switch (params.logits_heads) {
    case 1: return launch(pool_scores_kernel<1, false>, pool_scores_kernel<1, true>);
    case 2: return launch(pool_scores_kernel<2, false>, pool_scores_kernel<2, true>);
    case 4: return launch(pool_scores_kernel<4, false>, pool_scores_kernel<4, true>);
    case 8: return launch(pool_scores_kernel<8, false>, pool_scores_kernel<8, true>);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kascade::cuda::detail
