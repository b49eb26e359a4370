// src/cuda/attention/decode_kernel.cuh — the one decode kernel behind dense split-KV decode, the
// anchor scoring pass and sparse (reuse) decode over index rows (DESIGN.md §3 kernel contract).
//
// One CTA handles (split s, slot, sequence b); a slot is a KV group (its g query heads share every
// K/V row the CTA loads) or, for per-query-head index rows, one query head. The CTA's key list
// (keys 0..n-1 for dense, the row's indices for sparse) is cut into num_splits chunks whose size
// is computed on the device from the length read from device memory, so a plan made for
// max_seq_len serves every shorter length and a CUDA graph can be replayed with new lengths.
//
// Inside a CTA each of the 4 warps owns every 4th tile of 16 keys and runs its own cp.async
// pipeline (kStages tiles in flight, 16-byte copies of whole K/V rows into XOR-swizzled shared
// memory, zero fill for masked rows); no CTA-wide barrier in the main loop. Per tile a warp computes
// S = Q·Kᵀ with m16n8k16 tensor-core MMAs (rows = the slot's query heads, padded to 16), an online
// softmax in the exp2 domain on the accumulators, and O += P·V with P packed back to 16 bits.
// The row offsets of later tiles are found one step per iteration ahead of their use (index row →
// block table → offset: a raw load in one iteration, its check in the next), so no check waits on a load.
// The warps' states merge in shared memory; a CTA whose split is not the only active one writes
// (o, lse) partials and the last CTA of its (b, slot) (an atomic ticket, reset after use) merges
// them, so no second launch is needed. Modes (template flags):
//   kPV      — compute the output (off: LSE only, the anchor scoring pass reads K alone);
//   kLogits  — also write the scaled logits σ·q·k per head (anchor scoring, dense keys only);
//   kIndexed — keys come from DecodeIndexRows instead of 0..n-1;
//   kStoredLogits — (with kIndexed and kPV) S is read from the logits the same layer's scoring pass
//                   stored (key-major, one 4·logits_heads-byte block per key) instead of computed from
//                   K: the anchor's own sparse output gathers V rows and those blocks only.
// Tested by tests/cuda/test_dense_decode.cpp, test_sparse_decode.cpp, test_anchor_decode.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/device_primitives.cuh"
#include "cuda/attention/decode_params.h"
#include "cuda/common/device_errors.h"
#include "cuda/common/programmatic_launch.cuh"

