// src/cuda/kascade/pooled_scores_kernels.cu — pooling of the anchor's post-softmax scores
// (DESIGN.md §2.2, §2.4): from the logits σ·q·k and the exact per-head LSE written by the scoring
// pass, p_h[j] = exp(logit − lse_h), reduced over the heads of each pooling row with a sum
// (kascade: one row per KV group; kascade-pooled: one row over all heads) or a max (omnikv), or
// one row per head (oracle). Memory-bound: each thread handles four keys with 16-byte loads,
// four heads' loads in flight at once. Optionally also counts the first radix digit of every
// pooled score into a per-row histogram (shared-memory histogram per block, then one global
// atomic per non-empty bin), so the Top-k kernel skips its first pass over the row.
// Shared counts go through BinCache: the scores of a row crowd into one or two bins.
// Tested by tests/cuda/test_anchor_decode.cpp against ref::pooled_scores_decode_ref.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kPoolThreads = 256;
constexpr int kPoolKeysPerThread = 4;
constexpr int kPoolHeadsInFlight = 4;
constexpr int kPoolSteps = 4;  // a block covers kPoolSteps x 1024 keys (amortises its histogram)
constexpr int kPoolKeysPerBlock = kPoolSteps * kPoolThreads * kPoolKeysPerThread;

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
  const int heads_per_row = p.num_heads / p.num_rows;
  const int h0 = r * heads_per_row;
  float* out = p.pooled + (static_cast<int64_t>(b) * p.num_rows + r) * p.stride;
  BinCache cache;
  for (int step = 0; step < kPoolSteps; ++step) {
    const int j0 = block_base + (step * kPoolThreads + threadIdx.x) * kPoolKeysPerThread;
    if (j0 >= n) break;
    const bool full = j0 + kPoolKeysPerThread <= n;
    float acc[kPoolKeysPerThread] = {0.0f, 0.0f, 0.0f, 0.0f};  // every p >= 0, so 0 also starts a max
    for (int hb = h0; hb < h0 + heads_per_row; hb += kPoolHeadsInFlight) {
      float x[kPoolHeadsInFlight][kPoolKeysPerThread];
      float lse[kPoolHeadsInFlight];
#pragma unroll
      for (int u = 0; u < kPoolHeadsInFlight; ++u) {
        const int h = hb + u;
        const bool head_ok = h < h0 + heads_per_row;
        const int64_t bh = static_cast<int64_t>(b) * p.num_heads + (head_ok ? h : h0);
        const float* row = p.logits + bh * p.stride;
        lse[u] = head_ok ? p.lse[bh] : INFINITY;  // exp(x - inf) = 0 for the padding heads
        if (full) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(row + j0));
          x[u][0] = v.x, x[u][1] = v.y, x[u][2] = v.z, x[u][3] = v.w;
        } else {
#pragma unroll
          for (int e = 0; e < kPoolKeysPerThread; ++e) x[u][e] = j0 + e < n ? row[j0 + e] : -INFINITY;
        }
      }
#pragma unroll
      for (int u = 0; u < kPoolHeadsInFlight; ++u) {
#pragma unroll
        for (int e = 0; e < kPoolKeysPerThread; ++e) {
          const float prob = expf(x[u][e] - lse[u]);
          acc[e] = p.reduce_max ? fmaxf(acc[e], prob) : acc[e] + prob;
        }
      }
    }
    if (full) {
      *reinterpret_cast<float4*>(out + j0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    } else {
      for (int e = 0; e < kPoolKeysPerThread && j0 + e < n; ++e) out[j0 + e] = acc[e];
    }
    if (with_hist) {
#pragma unroll
      for (int e = 0; e < kPoolKeysPerThread; ++e)
        cache.add(hist, j0 + e < n ? static_cast<int>(float_order_key(acc[e]) >> kTopkFirstShift) : -1);
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
  if (batch < 1 || params.num_rows < 1 || params.num_heads % params.num_rows != 0 || params.stride % 4 != 0)
    return cudaErrorInvalidValue;
  const dim3 grid((params.max_seq_len + kPoolKeysPerBlock - 1) / kPoolKeysPerBlock, params.num_rows, batch);
  pool_scores_kernel<<<grid, kPoolThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace kascade::cuda::detail
