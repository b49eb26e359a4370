// src/cuda/prefill/ws_pooled_scores_kernels.cu — the warp-specialised sm_90a pooled-score pass of
// anchor selection (same output as pooled_scores_kernels.cu, DESIGN.md §2.3):
//   scores[slot - wave_base][g][j] = Σ (or max) over the tile's rows (query i of the tile in the
//                                    call, head h of group g) of 2^(σ·log2e · q_{i,h}·k_{g,j} − lse_{i,h}·log2e),
// for every candidate j < s_t of the tiles whose pooled row needs a selection (0 < k_t < s_t),
// in the layout the Top-k kernel reads.
//
// Persistent CTA of 3 warpgroups (384 threads) walking units (wave slot, KV group, key chunk of
// kWsPoolChunkTiles tiles of 128 keys), wave slots fastest so that neighbouring CTAs read the same
// K chunk from L2.
//   warpgroup 0 (producer): the dense kernel's TMA producer (ws_attention_kernel.cuh, Producer with
//     kTma: the candidates are a contiguous prefix, so whole 128-key tiles go by TMA boxes and the
//     chunk's last partial tile by cp.async with zero fill). Q: all rows of the tile (T·g <= 256:
//     up to 2 rows per producer thread) into a [kMTiles·64][D] buffer, published one load later.
//   warpgroups 1, 2 (consumers): the unit's K tiles alternate between them (global tile count
//     parity; ping-pong named barriers make them issue their products in that order, so one's
//     exponentials overlap the other's products), each holding every row of the tile: per tile,
//     Q·Kᵀ as wgmma m64n128k16 per 64-row
//     m-tile of 64 rows (with 2 m-tiles, the second issued before the first is pooled),
//     p = 2^(s·scale_log2 − lse·log2e) (+0 for absent rows), then
//     the column reduction: a thread's two rows and m-tiles, the 8 row groups of the warp by a
//     butterfly reduce-scatter (store_warp_columns), the 4 warps of the warpgroup in a fixed order through shared memory (one
//     warpgroup named barrier per tile, double-buffered). So a score is the same bits whatever the
//     unit, CTA or chunking (not the same bits as the mma.sync kernel: another summation order).
// Only TMA-eligible K layouts run here (ws_tma_eligible); others use pooled_scores_kernels.cu.
// Bad device data: as resolve_slot / the dense producer (error bits; the unit skipped or the key
// zero-filled).
// Tested by tests/cuda/test_prefill_select.cpp (warp-specialised variants, against
// ref::pooled_scores_prefill_tile_ref) and test_prefill_anchor.cpp.
#include <cuda_runtime.h>

#include "cuda/common/kernel_attributes.cuh"
#include "cuda/prefill/pooled_columns.cuh"
#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/ws_attention_kernel.cuh"

