// src/cuda/prefill/pooled_columns.cuh — the column arithmetic both pooled-score kernels share
// (pooled_scores_kernels.cu on the mma / wgmma loop, ws_pooled_scores_kernels.cu on the
// warp-specialised loop): a thread's m16n8 accumulator fragment of S = Q·Kᵀ (rows gid and gid + 8,
// columns 8·nt + 2·tig + e) turned into the probabilities p = 2^(s·scale_log2 − lse2) of its two
// rows and summed (kMax = false) or maxed (kMax = true) into per-column partials, and the
// reduction of those partials over the 8 row groups of a warp (a butterfly reduce-scatter) and then
// over the warps of a block.
// Device-only; tested through both kernels (tests/cuda/test_prefill_select.cpp, test_ws_*.cpp).
#pragma once

#include "cuda/prefill/prefill_device.cuh"

namespace kascade::cuda::prefill {

template <bool kMax>
__device__ __forceinline__ float combine(float a, float b) {
  return kMax ? fmaxf(a, b) : a + b;
}

// col[nt][e] ⊕= p(row gid) ⊕ p(row gid + 8) for each of the thread's columns; lse2 holds the two
// rows' log2-domain LSE (+inf for a row past the tile, which gives p = 0). The exponent is one FFMA
// (s·scale_log2 − lse2, rounded once): every tile and chunking computes it the same way.
template <bool kMax, int kKeyTiles>
__device__ __forceinline__ void accumulate_columns(const float (&s)[kKeyTiles][4], float scale_log2,
                                                   const float (&lse2)[2], float (&col)[kKeyTiles][2]) {
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float p0 = fast_exp2(fmaf(s[nt][e], scale_log2, -lse2[0]));
      const float p1 = fast_exp2(fmaf(s[nt][e + 2], scale_log2, -lse2[1]));
      col[nt][e] = combine<kMax>(col[nt][e], combine<kMax>(p0, p1));
    }
  }
}

// One reduce-scatter step over the lanes `mask` apart: v[0 .. 2·kHalf) of both lanes become
// v[0 .. kHalf) = their combined lower half (in the lane whose `upper` bit is 0) or upper half (the
// other lane). Each lane sends the half its partner keeps, so a step costs kHalf shuffles.
template <bool kMax, int kHalf, int kSize>
__device__ __forceinline__ void reduce_scatter_step(float (&v)[kSize], bool upper, int mask) {
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? v[i] : v[i + kHalf];
    const float keep = upper ? v[i + kHalf] : v[i];
    v[i] = combine<kMax>(keep, __shfl_xor_sync(0xffffffffu, send, mask));
  }
}

// The warp's column totals over its 8 row groups (the lanes sharing tig; lane = 4·gid + tig)
// written into warp_row[0 .. 8·kKeyTiles): one row of the [warps][keys] partials buffer in shared
// memory. A butterfly reduce-scatter over gid's bits (lanes 4, 8, 16 apart) leaves each lane with
// kKeyTiles / 4 column totals, stored as float2 pairs by every lane: kKeyTiles + kKeyTiles / 2 +
// kKeyTiles / 4 shuffles in all, instead of 6·kKeyTiles for a full butterfly per value. The
// combination tree is the full butterfly's ((g0 ⊕ g1) ⊕ (g2 ⊕ g3)) ⊕ (…) in every lane, and ⊕ is
// commutative, so the totals are the same bits whatever lane computes them.
template <bool kMax, int kKeyTiles>
__device__ __forceinline__ void store_warp_columns(const float (&col)[kKeyTiles][2], int gid, int tig,
                                                   float* warp_row) {
  constexpr int kValues = 2 * kKeyTiles;  // value v is column 8·(v / 2) + 2·tig + v % 2
  static_assert(kValues % 16 == 0, "whole float2 pairs per lane after three halvings");
  float v[kValues];
#pragma unroll
  for (int i = 0; i < kValues; ++i) v[i] = col[i / 2][i % 2];
  reduce_scatter_step<kMax, kValues / 2>(v, (gid & 1) != 0, 4);
  reduce_scatter_step<kMax, kValues / 4>(v, (gid & 2) != 0, 8);
  reduce_scatter_step<kMax, kValues / 8>(v, (gid & 4) != 0, 16);
  // This lane now holds values base .. base + kValues/8 − 1 (base even).
  const int base = (gid & 1) * (kValues / 2) + ((gid >> 1) & 1) * (kValues / 4) + ((gid >> 2) & 1) * (kValues / 8);
#pragma unroll
  for (int i = 0; i < kValues / 8; i += 2) {
    *reinterpret_cast<float2*>(warp_row + 8 * ((base + i) / 2) + 2 * tig) = make_float2(v[i], v[i + 1]);
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
