// src/cuda/prefill/prefill_device.cuh — device helpers every prefill kernel shares: reading and
// checking one sequence's lengths against the plan, locating a tile slot of the compact index rows,
// the paged-cache row offset of a key, the XOR-swizzled shared-memory layout of 16-bit row tiles
// (16-byte chunks, chunk ^ (row & 7): ldmatrix of 8 rows reads 8 distinct bank groups), the
// cp.async loads of such tiles, the tensor-core fragments of Q·Kᵀ for one warp, and ex2.approx.
// Builds on cuda/common/device_primitives.cuh (cp.async, ldmatrix, m16n8k16 MMA).
// Device-only; tested through the kernels (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_errors.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_params.h"

namespace kascade::cuda::prefill {

using detail::cp_async_16;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::ldmatrix_x4;
using detail::ldmatrix_x4_trans;
using detail::Mma16;
using detail::smem_address;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// 2^x with the MUFU unit (|rel. error| ~ 2^-22); ex2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void report_error(const CallArgs& c, uint32_t bit) { atomicOr(c.errors, bit); }

// Element offset of (row, 16-byte chunk) in a swizzled [rows][D] tile of 16-bit elements.
template <int D>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// One sequence of the call, checked against the plan. q_start/q_len index the packed queries;
// query i of the call (0-based) sits at position first_pos + i.
struct Sequence {
  int q_start = 0;
  int q_len = 0;
  int kv_len = 0;
  int first_pos = 0;
};

// False (and an error bit) when the lengths break the views' rules or the plan's limits.
__device__ __forceinline__ bool load_sequence(const CallArgs& c, int b, Sequence& s) {
  const int q0 = c.cu_q_lens[b], q1 = c.cu_q_lens[b + 1];
  s.q_start = q0;
  s.q_len = q1 - q0;
  s.kv_len = c.kv_lens[b];
  if (q0 < 0 || s.q_len < 0 || q1 > c.max_total_q || s.q_len > c.max_q_len) {
    report_error(c, kPrefillErrorQueries);
    return false;
  }
  if (s.kv_len < s.q_len || s.kv_len > c.max_kv_len ||
      (static_cast<int64_t>(s.kv_len) + c.page_size - 1) / c.page_size > c.max_pages_per_seq) {
    report_error(c, kErrorKvLen);
    return false;
  }
  s.first_pos = s.kv_len - s.q_len;
  return true;
}

// Tiles of `tile_size` positions the sequence's call touches: [first, first + count).
struct CallTiles {
  int first = 0;
  int count = 0;
};
__device__ __forceinline__ CallTiles call_tiles(const Sequence& s, int tile_size) {
  CallTiles t;
  if (s.q_len == 0) return t;
  t.first = s.first_pos / tile_size;
  t.count = (s.kv_len - 1) / tile_size - t.first + 1;
  return t;
}

// The queries of tile `tile` present in the call: positions [lo, lo + count), the first being
// query (lo - first_pos) of the call.
struct TileQueries {
  int start = 0;  // s_t
  int lo = 0;
  int count = 0;
};
__device__ __forceinline__ TileQueries tile_queries(const Sequence& s, int tile, int tile_size) {
  TileQueries q;
  q.start = tile * tile_size;
  q.lo = max(q.start, s.first_pos);
  q.count = min(q.start + tile_size - 1, s.kv_len - 1) - q.lo + 1;
  return q;
}

// The sequence owning flat tile slot `slot` (tile_base[b] <= slot < tile_base[b + 1]); -1 when
// the slot lies past the call's slots.
__device__ __forceinline__ int sequence_of_slot(const int32_t* tile_base, int batch, int slot) {
  if (slot >= tile_base[batch]) return -1;
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (tile_base[mid] <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Resolves a flat slot to (sequence, tile). False (with an error bit where the data is bad) when the
// slot is past the call or its sequence's slot count disagrees with the tiles its call touches.
struct SlotTile {
  int b = 0;
  int tile = 0;
  Sequence seq;
};
__device__ __forceinline__ bool resolve_slot(const CallArgs& c, const RowArgs& r, int slot, SlotTile& out) {
  const int b = sequence_of_slot(r.tile_base, c.batch, slot);
  if (b < 0) return false;
  if (!load_sequence(c, b, out.seq)) return false;
  const CallTiles tiles = call_tiles(out.seq, r.tile_size);
  if (r.tile_base[b + 1] - r.tile_base[b] != tiles.count) {
    report_error(c, kPrefillErrorTileBase);
    return false;
  }
  out.b = b;
  out.tile = tiles.first + (slot - r.tile_base[b]);
  return true;
}

// Element offset of (key position j, KV head, channel 0) of sequence b in K/V; -1 (and an error
// bit) for a page id outside the cache. j must be < kv_len (checked by the caller).
template <int D>
__device__ __forceinline__ int64_t kv_row_offset(const CallArgs& c, int b, int j, int kv_head) {
  const int page = c.block_table[static_cast<int64_t>(b) * c.max_pages_per_seq + j / c.page_size];
  if (page < 0 || page >= c.num_pages) {
    report_error(c, kErrorPage);
    return -1;
  }
  return ((static_cast<int64_t>(page) * c.page_size + j % c.page_size) * c.num_kv_heads + kv_head) * D;
}

// Copies 16 bytes of a 16-bit row (offset >= 0) or writes 16 zero bytes (offset < 0).
template <typename T>
__device__ __forceinline__ void copy_chunk(T* smem_dst, const T* base, int64_t offset) {
  const bool valid = offset >= 0;
  cp_async_16(smem_address(smem_dst), valid ? base + offset : base, valid ? 16 : 0);
}

// Q·Kᵀ for one warp's 16 rows against a swizzled [kBlockKeys][D] K tile: s[nt][*] holds keys
// nt*8 + 2·tig + {0, 1} for rows gid (entries 0, 1) and gid + 8 (entries 2, 3).
template <typename T, int D>
__device__ __forceinline__ void warp_qk(const uint32_t (&qa)[D / 16][4], uint32_t k_tile, int lane,
                                        float (&s)[kBlockKeys / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < kBlockKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < kBlockKeys / 16; ++np) {
      // matrices: keys np*16 + 0..7 (chunks 2ks, 2ks+1), keys np*16 + 8..15 (chunks 2ks, 2ks+1)
      const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int chunk = 2 * ks + ((lane >> 3) & 1);
      uint32_t frag[4];
      ldmatrix_x4(k_tile + swizzle<D>(key, chunk) * 2, frag);
      Mma16<T>::mma(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], frag[0], frag[1]);
      Mma16<T>::mma(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], frag[2], frag[3]);
    }
  }
}

// A fragments of one warp's 16 rows (rows row0 .. row0 + 15 of a swizzled [rows][D] Q tile).
template <int D>
__device__ __forceinline__ void load_q_fragments(uint32_t q_tile, int row0, int lane, uint32_t (&qa)[D / 16][4]) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    // matrices: rows 0-7 chunk 2ks (a0), rows 8-15 chunk 2ks (a1), rows 0-7 chunk 2ks+1 (a2), rows 8-15 (a3)
    const int row = row0 + (lane & 15);
    const int chunk = 2 * ks + (lane >> 4);
    ldmatrix_x4(q_tile + swizzle<D>(row, chunk) * 2, qa[ks]);
  }
}

}  // namespace kascade::cuda::prefill
