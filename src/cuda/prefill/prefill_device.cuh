// src/cuda/prefill/prefill_device.cuh — device helpers every prefill kernel shares: reading and
// checking one sequence's lengths against the plan, locating a tile slot of the compact index rows,
// the paged-cache row offset of a key, the 128-byte-swizzled shared-memory layout of 16-bit row
// tiles, the cp.async loads of such tiles, Q·Kᵀ for one warp (mma.sync) or one warpgroup (wgmma,
// sm_90a).
// Builds on cuda/common/device_primitives.cuh (cp.async, ldmatrix, m16n8k16 MMA, ex2.approx).
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
using detail::cp_async_16_or_zeros;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::fast_exp2;
using detail::ldmatrix_x4;
using detail::ldmatrix_x4_trans;
using detail::Mma16;
using detail::smem_address;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;


__device__ __forceinline__ void report_error(const CallArgs& c, uint32_t bit) { atomicOr(c.errors, bit); }

// Element offset of (row, 16-byte chunk) in a tile of kRows rows × D 16-bit elements, laid out as
// the canonical 128-byte-swizzled K-major layout of the tensor cores: D/64 column blocks of
// [kRows][64] elements (128-byte rows), chunk c of a row stored at chunk c ^ (row & 7) of its block.
// ldmatrix of 8 consecutive rows hits 8 distinct bank groups; a wgmma descriptor with 128-byte
// swizzle and a 1024-byte stride between 8-row groups reads the same bytes (tile base 1024-aligned).
template <int D, int kRows>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return (chunk >> 3) * (kRows * 64) + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
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

// The dynamic shared memory rounded up to a 1024-byte boundary (the kernels allocate 1 KB more):
// 128-byte-swizzled tiles must start on one for a wgmma descriptor to address them.
constexpr size_t kSmemAlignSlack = 1024;
__device__ __forceinline__ unsigned char* align_smem(unsigned char* raw) {
  return raw + ((1024u - (smem_address(raw) & 1023u)) & 1023u);
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
      ldmatrix_x4(k_tile + swizzle<D, kBlockKeys>(key, chunk) * 2, frag);
      Mma16<T>::mma(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], frag[0], frag[1]);
      Mma16<T>::mma(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], frag[2], frag[3]);
    }
  }
}

// A fragments of one warp's 16 rows (rows row0 .. row0 + 15 of a swizzled [kRows][D] Q tile).
template <int D, int kRows>
__device__ __forceinline__ void load_q_fragments(uint32_t q_tile, int row0, int lane, uint32_t (&qa)[D / 16][4]) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    // matrices: rows 0-7 chunk 2ks (a0), rows 8-15 chunk 2ks (a1), rows 0-7 chunk 2ks+1 (a2), rows 8-15 (a3)
    const int row = row0 + (lane & 15);
    const int chunk = 2 * ks + (lane >> 4);
    ldmatrix_x4(q_tile + swizzle<D, kRows>(row, chunk) * 2, qa[ks]);
  }
}

// ---- sm_90a: Q·Kᵀ (both operands from shared memory) and P·V (P from registers) of one warpgroup
// (64 rows) with wgmma
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KASCADE_PREFILL_HAS_WGMMA 1
#endif

// PTX matrix descriptor of an operand in the swizzle<> layout: start address >> 4 (bits 0-13),
// leading byte offset >> 4 (bits 16-29), stride byte offset >> 4 (bits 32-45), base offset 0
// (1024-aligned tiles, bits 49-51), layout type 1 = 128-byte swizzle (bits 62-63).
//   K-major (Q and K for Q·Kᵀ): leading offset unused (1), stride 1024 B between 8-row groups.
//   MN-major (V for P·V, rows = keys = the K dimension, 64-element column blocks = MN atoms):
//   leading offset = bytes between column blocks (64 rows × 128 B), stride 1024 B between 8-key groups.
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t smem_byte_address, uint32_t leading_bytes = 16,
                                                     uint32_t stride_bytes = 1024) {
  uint64_t desc = (smem_byte_address & 0x3FFFFu) >> 4;
  desc |= uint64_t{(leading_bytes >> 4) & 0x3FFFu} << 16;
  desc |= uint64_t{(stride_bytes >> 4) & 0x3FFFu} << 32;
  desc |= uint64_t{1} << 62;
  return desc;
}

// The descriptor of a tile `bytes` further on (a multiple of 16, still inside shared memory): only
// the start-address field (bits 0-13, 16-byte units) moves, and it cannot carry (shared memory <
// 2^18 bytes), so a 32-bit add on the low word does it — one instruction per wgmma instead of
// rebuilding the descriptor from the address.
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

