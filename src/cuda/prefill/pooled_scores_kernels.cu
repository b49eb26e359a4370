// src/cuda/prefill/pooled_scores_kernels.cu — the anchor's aggregation pass (DESIGN.md §2.3):
// for each tile slot of a wave and KV group g, the pooled post-softmax scores of the tile's
// candidates j < s_t,
//   scores[slot - wave_base][g][j] = Σ (or max) over rows (query i of the tile in the call, head h
//                                    of group g) of 2^(σ·log2e · q_{i,h}·k_{g,j} − lse_{i,h}·log2e).
// One CTA = (key range, slot, group) holds all rows of the tile (T·g <= 256: 8 warps × 1 or 2
// m16 tiles) and streams K tiles of 64 keys (cp.async, 3 stages, swizzled shared memory; no V);
// Q·Kᵀ on mma.sync with Q fragments in registers, or (kWgmma, sm_90a) on warpgroup MMAs reading Q
// and K from shared memory. Column reductions: the two rows of a thread, then the 8 row groups
// of the warp by butterfly shuffles, then the 8 warps in a fixed order through shared memory, so a
// score is the same bits whatever the key split or the call's chunking. Tiles whose pooled row needs
// no selection (k_t = 0 or k_t = s_t) are skipped. Scores go to the wave's scratch only: memory is
// tiles_in_flight × G × n floats, never the O(n²/T) matrix.
// Tested by tests/cuda/test_prefill_select.cpp (against ref::pooled_scores_prefill_tile_ref).
#include <cuda_runtime.h>

#include "cuda/common/kernel_attributes.cuh"
#include "cuda/prefill/pooled_columns.cuh"
#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_launch.h"

namespace kascade::cuda::prefill {
namespace {

template <int D, int kMTiles>
struct PoolSmem {
  static constexpr int kStages = 3;
  static constexpr int kTileElems = kBlockKeys * D;
  static constexpr size_t kQBytes = size_t(kMTiles) * kBlockRows * D * 2;
  static constexpr size_t kKOffset = kQBytes;
  static constexpr size_t kReduceOffset = kKOffset + size_t(kStages) * kTileElems * 2;
  static constexpr size_t kBytes = kReduceOffset + size_t(kWarps) * kBlockKeys * sizeof(float) + kSmemAlignSlack;
};

template <typename T, int D, int kMTiles, bool kMax, bool kWgmma>
__global__ void __launch_bounds__(kThreads, 1) pooled_scores_kernel(const PoolArgs args) {
  using Smem = PoolSmem<D, kMTiles>;
  constexpr int kStages = Smem::kStages;
  constexpr int kChunks = D / 8;
  constexpr int kKeyTiles = kBlockKeys / 8;
  constexpr int kRowsCapacity = kMTiles * kBlockRows;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = align_smem(smem_raw);
  T* const q_tile = reinterpret_cast<T*>(smem);
  T* const k_tiles = reinterpret_cast<T*>(smem + Smem::kKOffset);
  float* const reduce = reinterpret_cast<float*>(smem + Smem::kReduceOffset);  // [kWarps][kBlockKeys]

  const CallArgs& c = args.call;
  const RowArgs& r = args.rows;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int wave_slot = blockIdx.y;
  const int group = blockIdx.z;

  SlotTile st;
  if (!resolve_slot(c, r, args.wave_base + wave_slot, st)) return;
  const TileQueries tq = tile_queries(st.seq, st.tile, r.tile_size);
  const int n = tq.start;  // candidates j < s_t
  const int pooled_row = group / (c.num_kv_heads / args.pool_rows);
  const int64_t row = static_cast<int64_t>(args.wave_base + wave_slot) * r.num_rows + pooled_row;
  const int64_t k_t = r.row_offsets[row + 1] - r.row_offsets[row];
  if (k_t <= 0 || k_t >= n) return;  // nothing to select (the Top-k kernel reports bad lengths)

  const int num_blocks = (n + kBlockKeys - 1) / kBlockKeys;
  const int per_split = (num_blocks + gridDim.x - 1) / gridDim.x;
  const int kb_begin = blockIdx.x * per_split;
  const int kb_end = min(num_blocks, kb_begin + per_split);
  if (kb_begin >= kb_end) return;

  const int g = c.group_size;
  const int rows_total = tq.count * g;  // <= kRowsCapacity (checked on the host: T·g)
  const int qidx_base = st.seq.q_start + (tq.lo - st.seq.first_pos);
  const int head0 = group * g;

  // ---- Q tile of the tile's rows; lse (log2 domain) of this thread's rows, +inf for absent rows
  {
    const T* q = static_cast<const T*>(c.q);
    for (int idx = tid; idx < kRowsCapacity * kChunks; idx += kThreads) {
      const int rr = idx / kChunks, ch = idx % kChunks;
      int64_t offset = -1;
      if (rr < rows_total) {
        offset = (static_cast<int64_t>(qidx_base + rr / g) * c.num_heads + head0 + rr % g) * D + ch * 8;
      }
      copy_chunk(q_tile + swizzle<D, kRowsCapacity>(rr, ch), q, offset);
    }
    cp_async_commit();
  }
  float lse2[kMTiles][2];
  bool mtile_active[kMTiles];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    // a warp (mma.sync) or a warpgroup (wgmma) with no valid row of the m-tile skips it
    mtile_active[mt] = mt * kBlockRows + (kWgmma ? (warp >> 2) * 64 : warp * 16) < rows_total;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = mt * kBlockRows + warp * 16 + gid + 8 * h;
      lse2[mt][h] = rr < rows_total
                        ? args.lse[static_cast<int64_t>(qidx_base + rr / g) * c.num_heads + head0 + rr % g] * kLog2e
                        : INFINITY;
    }
  }

