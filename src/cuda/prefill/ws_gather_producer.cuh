// src/cuda/prefill/ws_gather_producer.cuh — the producer warpgroup of the warp-specialised sparse
// (reuse) prefill kernel (ws_attention_kernel.cuh with WsKeys::kGathered): per gathered unit
// (ws_common.cuh), Q into its buffer, then the K and V rows of the unit's key list — the row's Top-k
// entries (any order), then the tile's local keys — tile by tile of 128 keys into the same K/V rings
// the consumers of the dense kernel read (K(n), then V(n − 1)).
//
// Per key tile: each of the 128 producer threads resolves ONE key (its entry — read two tiles ahead
// into a register — checked against the row's bound, then one block-table lookup, issued one tile
// ahead so that its latency hides behind the previous tile's copies) to the index of its K/V head
// row, stored in a shared ring of 3 × 128 int32 (-1: zero fill); one producer named barrier per
// tile; then every thread issues its 16-byte cp.async pieces of the tile, 8 threads per row (zero
// fill past the list and for bad keys), and publishes them with ONE cp.async.mbarrier.arrive.noinc
// on the slot's "full" barrier (128 arrivals). The producer never waits for its own copies — a
// stage completes when they land — so the ring (3 stages at d = 128, 4 at d = 64) stays full of keys
// in flight; it only blocks on a slot's "empty" barrier. The local keys are contiguous but at most
// T per tile and not aligned to the 128-key tiles of the list, so they take the same gather (TMA
// would gain nothing there).
// wgmma reads the tiles through the async proxy: each consumer thread fences (fence.proxy.async)
// after its wait on a gathered tile's "full" barrier.
// Bad device data: entries outside [0, bound) set kErrorIndex, page ids outside the cache
// kErrorPage; such keys are zero-filled (as the dense ws kernel does for bad pages).
// Device-only; tested through sparse_prefill / anchor_prefill (tests/cuda/test_prefill_sparse.cpp,
// test_prefill_anchor.cpp) with the warp-specialised kernels selected.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/ws_common.cuh"
#include "cuda/prefill/ws_primitives.cuh"

namespace kascade::cuda::prefill::ws {

#ifdef KASCADE_PREFILL_HAS_WGMMA

constexpr uint32_t kGatherBarrier = 3;  // named barrier of the producer warpgroup

template <typename T, int D>
struct GatherProducer {
  using Smem = WsSmem<D, true, WsKeys::kGathered>;

  const CallArgs& c;
  uint32_t smem_base;  // shared-window address of the aligned dynamic shared memory
  int32_t* key_rows;   // [Smem::kKeyRowSlots][128] K/V head rows of the tiles in flight (-1: zero fill)
  int tid;             // 0..127

  __device__ __forceinline__ uint32_t barrier(int i) const {
    return smem_base + static_cast<uint32_t>(Smem::kBarrierOffset) + 8u * i;
  }

  // The entry this thread resolves for tile n (key n·128 + tid), read ahead; -1 past the entries.
  __device__ __forceinline__ int prefetch_entry(const WsUnit& w, int n) const {
    const int i = n * kWsBlockKeys + tid;
    return i < w.row_len ? __ldg(w.row_entries + i) : -1;
  }

  // Key i of the unit's list resolved in two steps, so that the block-table read is in flight
  // while the previous tile's copies are issued: begin_resolve reads the page id, finish_resolve
  // (after the copies) checks it and gives the cache row (page · page_size + slot); -1 past the list
  // or for bad data (reported). entry: the prefetched entry when i < row_len.
  struct PendingKey {
    int j;     // key position; -1 past the list, -2 bad entry
    int page;  // block-table entry of j's page (j >= 0)
  };
  __device__ __forceinline__ PendingKey begin_resolve(const WsUnit& w, int i, int entry) const {
    PendingKey k{-1, 0};
    if (i >= w.num_keys) return k;
    k.j = i >= w.row_len ? w.local_start + (i - w.row_len) : (entry >= 0 && entry < w.entry_bound ? entry : -2);
    if (k.j >= 0) k.page = c.block_table[static_cast<int64_t>(w.b) * c.max_pages_per_seq + k.j / c.page_size];
    return k;
  }
  // The index of the key's K (and V) head row in the cache, (page · page_size + slot) · G + kv_head
  // (< 2^31: ws_gather_eligible, host), computed once per key so that the copies below need only a
  // multiply-add; -1 past the list or for bad data (reported).
  __device__ __forceinline__ int32_t finish_resolve(const WsUnit& w, const PendingKey& k) const {
    if (k.j == -1) return -1;
    if (k.j == -2) {
      report_error(c, kErrorIndex);
      return -1;
    }
    if (k.page < 0 || k.page >= c.num_pages) {
      report_error(c, kErrorPage);
      return -1;
    }
    return (k.page * c.page_size + k.j % c.page_size) * c.num_kv_heads + w.kv_head;
  }