namespace kascade::cuda::detail {


// A warp's pipeline stage: [K tile][V tile] (kPV), [K tile] (LSE only) or, with stored logits,
// [V tile][logits of the tile's keys: kTileKeys x logits_heads floats]. With kLogits, after the flags:
// each warp's two staging slots of a tile's logits block ([2][kTileKeys][kMaxHeadsPerSlot] fp32), the
// source of the tile's bulk store (one slot is written while the other's store may still read it).
template <int D, bool kPV, bool kStoredLogits = false, bool kLogits = false>
struct DecodeSmem {
  static constexpr int kStages = kPV && !kStoredLogits ? 3 : 4;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per K/V row
  static constexpr int kTileElems = kTileKeys * D;
  static constexpr int kLogitTileElems = kTileKeys * kMaxHeadsPerSlot * 2;  // fp32 blocks, in 16-bit elements
  static constexpr int kWarpStageElems = kStoredLogits ? kTileElems + kLogitTileElems : kTileElems * (kPV ? 2 : 1);
  static constexpr int kVOffsetElems = kStoredLogits ? 0 : kTileElems;
  static constexpr int kLogitOffsetElems = kTileElems;  // kStoredLogits only
  static constexpr size_t kPipelineBytes = size_t(kDecodeWarps) * kStages * kWarpStageElems * 2;
  static constexpr size_t kStateBytes =
      size_t(kDecodeWarps) * kMaxHeadsPerSlot * 2 * sizeof(float) +
      (kPV ? size_t(kDecodeWarps) * kMaxHeadsPerSlot * D * sizeof(float) : 0);
  static constexpr size_t kMergeBytes = size_t(kMaxHeadsPerSlot) * (kMaxSplits + 2) * sizeof(float);
  static constexpr size_t kShared0 = kPipelineBytes > kStateBytes ? kPipelineBytes : kStateBytes;
  static constexpr size_t kSharedMain = kShared0 > kMergeBytes ? kShared0 : kMergeBytes;
  static constexpr size_t kMaskOffset = kSharedMain;
  static constexpr size_t kFlagOffset = kMaskOffset + size_t(kDecodeWarps) * kStages * sizeof(uint32_t);
  static constexpr int kLogitSlotFloats = kTileKeys * kMaxHeadsPerSlot;
  static constexpr size_t kLogitRingOffset = (kFlagOffset + 16 + 127) / 128 * 128;
  static constexpr size_t kLogitRingBytes = kLogits ? size_t(kDecodeWarps) * 2 * kLogitSlotFloats * sizeof(float) : 0;
  static constexpr size_t kBytes = kLogits ? kLogitRingOffset + kLogitRingBytes : kFlagOffset + 16;
};

__device__ __forceinline__ void report_error(const DecodeKernelParams& p, uint32_t bit) {
  atomicOr(p.error_flags, bit);
}

template <typename T, int D, bool kPV>
__device__ __forceinline__ void write_final(const DecodeKernelParams& p, int b, int head, int c, float out,
                                            float lse) {
  const int64_t bh = static_cast<int64_t>(b) * p.num_heads + head;
  if constexpr (kPV) static_cast<T*>(p.o)[bh * D + c] = Mma16<T>::from_float(out);
  if (c == 0) {
    if (p.lse) p.lse[bh] = lse;
    if (p.lse2) p.lse2[bh] = lse;
  }
}

template <typename T, int D, bool kPV, bool kLogits, bool kIndexed, bool kStoredLogits = false>
__global__ void __launch_bounds__(kDecodeThreads) decode_kernel(const DecodeKernelParams p) {
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(!(kLogits && kIndexed), "logits are written for dense keys only");
  static_assert(!kStoredLogits || (kIndexed && kPV), "stored logits serve the indexed output pass");
  using Smem = DecodeSmem<D, kPV, kStoredLogits, kLogits>;
  using Mma = Mma16<T>;
  constexpr int kStages = Smem::kStages;
  constexpr int kChunks = Smem::kChunks;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  constexpr float kNegInf = -INFINITY;

  extern __shared__ __align__(128) unsigned char smem[];
  // Launched programmatically (PassPlan::programmatic), nothing is read or written before this.
  wait_for_prerequisite_grids();
  allow_dependent_grids();
  const int split = blockIdx.x, slot = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;

  // ---- the slot's query heads and KV head
  int kv_head, head0, num_heads_here;
  if (p.per_query_head) {
    head0 = slot;
    num_heads_here = 1;
    kv_head = slot / p.group_size;
  } else {
    kv_head = slot;
    head0 = slot * p.group_size;
    num_heads_here = p.group_size;
  }

  // ---- the first loads, issued together before any check: a check that may report an error (an
  // atomic) or return keeps every later load behind it, so checking each value right after its load
  // would chain the latencies of kv_len, the head-map entry, Q, the row length, ... one after another.
  int n = p.kv_lens[b];
  int row = 0;
  if constexpr (kIndexed) {
    row = p.per_query_head ? slot : p.head_map ? p.head_map[slot] : slot * p.num_rows / p.num_kv_heads;
  }
  // Q as MMA A fragments: a0 = Q[gid][16ks + 2tig..], a2 = Q[gid][16ks + 8 + 2tig..]
  uint32_t qa[D / 16][2];
  if constexpr (!kStoredLogits) {
    const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.num_heads + head0 + gid) * D;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      qa[ks][0] = gid < num_heads_here ? *reinterpret_cast<const uint32_t*>(q + ks * 16 + tig * 2) : 0u;
      qa[ks][1] = gid < num_heads_here ? *reinterpret_cast<const uint32_t*>(q + ks * 16 + 8 + tig * 2) : 0u;
    }
  }

  // ---- the key list: keys 0..n-1 (dense) or the index row
  if (n < 1 || n > p.max_seq_len) {
    report_error(p, kErrorKvLen);
    n = n < 0 ? 0 : (n > p.max_seq_len ? p.max_seq_len : n);
  }
  int length = n;
  const int32_t* index_row = nullptr;
  if constexpr (kIndexed) {
    if (row < 0 || row >= p.num_rows) {
      report_error(p, kErrorHeadMap);
      length = 0;
    } else {
      length = p.row_lens[static_cast<int64_t>(b) * p.num_rows + row];
      if (length < 0 || length > p.k_max) {
        report_error(p, kErrorRowLen);
        length = length < 0 ? 0 : p.k_max;
      }
      index_row = p.indices + (static_cast<int64_t>(b) * p.num_rows + row) * p.k_max;
    }
  }
  if (length == 0) {  // empty set: o = 0, lse = -inf (written once, by split 0)
    if (split == 0) {
      for (int idx = tid; idx < num_heads_here * D; idx += kDecodeThreads)
        write_final<T, D, kPV>(p, b, head0 + idx / D, idx % D, 0.0f, kNegInf);
    }
    return;
  }
  const int chunk = ceil_div_device(ceil_div_device(length, p.num_splits), kTileKeys) * kTileKeys;
  const int begin = split * chunk;
  if (begin >= length) return;  // this split has no keys at this length
  const int end = min(length, begin + chunk);
  const int active_splits = ceil_div_device(length, chunk);

  const float scale_log2 = p.scale * kLog2e;

  // ---- per-warp pipeline
  T* warp_tiles = reinterpret_cast<T*>(smem) + static_cast<size_t>(warp) * kStages * Smem::kWarpStageElems;
  uint32_t* stage_mask = reinterpret_cast<uint32_t*>(smem + Smem::kMaskOffset) + warp * kStages;
  const int num_tiles = ceil_div_device(end - begin, kTileKeys);
  const int my_tiles = num_tiles > warp ? ceil_div_device(num_tiles - warp, kDecodeWarps) : 0;
  const T* k_base = static_cast<const T*>(p.k);
  const T* v_base = static_cast<const T*>(p.v);
  const int page_mask = (1 << p.log2_page_size) - 1;
  const int64_t table_row = static_cast<int64_t>(b) * p.max_pages_per_seq;
  // Stored logits: the (sequence, KV group) block of keys, and where the slot's first head sits in a key's block.
  const int logits_heads = kStoredLogits ? p.logits_heads : 0;
  const float* logits_block =
      kStoredLogits ? p.logits + (static_cast<int64_t>(b) * p.num_kv_heads + kv_head) * p.logits_stride * logits_heads
                    : nullptr;
  const int logit_head0 = p.per_query_head ? slot % p.group_size : 0;

  // The row offset of a tile's key is found in three dependent steps — the key (index row), its page
  // (block table), the offset — each a load whose check must not stall the warp: a check right after
  // its load waits a memory latency per tile (the sparse decode spent ~40 % of its stall samples on
  // the index check). So each step's raw value is loaded one iteration before it is checked:
  // load_key → check_key (next iteration) → load_page → offset_of (next iteration) → issue.

  // Index of this lane's key (row lane & 15) in the CTA's key list for the warp's local tile `it`;
  // -1 when the lane is past the tile's or the list's end.
  auto key_slot = [&](int it) -> int {
    if (it >= my_tiles) return -1;
    const int i = begin + (warp + it * kDecodeWarps) * kTileKeys + (lane & 15);
    return i < end ? i : -1;
  };
  // Raw key of the lane for tile `it` (the index row's entry, unchecked; 0 when there is none).
  auto load_key = [&](int it) -> int {
    const int i = key_slot(it);
    if (i < 0) return 0;
    if constexpr (kIndexed) {
      return index_row[i];
    } else {
      return i;
    }
  };
  // Key position of the lane for tile `it` from its raw key, or -1 = masked (an index outside
  // [0, n) is reported).
  auto check_key = [&](int it, int raw) -> int {
    if (key_slot(it) < 0) return -1;
    if constexpr (kIndexed) {
      if (raw < 0 || raw >= n) {
        report_error(p, kErrorIndex);
        return -1;
      }
    }
    return raw;
  };
  // Raw block-table entry of a position (unchecked; 0 when masked).
  auto load_page = [&](int position) -> int {
    return position < 0 ? 0 : p.block_table[table_row + (position >> p.log2_page_size)];
  };
  // Element offset of (position, kv_head, channel 0) in K/V; -1 = masked (a page outside
  // [0, num_pages) is reported).
  auto offset_of = [&](int position, int page) -> int64_t {
    if (position < 0) return -1;
    if (page < 0 || page >= p.num_pages) {
      report_error(p, kErrorPage);
      return -1;
    }
    return ((static_cast<int64_t>(page) << p.log2_page_size) + (position & page_mask)) * p.num_kv_heads * D +
           static_cast<int64_t>(kv_head) * D;
  };
  // Copies the logits block of the lane's key (row lane & 15; lanes 16..31 the second half of an
  // 8-float block) into the stage's logit tile; masked keys get zeros.
  auto issue_logits = [&](T* stage_tiles, int position, int64_t offset) {
    const int r = lane & 15, part = lane >> 4;
    const bool valid = offset >= 0;
    const float* src = valid ? logits_block + static_cast<int64_t>(position) * logits_heads : p.logits;
    const uint32_t dst = smem_address(stage_tiles + Smem::kLogitOffsetElems) + r * logits_heads * 4;
    if (logits_heads >= 4) {
      if (part * 4 < logits_heads) cp_async_16(dst + part * 16, src + (valid ? part * 4 : 0), valid ? 16 : 0);
    } else if (part == 0) {
      if (logits_heads == 2) {
        cp_async_ca<8>(dst, src, valid ? 8 : 0);
      } else {
        cp_async_ca<4>(dst, src, valid ? 4 : 0);
      }
    }
  };
  auto issue = [&](int it, int position, int64_t offset) {
    if (it < my_tiles) {
      const int stage = it % kStages;
      const uint32_t valid = __ballot_sync(0xffffffffu, offset >= 0) & 0xffffu;
      if (lane == 0) stage_mask[stage] = valid;
      T* stage_tiles = warp_tiles + stage * Smem::kWarpStageElems;
      if constexpr (kStoredLogits) issue_logits(stage_tiles, position, offset);
#pragma unroll
      for (int c = lane; c < kTileKeys * kChunks; c += 32) {
        const int r = c / kChunks, ch = c % kChunks;
        const int64_t row = __shfl_sync(0xffffffffu, offset, r);
        const int bytes = row >= 0 ? 16 : 0;
        const int64_t src = row >= 0 ? row + ch * 8 : 0;
        const uint32_t dst = smem_address(stage_tiles + r * D + ((ch ^ (r & 7)) * 8));
        if constexpr (!kStoredLogits) cp_async_16(dst, k_base + src, bytes);
        if constexpr (kPV) cp_async_16(dst + Smem::kVOffsetElems * 2, v_base + src, bytes);
      }
    }
    cp_async_commit();
  };

  float m_run = kNegInf, l_run = 0.0f;
  float o_acc[kPV ? D / 8 : 1][4];