  const T* const k_base = static_cast<const T*>(c.k);
  auto load_block = [&](int kb) {
    T* k_dst = k_tiles + (kb % kStages) * Smem::kTileElems;
    for (int idx = tid; idx < kBlockKeys * kChunks; idx += kThreads) {
      const int rr = idx / kChunks, ch = idx % kChunks;
      const int j = kb * kBlockKeys + rr;
      const int64_t key_row = j < n ? kv_row_offset<D>(c, st.b, j, group) : -1;
      copy_chunk(k_dst + swizzle<D, kBlockKeys>(rr, ch), k_base, key_row >= 0 ? key_row + ch * 8 : -1);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (kb_begin + s < kb_end) load_block(kb_begin + s);
    cp_async_commit();
  }

  cp_async_wait<kStages - 1>();  // the Q group
  if constexpr (kWgmma) publish_to_async_proxy();
  __syncthreads();
  uint32_t qa[kMTiles][D / 16][4];
  if constexpr (!kWgmma) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      load_q_fragments<D, kRowsCapacity>(smem_address(q_tile), mt * kBlockRows + warp * 16, lane, qa[mt]);
    }
  }

  float* const out = args.scores + (static_cast<int64_t>(wave_slot) * c.num_kv_heads + group) * args.score_stride;
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    cp_async_wait<kStages - 2>();
    if constexpr (kWgmma) publish_to_async_proxy();
    __syncthreads();  // tile kb landed; tile kb - 1 and the previous reduction are consumed
    if (kb + kStages - 1 < kb_end) load_block(kb + kStages - 1);
    cp_async_commit();

    const uint32_t k_tile = smem_address(k_tiles + (kb % kStages) * Smem::kTileElems);
    float col[kKeyTiles][2];
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) col[nt][0] = col[nt][1] = 0.0f;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      if (!mtile_active[mt]) continue;
      float s[kKeyTiles][4];
      if constexpr (kWgmma) {
        warpgroup_qk<T, D, kRowsCapacity>(smem_address(q_tile), mt * kBlockRows + (warp >> 2) * 64, k_tile, s);
      } else {
        warp_qk<T, D>(qa[mt], k_tile, lane, s);
      }
      accumulate_columns<kMax>(s, c.scale_log2, lse2[mt], col);
    }
    // reduce over the 8 row groups of the warp (lanes with equal tig), then write one row per warp
    store_warp_columns<kMax>(col, gid, tig, reduce + warp * kBlockKeys);
    __syncthreads();
    if (tid < kBlockKeys) {
      const int j = kb * kBlockKeys + tid;
      const float v = combine_warp_columns<kMax, kWarps>(reduce, kBlockKeys, tid);
      if (j < n) out[j] = v;
    }
  }
  cp_async_wait<0>();
}

template <int kMTiles, bool kMax, bool kWgmma, typename Fn>
cudaError_t dispatch_type_dim(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(pooled_scores_kernel<__half, 64, kMTiles, kMax, kWgmma>, PoolSmem<64, kMTiles>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(pooled_scores_kernel<__half, 128, kMTiles, kMax, kWgmma>, PoolSmem<128, kMTiles>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(pooled_scores_kernel<__nv_bfloat16, 64, kMTiles, kMax, kWgmma>, PoolSmem<64, kMTiles>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(pooled_scores_kernel<__nv_bfloat16, 128, kMTiles, kMax, kWgmma>, PoolSmem<128, kMTiles>::kBytes);
  return cudaErrorInvalidValue;
}

template <int kMTiles, bool kWgmma, typename Fn>
cudaError_t dispatch_reduce(ElementType type, int head_dim, bool reduce_max, Fn&& fn) {
  return reduce_max ? dispatch_type_dim<kMTiles, true, kWgmma>(type, head_dim, fn)
                    : dispatch_type_dim<kMTiles, false, kWgmma>(type, head_dim, fn);
}

template <typename Fn>
cudaError_t dispatch_pool_kernel(ElementType type, int head_dim, int m_tiles, bool reduce_max, bool wgmma, Fn&& fn) {
  if (m_tiles == 1) {
    return wgmma ? dispatch_reduce<1, true>(type, head_dim, reduce_max, fn)
                 : dispatch_reduce<1, false>(type, head_dim, reduce_max, fn);
  }
  if (m_tiles == 2) {
    return wgmma ? dispatch_reduce<2, true>(type, head_dim, reduce_max, fn)
                 : dispatch_reduce<2, false>(type, head_dim, reduce_max, fn);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_pooled_scores(ElementType type, int head_dim, int m_tiles, bool wgmma, const PoolArgs& args,
                                 dim3 grid, cudaStream_t stream) {
  return dispatch_pool_kernel(type, head_dim, m_tiles, args.reduce_max != 0, wgmma,
                              [&](auto kernel, size_t smem_bytes) {
                                kernel<<<grid, kThreads, smem_bytes, stream>>>(args);
                                return cudaGetLastError();
                              });
}

cudaError_t prepare_pooled_scores(ElementType type, int head_dim, int m_tiles, bool wgmma, int* ctas_per_sm) {
  for (const bool reduce_max : {false, true}) {
    const cudaError_t error =
        dispatch_pool_kernel(type, head_dim, m_tiles, reduce_max, wgmma, [&](auto kernel, size_t bytes) {
          const cudaError_t e = detail::allow_dynamic_smem(kernel, bytes, /*require_sm90a=*/wgmma);
          if (e != cudaSuccess || reduce_max) return e;
          return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, kThreads, bytes);
        });
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace kascade::cuda::prefill
