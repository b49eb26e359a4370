// src/cuda/prefill/pooled_columns.cuh — the column arithmetic both pooled-score kernels share
// (pooled_scores_kernels.cu on the mma / wgmma loop, ws_pooled_scores_kernels.cu on the
// warp-specialised loop): a thread's m16n8 accumulator fragment of S = Q·Kᵀ (rows gid and gid + 8,
// columns 8·nt + 2·tig + e) turned into the probabilities p = 2^(s·scale_log2 − lse2) of its two
// rows and summed (kMax = false) or maxed (kMax = true) into per-column partials, and the
// reduction of those partials over the 8 row groups of a warp and then over the warps of a block.
// Device-only; tested through both kernels (tests/cuda/test_prefill_select.cpp, test_ws_*.cpp).
#pragma once

#include "cuda/prefill/prefill_device.cuh"

namespace kascade::cuda::prefill {

template <bool kMax>
__device__ __forceinline__ float combine(float a, float b) {
  return kMax ? fmaxf(a, b) : a + b;
}

// col[nt][e] ⊕= p(row gid) ⊕ p(row gid + 8) for each of the thread's columns; lse2 holds the two
// rows' log2-domain LSE (+inf for a row past the tile, which gives p = 0).
template <bool kMax, int kKeyTiles>
__device__ __forceinline__ void accumulate_columns(const float (&s)[kKeyTiles][4], float scale_log2,
                                                   const float (&lse2)[2], float (&col)[kKeyTiles][2]) {
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float p0 = fast_exp2(__fmul_rn(s[nt][e], scale_log2) - lse2[0]);
      const float p1 = fast_exp2(__fmul_rn(s[nt][e + 2], scale_log2) - lse2[1]);
      col[nt][e] = combine<kMax>(col[nt][e], combine<kMax>(p0, p1));
    }
  }
}

// Combines v over the 8 lanes of a warp that share tig (lane = 4·gid + tig): every such lane ends
// with the column's total over the warp's 16 rows per m-tile. Fixed order, so deterministic.
template <bool kMax>
__device__ __forceinline__ float reduce_row_groups(float v) {
  v = combine<kMax>(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = combine<kMax>(v, __shfl_xor_sync(0xffffffffu, v, 8));
  return combine<kMax>(v, __shfl_xor_sync(0xffffffffu, v, 16));
}

// The warp's column totals (reduce_row_groups of every partial) written by its gid == 0 lanes into
// warp_row[0 .. 8·kKeyTiles): one row of the [warps][keys] partials buffer in shared memory.
template <bool kMax, int kKeyTiles>
__device__ __forceinline__ void store_warp_columns(const float (&col)[kKeyTiles][2], int gid, int tig,
                                                   float* warp_row) {
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float v = reduce_row_groups<kMax>(col[nt][e]);
      if (gid == 0) warp_row[nt * 8 + 2 * tig + e] = v;
    }
  }
}

// Column `key` of the [kWarps][row_stride] partials combined over the warps in fixed order 0..kWarps-1.
template <bool kMax, int kWarps>
__device__ __forceinline__ float combine_warp_columns(const float* partials, int row_stride, int key) {
  float v = partials[key];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = combine<kMax>(v, partials[w * row_stride + key]);
  return v;
}

}  // namespace kascade::cuda::prefill
