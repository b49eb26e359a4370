// src/cuda/kascade/pool_device.cuh — the pooling arithmetic of anchor decode (DESIGN.md §2.2, §2.4)
// that both pooling paths share, so that they produce the same bits: the separate pooling kernel
// (pooled_scores_kernels.cu, which writes the pooled rows to global memory) and the fused one (the
// row Top-k pooling its slice into shared memory, row_topk_kernel.cu).
//   pooled[b][r][j] = reduce over heads h of row r of exp(logit(b, h, j) − lse[b][h]),
//   logit(b, h, j) = logits[b][h / g][j][h % g] (key-major per KV group, blocks of GP floats).
// A row's heads are summed (or maxed) KV group by KV group in ascending order, heads in ascending
// order within a group. Device-only; tested through both paths (tests/cuda/test_anchor_decode.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/device_primitives.cuh"

namespace kascade::cuda::detail {

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

// The query heads [h0, h1) of pooling row r (H / R heads each) and the KV groups they span.
struct PoolRowHeads {
  int h0 = 0, h1 = 0;
  int kv_first = 0, kv_last = 0;
  int group = 1;  // g = H / G
};

__device__ __forceinline__ PoolRowHeads pool_row_heads(int num_heads, int num_kv_heads, int num_rows, int r) {
  PoolRowHeads rh;
  rh.group = num_heads / num_kv_heads;
  const int heads_per_row = num_heads / num_rows;
  rh.h0 = r * heads_per_row;
  rh.h1 = rh.h0 + heads_per_row;
  rh.kv_first = rh.h0 / rh.group;
  rh.kv_last = (rh.h1 - 1) / rh.group;
  return rh;
}

// acc[e] ⊕= p = 2^(logit(h, keys[e])·log2 e − lse[h]·log2 e) over the row's heads h of KV group kv,
// for the keys with keys[e] >= 0 (the others contribute nothing: their logits read as −inf). One
// FFMA and one MUFU.EX2 per probability (|rel. error| ~ 2^-21 against exp(logit − lse)), no branch:
// a slot outside the row (a padding slot, written 0 by the scoring pass, or a head of another row)
// is selected away as 0, whatever its bits. ⊕ is + (kMax = false) or max; every p >= 0, so 0 starts either.
//   logits_group: [stride][GP] of (sequence b, KV group kv); lse_b: [H] of sequence b.
template <bool kMax, int GP, int kKeys>
__device__ __forceinline__ void pool_group_keys(const float* logits_group, const float* lse_b, const PoolRowHeads& rh,
                                                int kv, const int (&keys)[kKeys], float (&acc)[kKeys]) {
  constexpr float kLog2e = 1.4426950408889634f;
  float lse2[GP];
  bool in_row[GP];  // slot i of a block is head kv·g + i of this row
#pragma unroll
  for (int i = 0; i < GP; ++i) {
    const int h = kv * rh.group + i;
    in_row[i] = i < rh.group && h >= rh.h0 && h < rh.h1;
    lse2[i] = in_row[i] ? lse_b[h] * kLog2e : 0.0f;
  }
  float x[kKeys][GP];
#pragma unroll
  for (int e = 0; e < kKeys; ++e) {
    if (keys[e] >= 0) {
      load_key_block<GP>(logits_group + static_cast<int64_t>(keys[e]) * GP, x[e]);
    } else {
#pragma unroll
      for (int i = 0; i < GP; ++i) x[e][i] = -INFINITY;
    }
  }
#pragma unroll
  for (int e = 0; e < kKeys; ++e) {
#pragma unroll
    for (int i = 0; i < GP; ++i) {
      const float p = fast_exp2(fmaf(x[e][i], kLog2e, -lse2[i]));
      const float prob = in_row[i] ? p : 0.0f;
      acc[e] = kMax ? fmaxf(acc[e], prob) : acc[e] + prob;
    }
  }
}

}  // namespace kascade::cuda::detail
