// src/cuda/prefill/ws_attention_kernel.cuh — the warp-specialised Hopper (sm_90a) prefill mainloop in
// the style of FlashAttention-3, behind dense causal prefill (o + lse), the anchor's LSE pass and
// sparse (reuse) prefill over gathered key lists (WsKeys::kGathered: units and key lists of
// ws_common.cuh, producer of ws_gather_producer.cuh, the consumers below with a per-key position
// mask). Same semantics, rows and key lists as attention_kernel.cuh (the reference path). Which one
// a call runs: PrefillPlanOptions::kernels and choose_causal_kernel / choose_sparse_kernel
// (causal_launch.h). The pooled-score kernel (ws_pooled_scores_kernels.cu) reuses Producer and issue_qk.
//
// CTA = 3 warpgroups (384 threads), persistent: CTA c takes units c, c + gridDim.x, ... of the
// (row block, KV group, sequence) units ordered longest key list first (row blocks from the last).
// A unit = 128 rows, a row being one (query, query head) pair of one KV group, query-major
// (row = query · g + head) so the g heads of a GQA group share every K/V tile.
//   warpgroup 0 (producer, setmaxnreg.dec to kProducerRegs): per unit, Q (128 × d) into its buffer,
//     then K tiles of 128 keys into a kStages-deep ring and V tiles into another, one tile behind K
//     (K(n), V(n−1): the consumers use them in that order). Loads are 16-byte cp.async with zero
//     fill past the key list: per key through the block table (any page size), or one table entry
//     per tile when the page size is a multiple of 128 (contiguous K/V, large pages). Each load is
//     published one load later: cp.async.wait_group 1 → fence.proxy.async (the tiles are read by
//     wgmma, the async proxy) → mbarrier arrive on the slot's "full" barrier (128 arrivals). Before
//     blocking on a slot's "empty" barrier the producer publishes everything it issued, so no
//     consumer ever waits for a load that the producer holds back.
//     kTma (PrefillKernels::kAuto / kWarpSpecializedTma, ws_tensor_map.h): K/V tiles lying wholly
//     in the key list and in one page are loaded by TMA instead — thread 0 arms the slot's "full" barrier
//     (1 arrival + the tile's bytes) and issues one cp.async.bulk.tensor box per 64 columns, which
//     land in the same 128-byte-swizzled layout; the unit's last, partial tile (zero fill) and tiles
//     on bad page ids go through cp.async, waited for and published by one arrival.
//   warpgroups 1, 2 (consumers, setmaxnreg.inc to kConsumerRegs): 64 rows each. Per key tile n:
//     S = Q·Kᵀ as wgmma.m64n128k16 from shared memory (SS), the online softmax in registers in the
//     exp2 domain with the scale folded into one FFMA (p = 2^(s·c − m·c), c = scale·log2 e), and
//     O += P·V as wgmma m64n{64,128}k16 with P from registers (RS). Intra-warpgroup overlap: Q·Kᵀ of
//     tile n and P·V of tile n − 1 are issued together, the softmax of tile n runs while P·V(n − 1)
//     is still on the tensor cores. Ping-pong between the two consumer warpgroups: named barriers
//     let one warpgroup issue its MMAs while the other runs its softmax. Causal masking only on tiles
//     past the warpgroup's first position. Each consumer thread arrives on the slot's "empty"
//     barrier (256 arrivals) once its warpgroup's MMAs reading the slot have completed.
// kPV = false (LSE pass): no V ring, no P·V, no O; the softmax keeps only m and l.
// Chunk invariance as in attention_kernel.cuh: key tiles start at key 0 in steps of 128 whatever the
// unit's rows are, and a tile masked for a row leaves that row's m, l and O bit-for-bit unchanged.
// Bad device data (lengths past the plan, page ids) sets error bits; the unit is skipped or the key
// zero-filled, as in attention_kernel.cuh.
// Tested by tests/cuda/test_prefill_dense.cpp (every dense check with the kernel forced),
// test_prefill_select.cpp and test_prefill_anchor.cpp (LSE pass, layer-0 anchor, sparse output),
// test_prefill_sparse.cpp (sparse prefill: the WarpSpecialized* tests).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/ws_common.cuh"
#include "cuda/prefill/ws_gather_producer.cuh"
#include "cuda/prefill/ws_primitives.cuh"
#include "cuda/prefill/ws_tensor_map.h"