namespace kascade::cuda::prefill {
namespace {

// 64-row m-tiles of a unit for T·g rows per tile (1, 2 or 4: T·g <= 256). Every m-tile is computed
// (a conditional wgmma makes ptxas serialise them), so the host picks the fewest that hold the rows.
inline int ws_pool_m_tiles(int rows_per_tile) { return rows_per_tile <= 64 ? 1 : rows_per_tile <= 128 ? 2 : 4; }

// Shared memory: Q [kMTiles·64][D], K ring [kStages][128][D], the column partials
// [2 warpgroups][2 buffers][4 warps][128] fp32, then q_full, q_empty, k_full[S], k_empty[S], and
// 128 bytes per consumer warp for its scheduling pins.
template <int D, int kMTiles>
struct WsPoolSmem {
  static constexpr int kRows = kMTiles * 64;
  static constexpr int kStages = D == 128 ? 4 : 6;
  static constexpr size_t kTileBytes = size_t(kWsBlockKeys) * D * 2;
  static constexpr size_t kKOffset = size_t(kRows) * D * 2;
  static constexpr size_t kReduceOffset = kKOffset + kStages * kTileBytes;
  static constexpr size_t kReduceFloats = size_t(kWsConsumerGroups) * 2 * 4 * kWsBlockKeys;
  static constexpr size_t kBarrierOffset = kReduceOffset + kReduceFloats * sizeof(float);
  // The consumers' scheduling pins (ws::pin_before_wait): a thread's column partials, 128 bytes per warp.
  static constexpr size_t kPinOffset = (kBarrierOffset + (2 + 2 * size_t(kStages)) * 8 + 15) / 16 * 16;
  static constexpr size_t kPinBytes = size_t(kWsConsumerGroups) * 4 * 128;
  static constexpr size_t kUsed = kPinOffset + kPinBytes + kSmemAlignSlack;
  static constexpr size_t kBytes = kUsed > size_t{120} << 10 ? kUsed : size_t{120} << 10;
  static_assert(kUsed <= 227 * 1024, "shared memory per block");
};

#ifdef KASCADE_PREFILL_HAS_WGMMA

constexpr uint32_t kPoolReduceBarrier0 = 4;  // named barriers of consumer warpgroups 0 and 1

// One unit: key tiles [tile0, tile1) of (wave slot, group), or invalid (nothing to select / bad data).
struct PoolUnit {
  bool valid = false;
  int slot = 0, group = 0, b = 0;
  int n = 0;  // candidates j < s_t
  int tile0 = 0, tile1 = 0;
  int rows_total = 0, qidx_base = 0, head0 = 0;
};

__device__ __forceinline__ PoolUnit decode_pool_unit(const PoolArgs& a, int u) {
  const CallArgs& c = a.call;
  const RowArgs& r = a.rows;
  PoolUnit w;
  const WsPoolUnitCoords at = ws_pool_unit_coords(u, a.wave_slots, c.num_kv_heads);
  w.slot = at.slot;
  w.group = at.group;
  const int chunk = at.chunk;
  SlotTile st;
  if (!resolve_slot(c, r, a.wave_base + w.slot, st)) return w;
  const TileQueries tq = tile_queries(st.seq, st.tile, r.tile_size);
  w.n = tq.start;
  const int pooled_row = w.group / (c.num_kv_heads / a.pool_rows);
  const int64_t row = static_cast<int64_t>(a.wave_base + w.slot) * r.num_rows + pooled_row;
  const int64_t k_t = r.row_offsets[row + 1] - r.row_offsets[row];
  if (k_t <= 0 || k_t >= w.n) return w;  // nothing to select (the Top-k kernel reports bad lengths)
  const int blocks = (w.n + kWsBlockKeys - 1) / kWsBlockKeys;
  w.tile0 = chunk * kWsPoolChunkTiles;
  if (w.tile0 >= blocks) return w;
  w.tile1 = min(blocks, w.tile0 + kWsPoolChunkTiles);
  w.b = st.b;
  w.rows_total = tq.count * c.group_size;
  w.qidx_base = st.seq.q_start + (tq.lo - st.seq.first_pos);
  w.head0 = w.group * c.group_size;
  w.valid = true;
  return w;
}

template <typename T, int D, int kMTiles>
struct PoolProducer {
  using Smem = WsPoolSmem<D, kMTiles>;
  static constexpr int kRows = Smem::kRows;
  ws::Producer<T, D, /*kPV=*/false, /*kTma=*/true> loader;  // acquire / publish / load_kv of the dense kernel

  __device__ __forceinline__ uint32_t barrier(int i) const {
    return loader.smem_base + static_cast<uint32_t>(Smem::kBarrierOffset) + 8u * i;
  }