template <typename T>
struct Wgmma64;
template <typename T, int N>
struct WgmmaPv;
#ifdef KASCADE_PREFILL_HAS_WGMMA
template <>
struct Wgmma64<__half> {
  // d (64 × 64, fp32) = A (64 × 16, descriptor) · B (16 × 64, descriptor) [+ d when accumulate != 0]
  static __device__ __forceinline__ void mma(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};
template <>
struct Wgmma64<__nv_bfloat16> {
  // d (64 × 64, fp32) = A (64 × 16, descriptor) · B (16 × 64, descriptor) [+ d when accumulate != 0]
  static __device__ __forceinline__ void mma(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};

template <>
struct WgmmaPv<__half, 64> {
  // d (64 × 64, fp32) += A (64 × 16, registers: the m16n8k16 A fragment of each warp's 16 rows)
  //                      · B (16 × 64, descriptor of an MN-major operand)
  static __device__ __forceinline__ void mma(float (&d)[64 / 8][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint64_t desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
  }
};
template <>
struct WgmmaPv<__half, 128> {
  // d (64 × 128, fp32) += A (64 × 16, registers: the m16n8k16 A fragment of each warp's 16 rows)
  //                      · B (16 × 128, descriptor of an MN-major operand)
  static __device__ __forceinline__ void mma(float (&d)[128 / 8][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint64_t desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
  }
};
template <>
struct WgmmaPv<__nv_bfloat16, 64> {
  // d (64 × 64, fp32) += A (64 × 16, registers: the m16n8k16 A fragment of each warp's 16 rows)
  //                      · B (16 × 64, descriptor of an MN-major operand)
  static __device__ __forceinline__ void mma(float (&d)[64 / 8][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint64_t desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
  }
};
template <>
struct WgmmaPv<__nv_bfloat16, 128> {
  // d (64 × 128, fp32) += A (64 × 16, registers: the m16n8k16 A fragment of each warp's 16 rows)
  //                      · B (16 × 128, descriptor of an MN-major operand)
  static __device__ __forceinline__ void mma(float (&d)[128 / 8][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint64_t desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
  }
};

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Shared memory written by cp.async (generic proxy) and read next by wgmma (async proxy): every
// writing thread fences before the barrier that publishes the tile.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

// Publishes cp.async writes of the calling thread to the async proxy (wgmma) before a barrier.
__device__ __forceinline__ void publish_to_async_proxy() {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  fence_async_shared();
#endif
}

// Keeps the compiler from moving accesses of the accumulators across the asynchronous MMA.
template <int kTiles>
__device__ __forceinline__ void fence_accumulators(float (&s)[kTiles][4]) {
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(s[nt][e])::"memory");
  }
}

// Q·Kᵀ for the 64 rows wg_row0 .. wg_row0 + 63 of a swizzled [kQRows][D] Q tile (all 128 threads of
// the warpgroup call it) against a swizzled [kBlockKeys][D] K tile; both tiles 1024-byte aligned.
// s[nt][*] of thread t holds the same (row, key) entries as warp_qk's for warp t / 32 of the group:
// the wgmma accumulator layout is the m16n8 one, per warp and per 8 columns.
template <typename T, int D, int kQRows>
__device__ __forceinline__ void warpgroup_qk(uint32_t q_tile, int wg_row0, uint32_t k_tile,
                                             float (&s)[kBlockKeys / 8][4]) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  fence_accumulators(s);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t k_offset = (ks & 3) * 32;  // 16 elements = 32 bytes into the 128-byte row
    const uint32_t a = q_tile + (ks >> 2) * (kQRows * 128) + wg_row0 * 128 + k_offset;
    const uint32_t b = k_tile + (ks >> 2) * (kBlockKeys * 128) + k_offset;
    Wgmma64<T>::mma(s, sw128_descriptor(a), sw128_descriptor(b), ks > 0 ? 1 : 0);
  }
  wgmma_commit();
  wgmma_wait_all();
  fence_accumulators(s);
#else
  __trap();  // the host never launches a wgmma kernel on a device or build without sm_90a
#endif
}

// O += P·V for the warpgroup's 64 rows: P from registers (each warp's m16n8k16 A fragments of the
// 64 keys of the tile: pa[kk] for keys kk*16 .. kk*16 + 15), V from a swizzled [kBlockKeys][D] tile
// read as an MN-major operand (1024-byte aligned). o[dt][*] keeps the mma.sync accumulator layout.
template <typename T, int D>
__device__ __forceinline__ void warpgroup_pv(const uint32_t (&pa)[kBlockKeys / 16][4], uint32_t v_tile,
                                             float (&o)[D / 8][4]) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  fence_accumulators(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
    const uint64_t desc = sw128_descriptor(v_tile + kk * 16 * 128, kBlockKeys * 128, 1024);
    WgmmaPv<T, D>::mma(o, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], desc);
  }
  wgmma_commit();
  wgmma_wait_all();
  fence_accumulators(o);
#else
  __trap();  // the host never launches a wgmma kernel on a device or build without sm_90a
#endif
}

}  // namespace kascade::cuda::prefill