namespace kascade::cuda::prefill::ws {

constexpr uint32_t kProducerRegs = 56;
constexpr uint32_t kConsumerRegs = 224;
static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kWsConsumerGroups <= 65536, "register file");
constexpr uint32_t kPingPongBarrier0 = 1;  // named barrier ids of consumer warpgroups 0 and 1
constexpr uint32_t kProducerBarrier = 3;   // named barrier of the producer warpgroup (TMA producer)
constexpr uint32_t kConsumerThreads = 128 * kWsConsumerGroups;

#ifdef KASCADE_PREFILL_HAS_WGMMA
// (Device code of the sm_90a pass only: the wgmma/mbarrier helpers exist there alone.)

// ---- producer

template <typename T, int D, bool kPV, bool kTma>
struct Producer {
  using Smem = WsSmem<D, kPV>;
  static constexpr int kChunks = D / 8;               // 16-byte chunks per row
  static constexpr int kRowsPerPass = 128 / kChunks;  // rows covered by the warpgroup per pass

  const CallArgs& c;
  const WsKvMaps& maps;  // kTma: the K and V tensor maps (__grid_constant__ kernel parameter)
  uint32_t smem_base;    // shared-window address of the aligned dynamic shared memory
  int tid;               // 0..127
  uint32_t pending = 0;  // barrier of the last load not yet published (0: none)

  __device__ __forceinline__ uint32_t barrier(int i) const {
    return smem_base + static_cast<uint32_t>(Smem::kBarrierOffset) + 8u * i;
  }