  __device__ void run(const PoolArgs& args, int num_units) {
    constexpr int S = Smem::kStages;
    const CallArgs& c = args.call;
    const T* q = static_cast<const T*>(c.q);
    const T* k_base = static_cast<const T*>(c.k);
    const int tid = loader.tid;
    int units_done = 0, k_count = 0;
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const PoolUnit w = decode_pool_unit(args, u);
      if (!w.valid) continue;
      loader.acquire(barrier(1), static_cast<uint32_t>(units_done & 1) ^ 1u);
      for (int rr = tid; rr < kRows; rr += 128) {
        int64_t offset = -1;
        if (rr < w.rows_total) {
          offset = (static_cast<int64_t>(w.qidx_base + rr / c.group_size) * c.num_heads + w.head0 + rr % c.group_size) * D;
        }
#pragma unroll
        for (int ch = 0; ch < D / 8; ++ch) {
          const uint32_t to = loader.smem_base + 2u * swizzle<D, kRows>(rr, ch);
          cp_async_16(to, offset >= 0 ? q + offset + ch * 8 : q, offset >= 0 ? 16 : 0);
        }
      }
      cp_async_commit();
      loader.publish_all_but_last(barrier(0));
      ++units_done;
      ws::WsUnit keys;  // the fields load_kv reads: sequence, KV head, key count
      keys.b = w.b;
      keys.kv_head = w.group;
      keys.num_keys = w.n;
      for (int t = w.tile0; t < w.tile1; ++t) {
        const ws::RingSlot ks = ws::ring_slot<S>(k_count++);
        loader.acquire(barrier(2 + S + ks.index), ks.parity ^ 1u);
        loader.load_kv(keys, t, k_base, &loader.maps.k,
                       loader.smem_base + static_cast<uint32_t>(Smem::kKOffset + ks.index * Smem::kTileBytes),
                       barrier(2 + ks.index));
      }
    }
    loader.publish_all();
  }
};

template <typename T, int D, int kMTiles>
struct PoolConsumer {
  using Smem = WsPoolSmem<D, kMTiles>;
  static constexpr int kRows = Smem::kRows;
  static constexpr int kKeyTiles = kWsBlockKeys / 8;

  const PoolArgs& args;
  uint32_t smem_base;
  float* reduce;  // this warpgroup's [2][4][128] partials
  int wg, warp, gid, tig, tid_wg;

  __device__ __forceinline__ uint32_t barrier(int i) const {
    return smem_base + static_cast<uint32_t>(Smem::kBarrierOffset) + 8u * i;
  }

  // Column partials of the warpgroup → scores[j] for the tile's keys j < n (fixed order: warps 0..3).
  template <bool kMax>
  __device__ __forceinline__ void reduce_columns(float (&col)[kKeyTiles][2], int buffer, int key0, int n,
                                                 float* out) const {
    float* part = reduce + buffer * 4 * kWsBlockKeys;
    store_warp_columns<kMax>(col, gid, tig, part + warp * kWsBlockKeys);
    // The other buffer was read before this barrier's previous phase: double buffering needs one barrier.
    ws::named_barrier_sync(kPoolReduceBarrier0 + wg, 128);
    const int j = key0 + tid_wg;
    if (j < n) out[j] = combine_warp_columns<kMax, 4>(part, kWsBlockKeys, tid_wg);
  }