#pragma unroll
  for (int i = 0; i < (kPV ? D / 8 : 1); ++i) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;

  // The prologue does the three steps for tiles 0 .. kStages + 1 in phases — every raw key, then their
  // checks, every page, then the offsets — so each phase's loads are in flight together (one latency
  // per phase, not one per tile and step).
  int raw_keys[kStages + 2], positions[kStages + 1], pages[kStages + 1];
#pragma unroll
  for (int s = 0; s < kStages + 2; ++s) raw_keys[s] = load_key(s);
#pragma unroll
  for (int s = 0; s <= kStages; ++s) positions[s] = check_key(s, raw_keys[s]);
#pragma unroll
  for (int s = 0; s <= kStages; ++s) pages[s] = load_page(positions[s]);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s, positions[s], offset_of(positions[s], pages[s]));
  int next_position = positions[kStages - 1];          // tile it + kStages - 1, issued in iteration it
  int64_t next_offset = offset_of(positions[kStages - 1], pages[kStages - 1]);
  int pending_position = positions[kStages];           // tile it + kStages
  int pending_page = pages[kStages];
  int raw_key = raw_keys[kStages + 1];                 // tile it + kStages + 1
  bool previous_tile_bulk = false;                     // kLogits: the last tile's logits went by bulk store

  for (int it = 0; it < my_tiles; ++it) {
    issue(it + kStages - 1, next_position, next_offset);
    next_position = pending_position;
    next_offset = offset_of(pending_position, pending_page);
    pending_position = check_key(it + kStages + 1, raw_key);
    pending_page = load_page(pending_position);
    raw_key = load_key(it + kStages + 2);
    cp_async_wait<kStages - 1>();
    __syncwarp();

    const int stage = it % kStages;
    const uint32_t valid_mask = stage_mask[stage];
    const T* stage_tiles = warp_tiles + stage * Smem::kWarpStageElems;
    const uint32_t stage_smem = smem_address(stage_tiles);

    // S = Q·Kᵀ for keys 0-7 (nt = 0) and 8-15 (nt = 1) of the tile, or σ·q·k from the stored logits
    // (then x = logit·log2 e below instead of s·σ·log2 e: the same product up to rounding).
    float s_acc[2][4];
    if constexpr (kStoredLogits) {
      // [16 keys][logits_heads]
      const float* logit_tile = reinterpret_cast<const float*>(stage_tiles + Smem::kLogitOffsetElems);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + tig * 2 + e;
          s_acc[nt][e] = gid < num_heads_here ? logit_tile[col * logits_heads + logit_head0 + gid] : 0.0f;
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < (kStoredLogits ? 0 : 2); ++nt) {
      s_acc[nt][0] = s_acc[nt][1] = s_acc[nt][2] = s_acc[nt][3] = 0.0f;
      const int r = nt * 8 + (lane & 7);
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) {
        const int ch = kk * 4 + (lane >> 3);
        uint32_t frag[4];
        ldmatrix_x4(stage_smem + (r * D + ((ch ^ (r & 7)) * 8)) * 2, frag);
        Mma::mma(s_acc[nt], qa[2 * kk][0], 0u, qa[2 * kk][1], 0u, frag[0], frag[1]);
        Mma::mma(s_acc[nt], qa[2 * kk + 1][0], 0u, qa[2 * kk + 1][1], 0u, frag[2], frag[3]);
      }
    }

    // Row gid (query head head0 + gid) holds keys nt*8 + 2tig + e in s_acc[nt][e].
    float x[4];
    const int key0 = begin + (warp + it * kDecodeWarps) * kTileKeys;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = nt * 8 + tig * 2 + e;
        const bool valid = (valid_mask >> col) & 1u;
        x[nt * 2 + e] = valid ? s_acc[nt][e] * (kStoredLogits ? kLog2e : scale_log2) : kNegInf;
      }
    }
    if constexpr (kLogits) {
      // Key-major: head h of key j at logits[b, kv_head, j, h]; the tile's 16 consecutive keys are one
      // contiguous [16][logits_heads] block (key0 is a multiple of 16, the block 64·logits_heads bytes,
      // 16-byte aligned). It is staged in one of the warp's two logit slots and, for a whole tile on
      // sm_90, written by lane 0 as one bulk store on the copy engine: stores issued by the warp inside
      // its K loop cost the scoring pass 11-12 % (docs/perf.md, decode round 16), twice their bytes.
      // The last tile of a list (and sm_80) is stored by the warp with 16-byte stores of whole sectors.
      // Padding slots (heads past the slot's) are written 0.
      const int lh = p.logits_heads;
      float* staged = reinterpret_cast<float*>(smem + Smem::kLogitRingOffset) +
                      (warp * 2 + (it & 1)) * Smem::kLogitSlotFloats;  // [16][lh]
      if constexpr (kHasBulkStore) {
        // The slot's store of tile it - 2 has read it: the newest group may stay pending only when it is
        // tile it - 1's (a tile stored by the warp issues none).
        if (lane == 0) {
          if (previous_tile_bulk) {
            bulk_wait_group_read<1>();
          } else {
            bulk_wait_group_read<0>();
          }
        }
      }
      __syncwarp();
      if (gid < lh) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = nt * 8 + tig * 2 + e;
            staged[col * lh + gid] = gid < num_heads_here ? s_acc[nt][e] * p.scale : 0.0f;
          }
        }
      }
      float* block = p.logits + ((static_cast<int64_t>(b) * p.num_kv_heads + kv_head) * p.logits_stride + key0) * lh;
      previous_tile_bulk = kHasBulkStore && valid_mask == 0xffffu;
      if (previous_tile_bulk) {
        fence_proxy_async_shared();
        __syncwarp();
        if (lane == 0) {
          bulk_store_shared_to_global(block, smem_address(staged), static_cast<uint32_t>(kTileKeys * lh * sizeof(float)));
          bulk_commit_group();
        }
      } else {
        __syncwarp();
        for (int piece = lane; piece < 4 * lh; piece += 32) {  // float4 piece i: floats 4i .. 4i + 3 of the block
          const int key_lo = 4 * piece / lh, key_hi = (4 * piece + 3) / lh;  // the keys it holds
          const uint32_t keys = ((2u << key_hi) - 1u) & ~((1u << key_lo) - 1u);
          if ((valid_mask & keys) == keys) {
            *reinterpret_cast<float4*>(block + 4 * piece) = *reinterpret_cast<const float4*>(staged + 4 * piece);
          } else {  // the last tile of the list: the piece's valid keys one float at a time
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              if ((valid_mask >> ((4 * piece + q) / lh)) & 1u) block[4 * piece + q] = staged[4 * piece + q];
            }
          }
        }
      }
      // (The slot is written again two tiles later, after lane 0's wait and the warp's sync above.)
    }
    float tile_max = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m_run, tile_max);
    float prob[4];
    float alpha = 1.0f;
    if (m_new == kNegInf) {
      prob[0] = prob[1] = prob[2] = prob[3] = 0.0f;
    } else {
      alpha = exp2f(m_run - m_new);
#pragma unroll
      for (int i = 0; i < 4; ++i) prob[i] = exp2f(x[i] - m_new);
    }
    l_run = l_run * alpha + (prob[0] + prob[1]) + (prob[2] + prob[3]);
    m_run = m_new;

    if constexpr (kPV) {
      const uint32_t pa0 = Mma::pack(prob[0], prob[1]);
      const uint32_t pa2 = Mma::pack(prob[2], prob[3]);
      const uint32_t v_smem = stage_smem + Smem::kVOffsetElems * 2;
      const int r = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int nt = 0; nt < D / 8; nt += 2) {
        o_acc[nt][0] *= alpha;
        o_acc[nt][1] *= alpha;
        o_acc[nt + 1][0] *= alpha;
        o_acc[nt + 1][1] *= alpha;
        const int ch = nt + (lane >> 4);
        uint32_t frag[4];
        ldmatrix_x4_trans(v_smem + (r * D + ((ch ^ (r & 7)) * 8)) * 2, frag);
        Mma::mma(o_acc[nt], pa0, 0u, pa2, 0u, frag[0], frag[1]);
        Mma::mma(o_acc[nt + 1], pa0, 0u, pa2, 0u, frag[2], frag[3]);
      }
    }
    __syncwarp();
  }
  cp_async_wait<0>();
  if constexpr (kLogits && kHasBulkStore) {
    if (lane == 0) bulk_wait_all();  // the logits are in global memory before the kernel ends
  }

  // ---- merge the 4 warps' states (shared memory reused: every warp has left its pipeline)
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  __syncthreads();
  float* st_m = reinterpret_cast<float*>(smem);                 // [warps][8]
  float* st_l = st_m + kDecodeWarps * kMaxHeadsPerSlot;         // [warps][8]
  float* st_o = st_l + kDecodeWarps * kMaxHeadsPerSlot;         // [warps][8][D]
  if (tig == 0) {
    st_m[warp * kMaxHeadsPerSlot + gid] = m_run;
    st_l[warp * kMaxHeadsPerSlot + gid] = l_run;
  }
  if constexpr (kPV) {
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      float* dst = st_o + (warp * kMaxHeadsPerSlot + gid) * D + nt * 8 + tig * 2;
      dst[0] = o_acc[nt][0];
      dst[1] = o_acc[nt][1];
    }
  }
  __syncthreads();

  const bool single = active_splits == 1;
  constexpr int kCols = kPV ? D : 1;
  for (int idx = tid; idx < num_heads_here * kCols; idx += kDecodeThreads) {
    const int h = idx / kCols, c = idx % kCols;
    float m_max = kNegInf;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) m_max = fmaxf(m_max, st_m[w * kMaxHeadsPerSlot + h]);
    float l_sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = m_max == kNegInf ? 0.0f : exp2f(st_m[w * kMaxHeadsPerSlot + h] - m_max);
      l_sum += st_l[w * kMaxHeadsPerSlot + h] * f;
      if constexpr (kPV) acc += st_o[(w * kMaxHeadsPerSlot + h) * D + c] * f;
    }
    const float lse = l_sum > 0.0f ? (m_max + log2f(l_sum)) * kLn2 : kNegInf;
    const float out = l_sum > 0.0f ? acc / l_sum : 0.0f;
    const int head = head0 + h;
    if (single) {
      write_final<T, D, kPV>(p, b, head, c, out, lse);
    } else {
      const int64_t sh = (static_cast<int64_t>(b) * p.num_splits + split) * p.num_heads + head;
      if constexpr (kPV) p.partial_o[sh * D + c] = out;
      if (c == 0) p.partial_lse[sh] = lse;
    }
  }
  if (single) return;

  // ---- split-KV merge by the last CTA of (b, slot) to finish
  __threadfence();
  __syncthreads();
  int* last_flag = reinterpret_cast<int*>(smem + Smem::kFlagOffset);
  int32_t* counter = p.counters + static_cast<int64_t>(b) * p.num_slots + slot;
  if (tid == 0) *last_flag = atomicAdd(counter, 1) == active_splits - 1;
  __syncthreads();
  if (!*last_flag) return;
  __threadfence();

  // weights[h][s] = exp(lse_s - lse_max) / sum, then lse[h]; in shared memory.
  float* weights = reinterpret_cast<float*>(smem);          // [8][kMaxSplits]
  float* merged_lse = weights + kMaxHeadsPerSlot * kMaxSplits;  // [8]
  for (int h = warp; h < num_heads_here; h += kDecodeWarps) {
    const int64_t base = static_cast<int64_t>(b) * p.num_splits * p.num_heads + head0 + h;
    float m_max = kNegInf;
    for (int s = lane; s < active_splits; s += 32) {
      const float ls = __ldcg(p.partial_lse + base + static_cast<int64_t>(s) * p.num_heads);
      weights[h * kMaxSplits + s] = ls;
      m_max = fmaxf(m_max, ls);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m_max = fmaxf(m_max, __shfl_xor_sync(0xffffffffu, m_max, off));
    float sum = 0.0f;
    for (int s = lane; s < active_splits; s += 32) {
      const float f = m_max == kNegInf ? 0.0f : expf(weights[h * kMaxSplits + s] - m_max);
      weights[h * kMaxSplits + s] = f;
      sum += f;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    for (int s = lane; s < active_splits; s += 32)
      weights[h * kMaxSplits + s] = sum > 0.0f ? weights[h * kMaxSplits + s] / sum : 0.0f;
    if (lane == 0) merged_lse[h] = sum > 0.0f ? m_max + logf(sum) : kNegInf;
  }
  __syncthreads();
  for (int idx = tid; idx < num_heads_here * kCols; idx += kDecodeThreads) {
    const int h = idx / kCols, c = idx % kCols;
    float acc = 0.0f;
    if constexpr (kPV) {
      const int64_t base = (static_cast<int64_t>(b) * p.num_splits * p.num_heads + head0 + h) * D + c;
#pragma unroll 4
      for (int s = 0; s < active_splits; ++s)
        acc += weights[h * kMaxSplits + s] * __ldcg(p.partial_o + base + static_cast<int64_t>(s) * p.num_heads * D);
    }
    write_final<T, D, kPV>(p, b, head0 + h, c, acc, merged_lse[h]);
  }
  if (tid == 0) *counter = 0;
}

}  // namespace kascade::cuda::detail