  // Publishes the loads issued before the most recent one (called right after a commit).
  __device__ __forceinline__ void publish_all_but_last(uint32_t bar) {
    if (pending != 0) {
      cp_async_wait<1>();
      fence_async_shared();
      mbarrier_arrive(pending);
    }
    pending = bar;
  }
  __device__ __forceinline__ void publish_all() {
    if (pending != 0) {
      cp_async_wait<0>();
      fence_async_shared();
      mbarrier_arrive(pending);
      pending = 0;
    }
  }
  // Waits for a slot's "empty" barrier; publishes everything first if it would block.
  __device__ __forceinline__ void acquire(uint32_t bar, uint32_t parity) {
    uint32_t ready = 0;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ready)
        : "r"(bar), "r"(parity)
        : "memory");
    if (ready == 0) {
      publish_all();
      mbarrier_wait(bar, parity);
    }
  }

  // Q rows [row0, row0 + 128) of the unit (zero past rows_total): one row per thread.
  __device__ __forceinline__ void load_q(const WsUnit& w) { load_unit_q<T, D>(c, w, smem_base, tid); }

  // Keys [n·128, n·128 + 128) of the unit into the tile at `tile` (K or V: `base`), zero past num_keys.
  __device__ __forceinline__ void load_tile(const WsUnit& w, int n, const T* base, uint32_t tile) {
    const int ch = tid % kChunks;
    const int r0 = tid / kChunks;
    const int key0 = n * kWsBlockKeys;
    // Large pages: the tile lies in one page (page_size is a multiple of 128).
    const bool whole_tile_page = c.page_size % kWsBlockKeys == 0;
    int64_t tile_row0 = -1;  // cache row of key0 when whole_tile_page
    if (whole_tile_page) {
      const int page = c.block_table[static_cast<int64_t>(w.b) * c.max_pages_per_seq + key0 / c.page_size];
      if (page >= 0 && page < c.num_pages) {
        tile_row0 = static_cast<int64_t>(page) * c.page_size + key0 % c.page_size;
      } else if (tid == 0) {
        report_error(c, kErrorPage);
      }
    }
#pragma unroll 4
    for (int pass = 0; pass < kChunks; ++pass) {
      const int r = r0 + pass * kRowsPerPass;
      const int j = key0 + r;
      int64_t offset = -1;
      if (j < w.num_keys) {
        if (whole_tile_page) {
          offset = tile_row0 >= 0 ? ((tile_row0 + r) * c.num_kv_heads + w.kv_head) * D : -1;
        } else {
          offset = kv_row_offset<D>(c, w.b, j, w.kv_head);
        }
      }
      const uint32_t to = tile + 2u * swizzle<D, kWsBlockKeys>(r, ch);
      cp_async_16(to, offset >= 0 ? base + offset + ch * 8 : base, offset >= 0 ? 16 : 0);
    }
  }

  // A K or V tile into slot `tile`, published on the slot's "full" barrier `full`.
  //   !kTma: cp.async by every thread, published one load later (publish_all_but_last; 128 arrivals).
  //   kTma: when the tile's 128 keys are all in the key list and in one valid page, thread 0 arms
  //     the barrier (1 arrival + the tile's bytes) and issues D/64 TMA boxes, one per 64-column
  //     block; the copies complete the barrier. Otherwise (the unit's last, partial tile, or a bad
  //     page id): cp.async with zero fill by every thread, waited for, fenced for the async proxy,
  //     joined on the producer's named barrier, then thread 0's single arrival publishes it.
  __device__ __forceinline__ void load_kv(const WsUnit& w, int n, const T* base, const CUtensorMap* map,
                                          uint32_t tile, uint32_t full) {
    if constexpr (kTma) {
      const int key0 = n * kWsBlockKeys;
      int row0 = -1;
      if (key0 + kWsBlockKeys <= w.num_keys && key0 / c.page_size == (key0 + kWsBlockKeys - 1) / c.page_size) {
        const int page = c.block_table[static_cast<int64_t>(w.b) * c.max_pages_per_seq + key0 / c.page_size];
        if (page >= 0 && page < c.num_pages) row0 = page * c.page_size + key0 % c.page_size;  // < 2^31 (host)
      }
      if (row0 >= 0) {
        if (tid == 0) {
          mbarrier_arrive_expect_tx(full, static_cast<uint32_t>(Smem::kTileBytes));
#pragma unroll
          for (int cb = 0; cb < D / 64; ++cb) {
            tma_load_3d(tile + static_cast<uint32_t>(cb * kWsBlockKeys * 128), map, cb * 64, w.kv_head, row0, full);
          }
        }
        return;
      }
      load_tile(w, n, base, tile);
      cp_async_commit();
      cp_async_wait<0>();
      fence_async_shared();
      if (pending != 0) {  // the Q load (same wait) is published too
        mbarrier_arrive(pending);
        pending = 0;
      }
      named_barrier_sync(kProducerBarrier, 128);
      if (tid == 0) mbarrier_arrive(full);
    } else {
      (void)map;
      load_tile(w, n, base, tile);
      cp_async_commit();
      publish_all_but_last(full);
    }
  }

  __device__ void run(const AttentionArgs& args, int num_units) {
    constexpr int S = Smem::kStages;
    const T* k_base = static_cast<const T*>(c.k);
    const T* v_base = static_cast<const T*>(c.v);
    int units_done = 0, k_count = 0, v_count = 0;
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const WsUnit w = decode_unit<WsKeys::kCausal>(args, u, tid == 0);
      if (!w.valid) continue;
      // Q: the consumers free the buffer after the last Q·Kᵀ of the previous unit.
      acquire(barrier(1), static_cast<uint32_t>(units_done & 1) ^ 1u);
      load_q(w);
      cp_async_commit();
      publish_all_but_last(barrier(0));
      ++units_done;
      for (int n = 0; n < w.num_blocks; ++n) {
        const RingSlot ks = ring_slot<S>(k_count++);
        acquire(barrier(2 + S + ks.index), ks.parity ^ 1u);
        load_kv(w, n, k_base, &maps.k, smem_base + static_cast<uint32_t>(Smem::kKOffset + ks.index * Smem::kTileBytes),
                barrier(2 + ks.index));
        if constexpr (kPV) {
          if (n > 0) load_v(w, n - 1, v_base, v_count);
        }
      }
      if constexpr (kPV) load_v(w, w.num_blocks - 1, v_base, v_count);
    }
    publish_all();
  }

  __device__ __forceinline__ void load_v(const WsUnit& w, int n, const T* v_base, int& v_count) {
    constexpr int S = Smem::kStages;
    const RingSlot vs = ring_slot<S>(v_count++);
    acquire(barrier(2 + 3 * S + vs.index), vs.parity ^ 1u);
    load_kv(w, n, v_base, &maps.v, smem_base + static_cast<uint32_t>(Smem::kVOffset + vs.index * Smem::kTileBytes),
            barrier(2 + 2 * S + vs.index));
  }
};