  template <bool kMax>
  __device__ void run(int num_units) {
    constexpr int S = Smem::kStages;
    const CallArgs& c = args.call;
    const uint32_t q_tile = smem_base;
    int units_done = 0, k_count = 0, buffer = 0;
    if (wg == 1) turn_end();  // warpgroup 0 issues the first tile
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const PoolUnit w = decode_pool_unit(args, u);
      if (!w.valid) continue;
      float lse2[kMTiles][2];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int rr = mt * 64 + warp * 16 + gid + 8 * h;
          lse2[mt][h] = rr < w.rows_total ? args.lse[static_cast<int64_t>(w.qidx_base + rr / c.group_size) * c.num_heads +
                                                     w.head0 + rr % c.group_size] *
                                                kLog2e
                                          : INFINITY;
        }
      }
      float* const out = args.scores + (static_cast<int64_t>(w.slot) * c.num_kv_heads + w.group) * args.score_stride;
      mbarrier_wait_q(units_done);
      ++units_done;
      for (int t = w.tile0; t < w.tile1; ++t) {
        const int count = k_count++;
        if ((count & 1) != wg) continue;  // the other warpgroup's tile
        const ws::RingSlot ks = ws::ring_slot<S>(count);
        ws::mbarrier_wait(barrier(2 + ks.index), ks.parity);
        const uint32_t k_tile = smem_base + static_cast<uint32_t>(Smem::kKOffset + ks.index * Smem::kTileBytes);
        float col[kKeyTiles][2];
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) col[nt][0] = col[nt][1] = 0.0f;
        // Every m-tile (rows past rows_total pool 0). Up to 2 m-tiles: Q·Kᵀ of m-tile 1 runs while
        // m-tile 0 is pooled (two accumulator sets). 4 m-tiles (T·g > 128): one set, issued and
        // waited per m-tile (two sets spill), the other warpgroup's tile overlapping.
        float sa[kKeyTiles][4];
        if constexpr (kMTiles <= 2) {
          float sb[kKeyTiles][4];
          turn_begin();
          ws::issue_qk<T, D, kRows>(q_tile, 0, k_tile, sa);
          if constexpr (kMTiles == 2) ws::issue_qk<T, D, kRows>(q_tile, 64, k_tile, sb);
          turn_end();
          if constexpr (kMTiles == 2) {
            ws::wgmma_wait<1>();  // m-tile 0 done; m-tile 1 may still run
          } else {
            ws::wgmma_wait<0>();
          }
          fence_accumulators(sa);
          accumulate_columns<kMax>(sa, c.scale_log2, lse2[0], col);
          if constexpr (kMTiles == 2) {
            // m-tile 0's exponentials before the wait for m-tile 1's product, which they overlap
            // (ptxas 13.0 otherwise sinks most of them past the wait).
            float partials[2 * kKeyTiles];
#pragma unroll
            for (int i = 0; i < 2 * kKeyTiles; ++i) partials[i] = col[i / 2][i % 2];
            ws::pin_before_wait(smem_base + static_cast<uint32_t>(Smem::kPinOffset) + 128u * (wg * 4 + warp), partials,
                                gid == 0 && tig == 0);
            ws::wgmma_wait<0>();
            fence_accumulators(sb);
            accumulate_columns<kMax>(sb, c.scale_log2, lse2[1], col);
          }
        } else {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            if (mt == 0) turn_begin();
            ws::issue_qk<T, D, kRows>(q_tile, mt * 64, k_tile, sa);
            if (mt == 0) turn_end();
            ws::wgmma_wait<0>();
            fence_accumulators(sa);
            accumulate_columns<kMax>(sa, c.scale_log2, lse2[mt], col);
          }
        }
        ws::mbarrier_arrive(barrier(2 + S + ks.index));  // K slot free (this warpgroup alone read it)
        reduce_columns<kMax>(col, buffer, t * kWsBlockKeys, w.n, out);
        buffer ^= 1;
      }
      ws::mbarrier_arrive(barrier(1));  // Q free (after this warpgroup's last Q·Kᵀ of the unit)
    }
  }

  // Ping-pong (as the dense kernel's consumers): the warpgroups take the key tiles in turns, and
  // each issues its Q·Kᵀ only after the other has issued the previous tile's, so the tensor cores
  // run one warpgroup's products while the other computes its exponentials and column sums.
  // Without the turns both warpgroups fell into step — both multiplying, then both waiting on the
  // exponential unit — and each unit was busy ~35 % of the time (Nsight Compute, 2026-12-03).
  __device__ __forceinline__ void turn_begin() const {
    ws::named_barrier_sync(ws::kPingPongBarrier0 + wg, ws::kConsumerThreads);
  }
  __device__ __forceinline__ void turn_end() const {
    ws::named_barrier_arrive(ws::kPingPongBarrier0 + (wg ^ 1), ws::kConsumerThreads);
  }

  __device__ __forceinline__ void mbarrier_wait_q(int units_done) const {
    ws::mbarrier_wait(barrier(0), static_cast<uint32_t>(units_done & 1));
  }
};

#endif  // KASCADE_PREFILL_HAS_WGMMA