  // The tile's head rows (resolved in `rows`, -1: zero fill) of K or V (`base`, [rows][D]) into the
  // tile at `tile`; published on `full` when the copies land. 8 threads per row, each copying one
  // 16-byte chunk of every 64-column block: a warp instruction reads 4 rows × 128 contiguous bytes
  // and each 8-thread phase writes one row's 8 distinct swizzled chunks (no bank conflict). A thread
  // serves 16 rows (r = tid / 8 + 16·pass, so r & 7 and its swizzle are the same in every pass) with
  // one shared-memory read and one multiply-add per row — the copies were issue-bound on address
  // arithmetic when every 16-byte piece recomputed its 64-bit row offset (Nsight Compute, 2026-12-03).
  __device__ __forceinline__ void gather_tile(const int32_t* rows, const T* base, uint32_t tile,
                                              uint32_t full) const {
    constexpr int kThreadsPerRow = 8;
    constexpr int kRowsPerPass = 128 / kThreadsPerRow;  // 16
    constexpr int kPasses = kWsBlockKeys / kRowsPerPass;
    constexpr int kBlocks = D / 64;  // 64-column blocks: pieces per thread and row
    const int chunk = tid % kThreadsPerRow;
    const int r0 = tid / kThreadsPerRow;
    // This thread's chunk of head row 0; row i is kRowBytes further on per row.
    constexpr int64_t kRowBytes = D * int64_t{sizeof(T)};
    const char* const src0 = reinterpret_cast<const char*>(base) + chunk * 16;
    // Every row first: each copy's asm clobbers memory, so a read between copies would wait for
    // its predecessor's issue.
    int32_t row[kPasses];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) row[pass] = rows[r0 + pass * kRowsPerPass];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int r = r0 + pass * kRowsPerPass;
      // Row -1 (zero fill) reads nothing; its address is row 0's, a valid one.
      const char* const src = src0 + max(row[pass], 0) * kRowBytes;
#pragma unroll
      for (int blk = 0; blk < kBlocks; ++blk) {
        cp_async_16_or_zeros(tile + 2u * swizzle<D, kWsBlockKeys>(r, blk * 8 + chunk), src + blk * 128, row[pass]);
      }
    }
    cp_async_mbarrier_arrive_noinc(full);
  }

  __device__ void run(const AttentionArgs& args, int num_units) {
    constexpr int S = Smem::kStages;
    const T* k_base = static_cast<const T*>(c.k);
    const T* v_base = static_cast<const T*>(c.v);
    int units_done = 0, k_count = 0, v_count = 0, tiles = 0;
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const WsUnit w = decode_unit<WsKeys::kGathered>(args, u, tid == 0);
      if (!w.valid || w.num_blocks == 0) continue;  // (the consumers store empty rows themselves)
      // Q: the consumers free the buffer after the last Q·Kᵀ of the previous unit.
      mbarrier_wait(barrier(1), static_cast<uint32_t>(units_done & 1) ^ 1u);
      load_unit_q<T, D>(c, w, smem_base, tid);
      cp_async_mbarrier_arrive_noinc(barrier(0));
      ++units_done;
      // Tile n's rows sit in ring slot (tiles + n) % 3. Tile 0 is resolved here; tile n + 1 while
      // tile n is issued (its block-table read in flight behind the gathers), its entry a tile earlier.
      key_rows[(tiles % Smem::kKeyRowSlots) * kWsBlockKeys + tid] =
          finish_resolve(w, begin_resolve(w, tid, prefetch_entry(w, 0)));
      int entry = w.num_blocks > 1 ? prefetch_entry(w, 1) : -1;
      for (int n = 0; n < w.num_blocks; ++n) {
        // Every row of tile n resolved (and visible to the warpgroup); the slot written below for
        // tile n + 1 was last read by V(n − 2), issued before this barrier.
        named_barrier_sync(kGatherBarrier, 128);
        const PendingKey next = begin_resolve(w, (n + 1) * kWsBlockKeys + tid, entry);  // j = -1 past the list
        entry = n + 2 < w.num_blocks ? prefetch_entry(w, n + 2) : -1;
        const RingSlot ks = ring_slot<S>(k_count++);
        mbarrier_wait(barrier(2 + S + ks.index), ks.parity ^ 1u);
        gather_tile(key_rows + (tiles % Smem::kKeyRowSlots) * kWsBlockKeys, k_base,
                    smem_base + static_cast<uint32_t>(Smem::kKOffset + ks.index * Smem::kTileBytes),
                    barrier(2 + ks.index));
        if (n > 0) load_v(key_rows + ((tiles - 1) % Smem::kKeyRowSlots) * kWsBlockKeys, v_base, v_count);
        ++tiles;
        if (n + 1 < w.num_blocks) key_rows[(tiles % Smem::kKeyRowSlots) * kWsBlockKeys + tid] = finish_resolve(w, next);
      }
      load_v(key_rows + ((tiles - 1) % Smem::kKeyRowSlots) * kWsBlockKeys, v_base, v_count);
    }
  }

  __device__ __forceinline__ void load_v(const int32_t* rows, const T* v_base, int& v_count) const {
    constexpr int S = Smem::kStages;
    const RingSlot vs = ring_slot<S>(v_count++);
    mbarrier_wait(barrier(2 + 3 * S + vs.index), vs.parity ^ 1u);
    gather_tile(rows, v_base, smem_base + static_cast<uint32_t>(Smem::kVOffset + vs.index * Smem::kTileBytes),
                barrier(2 + 2 * S + vs.index));
  }
};

#endif  // KASCADE_PREFILL_HAS_WGMMA

}  // namespace kascade::cuda::prefill::ws