// ---- consumers

// Q·Kᵀ of the warpgroup's 64 rows (rows wg_row0.. of a [kQRows][D] Q tile) against a 128-key K
// tile; issued and committed, not waited for.
template <typename T, int D, int kQRows = kWsBlockRows>
__device__ __forceinline__ void issue_qk(uint32_t q_tile, int wg_row0, uint32_t k_tile, float (&s)[16][4]) {
  fence_accumulators(s);
  wgmma_fence();
  const uint64_t desc_a = sw128_descriptor(q_tile + wg_row0 * 128);
  const uint64_t desc_b = sw128_descriptor(k_tile);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t k_offset = (ks & 3) * 32;  // 16 elements = 32 bytes into the 128-byte row
    WgmmaQk128<T>::mma(s, advance_descriptor(desc_a, (ks >> 2) * (kQRows * 128) + k_offset),
                       advance_descriptor(desc_b, (ks >> 2) * (kWsBlockKeys * 128) + k_offset), ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// O += P·V: P from registers (pa[kk]: keys kk·16 .. kk·16 + 15 as m16n8k16 A fragments), V a
// 128-key tile read as an MN-major operand; issued and committed, not waited for.
template <typename T, int D>
__device__ __forceinline__ void issue_pv(const uint32_t (&pa)[kWsBlockKeys / 16][4], uint32_t v_tile,
                                         float (&o)[D / 8][4]) {
  fence_accumulators(o);
  wgmma_fence();
  const uint64_t desc_v = sw128_descriptor(v_tile, kWsBlockKeys * 128, 1024);
#pragma unroll
  for (int kk = 0; kk < kWsBlockKeys / 16; ++kk) {
    WgmmaPv<T, D>::mma(o, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], advance_descriptor(desc_v, kk * 16 * 128));
  }
  wgmma_commit();
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

template <typename T, int D, bool kPV, WsKeys kKeys>
struct Consumer {
  using Smem = WsSmem<D, kPV, kKeys>;
  static constexpr bool kGathered = kKeys == WsKeys::kGathered;
  using Mma = Mma16<T>;
  static constexpr int kKeyTiles = kWsBlockKeys / 8;  // 16 accumulator column groups of 8
  static constexpr float kRescaleSlack = 8.0f;         // log2 units the reference max may lag (softmax)

  const AttentionArgs& args;
  const CallArgs& c;
  uint32_t smem_base;
  int wg;              // consumer warpgroup 0 or 1
  int gid, tig, warp;  // lane / 4, lane % 4, warp within the warpgroup
  float c_log2;        // scale · log2 e

  float m_run[2], l_run[2];
  float o[kPV ? D / 8 : 1][4];
  uint32_t pa[kWsBlockKeys / 16][4];

  __device__ __forceinline__ uint32_t barrier(int i) const {
    return smem_base + static_cast<uint32_t>(Smem::kBarrierOffset) + 8u * i;
  }
  __device__ __forceinline__ uint32_t k_tile(RingSlot slot) const {
    return smem_base + static_cast<uint32_t>(Smem::kKOffset + slot.index * Smem::kTileBytes);
  }
  __device__ __forceinline__ uint32_t v_tile(RingSlot slot) const {
    return smem_base + static_cast<uint32_t>(Smem::kVOffset + slot.index * Smem::kTileBytes);
  }
  // Frees a K slot (and, after the unit's last Q·Kᵀ, the Q buffer).
  __device__ __forceinline__ void release_k(RingSlot slot, bool last_of_unit) const {
    mbarrier_arrive(barrier(2 + Smem::kStages + slot.index));
    if (last_of_unit) mbarrier_arrive(barrier(1));
  }
  // Waits for a K/V tile; a gathered tile (written by cp.async, the generic proxy) is then fenced
  // for the async proxy that wgmma reads through.
  __device__ __forceinline__ void wait_full(uint32_t bar, uint32_t parity) const {
    mbarrier_wait(bar, parity);
    if constexpr (kGathered) fence_async_shared();
  }
  __device__ __forceinline__ void turn_begin() const { named_barrier_sync(kPingPongBarrier0 + wg, kConsumerThreads); }
  __device__ __forceinline__ void turn_end() const {
    named_barrier_arrive(kPingPongBarrier0 + (wg ^ 1), kConsumerThreads);
  }

  // t[0] = max of t[0 .. 2·kWidth): halving steps, every index a compile-time constant (registers only).
  template <int kWidth, int kN>
  __device__ __forceinline__ static void tree_max(float (&t)[kN]) {
    if constexpr (kWidth >= 1) {
#pragma unroll
      for (int i = 0; i < kWidth; ++i) t[i] = fmaxf(t[i], t[i + kWidth]);
      tree_max<kWidth / 2>(t);
    }
  }

  // Masks keys past each row's position, then the online softmax: s becomes p = 2^(s·c − m·c); m, l
  // updated; returns the rescale factors. Causal lists: key i is position i, masked only on tiles
  // past the warpgroup's first position. Gathered lists: key i at gathered_key_position (entries of
  // include_local rows always visible), masked on every tile that holds anything else.
  __device__ __forceinline__ void softmax(float (&s)[kKeyTiles][4], const WsUnit& w, int n, const int (&row_pos)[2],
                                          int first_pos, float (&alpha)[2]) {
    const int key0 = n * kWsBlockKeys;
    if constexpr (kGathered) {
      if (!w.include_local || key0 + kWsBlockKeys > w.row_len) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int pos = gathered_key_position(w, key0 + nt * 8 + 2 * tig + e);
            if (pos > row_pos[0]) s[nt][e] = -INFINITY;
            if (pos > row_pos[1]) s[nt][2 + e] = -INFINITY;
          }
        }
      }
    } else if (key0 + kWsBlockKeys - 1 > first_pos) {
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (key0 + nt * 8 + 2 * tig + (e & 1) > row_pos[e >> 1]) s[nt][e] = -INFINITY;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The row max as a tree (depth log2(2·kKeyTiles) + 1 instead of a chain of kKeyTiles + 1): the
      // exponentials wait for it. max is exact, so any order gives the same bits.
      static_assert((kKeyTiles & (kKeyTiles - 1)) == 0, "a power of two for the tree");
      float t[kKeyTiles];
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) t[nt] = fmaxf(s[nt][2 * h], s[nt][2 * h + 1]);
      tree_max<kKeyTiles / 2>(t);
      float mx = fmaxf(m_run[h], t[0]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // The attention kernels keep the reference max m_run while the tile's max exceeds it by at most
      // kRescaleSlack in the exp2 domain (p ≤ 2^kRescaleSlack: exact in fp32 / f16 / bf16 P, the same
      // softmax since o and l share the reference), so most tiles leave o unscaled (FA4's conditional
      // rescaling); the LSE pass has no o and always moves it. NaN (−inf − −inf) moves it too.
      float m_ref = mx;
      if constexpr (kPV) {
        if (__fmul_rn(mx, c_log2) - __fmul_rn(m_run[h], c_log2) <= kRescaleSlack) m_ref = m_run[h];
      }
      // Products never fused: an unchanged reference gives alpha = 2^0 = 1 exactly (masked tiles
      // leave the state bit-identical).
      const float m_scaled = m_ref == -INFINITY ? 0.0f : __fmul_rn(m_ref, c_log2);
      alpha[h] = fast_exp2(__fmul_rn(m_run[h], c_log2) - m_scaled);  // m_run = -inf: 0
      m_run[h] = m_ref;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        s[nt][2 * h] = fast_exp2(fmaf(s[nt][2 * h], c_log2, -m_scaled));
        s[nt][2 * h + 1] = fast_exp2(fmaf(s[nt][2 * h + 1], c_log2, -m_scaled));
        sum += s[nt][2 * h] + s[nt][2 * h + 1];
      }
      l_run[h] = l_run[h] * alpha[h] + sum;
    }
  }

  // Keeps the softmax just computed (m_run, l_run depend on all its exponentials) before the next
  // wgmma wait (pin_before_wait).
  __device__ __forceinline__ void pin_softmax() const {
    const float state[4] = {m_run[0], m_run[1], l_run[0], l_run[1]};
    pin_before_wait(smem_base + static_cast<uint32_t>(Smem::kPinOffset) + 16u * (wg * 4 + warp), state,
                    gid == 0 && tig == 0);
  }

  // o *= alpha per row, skipped when no row of the warp moved its reference max (alpha = 1 exactly).
  __device__ __forceinline__ void rescale_o(const float (&alpha)[2]) {
    if constexpr (kPV) {
      if (!__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) return;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][0] *= alpha[0];
        o[dt][1] *= alpha[0];
        o[dt][2] *= alpha[1];
        o[dt][3] *= alpha[1];
      }
    }
  }

  __device__ __forceinline__ void pack_p(const float (&s)[kKeyTiles][4]) {
#pragma unroll
    for (int kk = 0; kk < kWsBlockKeys / 16; ++kk) {
      pa[kk][0] = Mma::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = Mma::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = Mma::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = Mma::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  }

  __device__ void run(int num_units) {
    constexpr int S = Smem::kStages;
    const uint32_t q_tile = smem_base;
    int units_done = 0, k_count = 0, v_count = 0;
    // Warpgroup 0 issues first: warpgroup 1 opens its turn.
    if (wg == 1) turn_end();
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const WsUnit w = decode_unit<kKeys>(args, u, false);
      if (!w.valid) continue;
      const int wg_row0 = wg * 64;
      int row_pos[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = w.row0 + wg_row0 + warp * 16 + gid + 8 * h;
        row_pos[h] = row < w.rows_total ? w.pos_base + row / w.nh : -1;
      }
      const int first_pos = w.pos_base + (w.row0 + wg_row0) / w.nh;
      m_run[0] = m_run[1] = -INFINITY;
      l_run[0] = l_run[1] = 0.0f;
      if constexpr (kPV) {
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
      }
      if (w.num_blocks == 0) {  // a gathered list with no key (the producer loads nothing): o = 0, lse = -inf
        store(w, wg_row0);
        continue;
      }
      mbarrier_wait(barrier(0), static_cast<uint32_t>(units_done & 1));  // Q landed
      if constexpr (kGathered) fence_async_shared();  // cp.async writes, read by wgmma (async proxy)
      ++units_done;

      float s[kKeyTiles][4];
      float alpha[2];
      if constexpr (!kPV) {
        // LSE pass, tiles in pairs: Q·Kᵀ(n) and Q·Kᵀ(n + 1) issued together, the softmax of n (pinned
        // before the second wait) overlapping Q·Kᵀ(n + 1). Nothing is in flight across the loop's
        // edges (ptxas serialises every wgmma otherwise, C7514). An odd count ends on a dummy product
        // of the last tile's slot, whose softmax masks every key (m and l unchanged); that slot and Q
        // are freed after the loop.
        float s_next[kKeyTiles][4];
        RingSlot last{};
        for (int n = 0; n < w.num_blocks; n += 2) {
          const RingSlot ka = ring_slot<S>(k_count++);
          wait_full(barrier(2 + ka.index), ka.parity);
          RingSlot kb = ka;
          if (n + 1 < w.num_blocks) {
            kb = ring_slot<S>(k_count++);
            wait_full(barrier(2 + kb.index), kb.parity);
          }
          turn_begin();
          issue_qk<T, D>(q_tile, wg_row0, k_tile(ka), s);
          issue_qk<T, D>(q_tile, wg_row0, k_tile(kb), s_next);
          turn_end();
          wgmma_wait<1>();
          fence_accumulators(s);
          if (n + 1 < w.num_blocks) release_k(ka, false);
          softmax(s, w, n, row_pos, first_pos, alpha);
          pin_softmax();
          wgmma_wait<0>();
          fence_accumulators(s_next);
          softmax(s_next, w, n + 1, row_pos, first_pos, alpha);
          if (n + 2 < w.num_blocks) release_k(kb, false);
          last = kb;
        }
        release_k(last, true);
      }
      if constexpr (kPV) {
        // Tile 0: Q·Kᵀ alone.
        const RingSlot k0 = ring_slot<S>(k_count++);
        wait_full(barrier(2 + k0.index), k0.parity);
        turn_begin();
        issue_qk<T, D>(q_tile, wg_row0, k_tile(k0), s);
        turn_end();
        wgmma_wait<0>();
        fence_accumulators(s);
        release_k(k0, w.num_blocks == 1);
        softmax(s, w, 0, row_pos, first_pos, alpha);
        pack_p(s);  // o is still zero: no rescale

        // Tiles 1..: Q·Kᵀ(n) and P·V(n − 1) issued together; the softmax of tile n overlaps P·V(n − 1).
        for (int n = 1; n < w.num_blocks; ++n) {
          const RingSlot ks = ring_slot<S>(k_count++);
          wait_full(barrier(2 + ks.index), ks.parity);
          const RingSlot vs = ring_slot<S>(v_count++);
          turn_begin();
          issue_qk<T, D>(q_tile, wg_row0, k_tile(ks), s);
          wait_full(barrier(2 + 2 * S + vs.index), vs.parity);
          issue_pv<T, D>(pa, v_tile(vs), o);
          turn_end();
          wgmma_wait<1>();  // Q·Kᵀ(n) done; P·V(n − 1) may still run
          fence_accumulators(s);
          release_k(ks, n == w.num_blocks - 1);
          softmax(s, w, n, row_pos, first_pos, alpha);
          // (ptxas 13.0 schedules the softmax's MUFU.EX2 after this wait: P·V(n − 1) overlaps only
          // the masking and the row max. Pinning them before it (pin_softmax, as the LSE pass does)
          // measured 1-3 % slower here: docs/perf.md, prefill round 6.)
          wgmma_wait<0>();
          fence_accumulators(o);
          mbarrier_arrive(barrier(2 + 3 * S + vs.index));  // V slot free
          rescale_o(alpha);
          pack_p(s);
        }
        // P·V of the last tile.
        const RingSlot vs = ring_slot<S>(v_count++);
        wait_full(barrier(2 + 2 * S + vs.index), vs.parity);
        turn_begin();
        issue_pv<T, D>(pa, v_tile(vs), o);
        turn_end();
        wgmma_wait<0>();
        fence_accumulators(o);
        mbarrier_arrive(barrier(2 + 3 * S + vs.index));
      }
      store(w, wg_row0);
    }
  }

  // o (input dtype) and the natural-log lse of the warpgroup's valid rows.
  __device__ __forceinline__ void store(const WsUnit& w, int wg_row0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = w.row0 + wg_row0 + warp * 16 + gid + 8 * h;
      if (row >= w.rows_total) continue;
      const int64_t out_row =
          static_cast<int64_t>(w.qidx_base + row / w.nh) * c.num_heads + w.head0 + row % w.nh;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      if constexpr (kPV) {
        T* out = static_cast<T*>(args.o) + out_row * D + 2 * tig;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          *reinterpret_cast<uint32_t*>(out + dt * 8) = Mma::pack(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
        }
      }
      if (args.lse != nullptr && tig == 0) {
        args.lse[out_row] = l > 0.0f ? (__fmul_rn(m_run[h], c_log2) + log2f(l)) * kLn2 : -INFINITY;
      }
    }
  }
};