template <typename T, int D, int kMTiles>
__global__ void __launch_bounds__(kWsThreads, 1)
    ws_pooled_scores_kernel(const PoolArgs args, const __grid_constant__ WsKvMaps maps) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  using Smem = WsPoolSmem<D, kMTiles>;
  constexpr int S = Smem::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = align_smem(smem_raw);
  const uint32_t smem_base = smem_address(smem);
  const int num_units = args.wave_slots * args.call.num_kv_heads * args.key_chunks;

  if (threadIdx.x == 0) {
    const uint32_t bars = smem_base + static_cast<uint32_t>(Smem::kBarrierOffset);
    ws::mbarrier_init(bars + 0, 128);                    // q_full: the producer's threads
    ws::mbarrier_init(bars + 8, ws::kConsumerThreads);   // q_empty: every consumer thread
    for (int i = 0; i < S; ++i) {
      ws::mbarrier_init(bars + 8u * (2 + i), 1);          // k_full: one arrival (+ TMA bytes)
      ws::mbarrier_init(bars + 8u * (2 + S + i), 128);    // k_empty: the warpgroup that read the tile
    }
  }
  __syncthreads();

  const int warpgroup = ws::warpgroup_index();
  if (warpgroup == 0) {
    ws::release_registers<ws::kProducerRegs>();
    PoolProducer<T, D, kMTiles> producer{{args.call, maps, smem_base, static_cast<int>(threadIdx.x)}};
    producer.run(args, num_units);
  } else {
    ws::claim_registers<ws::kConsumerRegs>();
    const int wg = warpgroup - 1;
    const int lane = threadIdx.x % 32;
    float* const reduce = reinterpret_cast<float*>(smem + Smem::kReduceOffset) + wg * 2 * 4 * kWsBlockKeys;
    PoolConsumer<T, D, kMTiles> consumer{args, smem_base, reduce, wg, static_cast<int>(threadIdx.x / 32) % 4, lane >> 2,
                                lane & 3, static_cast<int>(threadIdx.x % 128)};
    if (args.reduce_max != 0) {
      consumer.template run<true>(num_units);
    } else {
      consumer.template run<false>(num_units);
    }
  }
#else
  (void)args;
  (void)maps;
  __trap();  // the host never launches this kernel without sm_90a code (prepare_ws_pooled_scores)
#endif
}

template <int kMTiles, typename Fn>
cudaError_t dispatch_ws_pool_type_dim(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(ws_pooled_scores_kernel<__half, 64, kMTiles>, WsPoolSmem<64, kMTiles>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(ws_pooled_scores_kernel<__half, 128, kMTiles>, WsPoolSmem<128, kMTiles>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(ws_pooled_scores_kernel<__nv_bfloat16, 64, kMTiles>, WsPoolSmem<64, kMTiles>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(ws_pooled_scores_kernel<__nv_bfloat16, 128, kMTiles>, WsPoolSmem<128, kMTiles>::kBytes);
  return cudaErrorInvalidValue;
}

template <typename Fn>
cudaError_t dispatch_ws_pool(ElementType type, int head_dim, int m_tiles, Fn&& fn) {
  switch (m_tiles) {
    case 1:
      return dispatch_ws_pool_type_dim<1>(type, head_dim, fn);
    case 2:
      return dispatch_ws_pool_type_dim<2>(type, head_dim, fn);
    case 4:
      return dispatch_ws_pool_type_dim<4>(type, head_dim, fn);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_ws_pooled_scores(ElementType type, int head_dim, const PoolArgs& args, const WsKvMaps& maps,
                                    int ctas, cudaStream_t stream) {
  if (ctas < 1 || args.wave_slots < 1 || args.key_chunks < 1) return cudaErrorInvalidValue;
  const int rows_per_tile = args.rows.tile_size * args.call.group_size;
  if (rows_per_tile > kMaxPoolRows) return cudaErrorInvalidValue;
  return dispatch_ws_pool(type, head_dim, ws_pool_m_tiles(rows_per_tile), [&](auto kernel, size_t smem_bytes) {
    kernel<<<dim3(static_cast<unsigned>(ctas)), kWsThreads, smem_bytes, stream>>>(args, maps);
    return cudaGetLastError();
  });
}

cudaError_t prepare_ws_pooled_scores(ElementType type, int head_dim) {
  for (const int m_tiles : {1, 2, 4}) {
    const cudaError_t error = dispatch_ws_pool(type, head_dim, m_tiles, [&](auto kernel, size_t smem_bytes) {
      return detail::allow_dynamic_smem(kernel, smem_bytes, /*require_sm90a=*/true);
    });
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace kascade::cuda::prefill
