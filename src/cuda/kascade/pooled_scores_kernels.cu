// src/cuda/kascade/pooled_scores_kernels.cu — pooling of the anchor's post-softmax scores
// (DESIGN.md §2.2, §2.4): from the logits σ·q·k and the exact per-head LSE written by the scoring
// pass, p_h[j] = exp(logit − lse_h), reduced over the heads of each pooling row with a sum
// (kascade: one row per KV group; kascade-pooled: one row over all heads) or a max (omnikv), or
// one row per head (oracle). The logits are key-major per KV group ([B, G, stride, GP], GP = the
// group size rounded up to a power of two), so a key's heads of one group are one 4·GP-byte vector
// load; consecutive threads take consecutive keys (coalesced), four keys each per step, one KV
// group at a time with the four keys' loads in flight. Memory-bound. Optionally also counts the
// first radix digit of every pooled score into a per-row histogram (shared-memory histogram per
// block, then one global atomic per non-empty bin), so the Top-k kernel skips its first pass over
// the row. Shared counts go through BinCache: the scores of a row crowd into one or two bins.
// Tested by tests/cuda/test_anchor_decode.cpp against ref::pooled_scores_decode_ref.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kPoolThreads = 256;
constexpr int kPoolKeysPerThread = 4;
constexpr int kPoolSteps = 4;  // a block covers kPoolSteps x 1024 keys (amortises its histogram)
constexpr int kPoolKeysPerStep = kPoolThreads * kPoolKeysPerThread;
constexpr int kPoolKeysPerBlock = kPoolSteps * kPoolKeysPerStep;

// The GP logits of one key (one vector load of 4·GP bytes).
template <int GP>
__device__ __forceinline__ void load_key_block(const float* src, float (&x)[GP]) {
  if constexpr (GP == 1) {
    x[0] = __ldg(src);
  } else if constexpr (GP == 2) {
    const float2 v = __ldg(reinterpret_cast<const float2*>(src));
    x[0] = v.x, x[1] = v.y;
  } else {
#pragma unroll
    for (int q = 0; q < GP / 4; ++q) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(src) + q);
      x[4 * q] = v.x, x[4 * q + 1] = v.y, x[4 * q + 2] = v.z, x[4 * q + 3] = v.w;
    }
  }
}

template <int GP>
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
  const int group = p.num_heads / p.num_kv_heads;
  const int heads_per_row = p.num_heads / p.num_rows;
  const int h0 = r * heads_per_row, h1 = h0 + heads_per_row;  // the row's heads [h0, h1)
  const int kv_first = h0 / group, kv_last = (h1 - 1) / group;
  float* out = p.pooled + (static_cast<int64_t>(b) * p.num_rows + r) * p.stride;
  BinCache cache;
  for (int step = 0; step < kPoolSteps; ++step) {
    const int step_base = block_base + step * kPoolKeysPerStep;
    if (step_base >= n) break;
    float acc[kPoolKeysPerThread] = {0.0f, 0.0f, 0.0f, 0.0f};  // every p >= 0, so 0 also starts a max
    for (int kv = kv_first; kv <= kv_last; ++kv) {
      float lse[GP];
      bool in_row[GP];  // slot i of the block is head kv·g + i of this row (padding slots are never written)
#pragma unroll
      for (int i = 0; i < GP; ++i) {
        const int h = kv * group + i;
        in_row[i] = i < group && h >= h0 && h < h1;
        lse[i] = in_row[i] ? p.lse[static_cast<int64_t>(b) * p.num_heads + h] : 0.0f;
      }
      const float* block = p.logits + (static_cast<int64_t>(b) * p.num_kv_heads + kv) * p.stride * GP;
      float x[kPoolKeysPerThread][GP];
#pragma unroll
      for (int e = 0; e < kPoolKeysPerThread; ++e) {
        const int j = step_base + e * kPoolThreads + threadIdx.x;
        if (j < n) {
          load_key_block<GP>(block + static_cast<int64_t>(j) * GP, x[e]);
        } else {
#pragma unroll
          for (int i = 0; i < GP; ++i) x[e][i] = -INFINITY;
        }
      }
#pragma unroll
      for (int e = 0; e < kPoolKeysPerThread; ++e) {
#pragma unroll
        for (int i = 0; i < GP; ++i) {
          if (!in_row[i]) continue;
          const float prob = expf(x[e][i] - lse[i]);
          acc[e] = p.reduce_max ? fmaxf(acc[e], prob) : acc[e] + prob;
        }
      }
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
  const auto launch = [&](auto kernel) {
    kernel<<<grid, kPoolThreads, 0, stream>>>(params);
    return cudaGetLastError();
  };
  switch (params.logits_heads) {
    case 1: return launch(pool_scores_kernel<1>);
    case 2: return launch(pool_scores_kernel<2>);
    case 4: return launch(pool_scores_kernel<4>);
    case 8: return launch(pool_scores_kernel<8>);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kascade::cuda::detail