#endif  // KASCADE_PREFILL_HAS_WGMMA

// The kernel: grid = min(units, multiprocessors) persistent CTAs of kWsThreads threads.
// kTma: K/V tiles through TMA (maps: tensor maps of call.k / call.v, ws_tensor_map.h); else
// cp.async (maps unused).
// kKeys = kGathered (sparse prefill; kPV, !kTma): units of decode_gathered_unit, K/V gathered by
// GatherProducer (ws_gather_producer.cuh); args.row_blocks = tile slots per sequence × row blocks per
// tile, consumers = query heads (per-query-head rows) or KV groups.
template <typename T, int D, bool kPV, bool kTma, WsKeys kKeys = WsKeys::kCausal>
__global__ void __launch_bounds__(kWsThreads, 1)
    ws_attention_kernel(const AttentionArgs args, const __grid_constant__ WsKvMaps maps) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  constexpr bool kGathered = kKeys == WsKeys::kGathered;
  static_assert(!kGathered || (kPV && !kTma), "gathered key lists: sparse prefill (o), cp.async gather");
  using Smem = WsSmem<D, kPV, kKeys>;
  constexpr int S = Smem::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = align_smem(smem_raw);
  const uint32_t smem_base = smem_address(smem);
  const CallArgs& c = args.call;
  const int consumers = kGathered && args.rows.per_query_head ? c.num_heads : c.num_kv_heads;
  const int num_units = args.row_blocks * consumers * c.batch;

  if (threadIdx.x == 0) {
    const uint32_t bars = smem_base + static_cast<uint32_t>(Smem::kBarrierOffset);
    mbarrier_init(bars + 0, 128);               // q_full: the producer's threads (regular or .noinc arrivals)
    mbarrier_init(bars + 8, kConsumerThreads);  // q_empty: every consumer thread
    for (int i = 0; i < S; ++i) {
      mbarrier_init(bars + 8u * (2 + i), kTma ? 1 : 128);          // k_full
      mbarrier_init(bars + 8u * (2 + S + i), kConsumerThreads);    // k_empty
      mbarrier_init(bars + 8u * (2 + 2 * S + i), kTma ? 1 : 128);  // v_full
      mbarrier_init(bars + 8u * (2 + 3 * S + i), kConsumerThreads);  // v_empty
    }
  }
  __syncthreads();

  const int warpgroup = warpgroup_index();
  if (warpgroup == 0) {
    release_registers<kProducerRegs>();
    if constexpr (kGathered) {
      GatherProducer<T, D> producer{c, smem_base, reinterpret_cast<int32_t*>(smem + Smem::kKeyRowsOffset),
                                    static_cast<int>(threadIdx.x)};
      producer.run(args, num_units);
    } else {
      Producer<T, D, kPV, kTma> producer{c, maps, smem_base, static_cast<int>(threadIdx.x)};
      producer.run(args, num_units);
    }
  } else {
    claim_registers<kConsumerRegs>();
    const int lane = threadIdx.x % 32;
    Consumer<T, D, kPV, kKeys> consumer{args, c, smem_base, warpgroup - 1, lane >> 2, lane & 3,
                                 static_cast<int>(threadIdx.x / 32) % 4, c.scale_log2};
    consumer.run(num_units);
  }
#else
  (void)maps;
  __trap();  // the host never launches this kernel without sm_90a code (ws_attention_kernels.cu)
#endif
}

}  // namespace kascade::cuda::prefill::ws
