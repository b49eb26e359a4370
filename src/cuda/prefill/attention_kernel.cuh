// src/cuda/prefill/attention_kernel.cuh — the prefill attention kernel (FlashAttention-2 style,
// m16n8k16 tensor-core MMAs) behind dense causal prefill, the anchor LSE pass and sparse (reuse)
// prefill over compact index rows.
//
// A CTA of 8 warps owns up to 128 rows, a row being one (query, query head) pair; all rows read one
// KV head and are ordered query-major (row = query · nh + head), so the g heads of a GQA group
// share every K/V tile. Each warp owns 16 rows: Q fragments stay in registers, S = Q·Kᵀ and
// O += P·V run on the tensor cores with fp32 accumulators, and the online softmax works in the
// exp2 domain on the accumulators (per row: running max m, partial sum l, rescale by 2^(m_old−m)).
// K/V tiles of 64 keys travel by 16-byte cp.async into XOR-swizzled shared memory, kStages deep;
// keys outside the list are zero-filled and masked, so no NaN from unread memory reaches the sums.
//
// Key lists:
//   dense (kSparse = false): keys 0 .. the CTA's last position; row r sees key j iff j <= pos(r).
//     Tiles wholly at or below the CTA's first position skip the mask. Key tiles start at 0 in
//     steps of 64 whatever the CTA's rows are, and a tile that is masked for a row leaves that row's
//     state bit-for-bit unchanged, so a row's result does not depend on how the call is chunked.
//   sparse (kSparse = true): the CTA covers the call's queries of one tile t (or a 128-row block of
//     them) and one row consumer; keys = the row's entries (any order), then with include_local the
//     local keys s_t .. the CTA's last position; row r sees key j iff j <= pos(r) (entries of an
//     include_local row are < s_t and always visible). A row left with no key writes o = 0,
//     lse = -inf.
// kPV = false computes the LSE only (the anchor's first pass): no V tiles, no O accumulators.
// kWgmma = true (sm_90a builds, sm_90 devices) runs both products per warpgroup on wgmma: Q·Kᵀ with Q
// and K read from shared memory (Q is not held in registers), P·V with P from registers and V read
// from shared memory as an MN-major operand. Same rows per thread, same results up to the MMA's
// accumulation order.
// Bad device data (lengths past the plan, page ids, row lengths, entries, head_map) sets an error
// bit; the CTA skips the unit (outputs unwritten) or masks the key.
// Tested by tests/cuda/test_prefill_dense.cpp, test_prefill_sparse.cpp, test_prefill_anchor.cpp.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_params.h"

namespace kascade::cuda::prefill {

template <int D, bool kPV>
struct AttentionSmem {
  static constexpr int kStages = kPV ? 2 : 3;
  static constexpr int kTileElems = kBlockKeys * D;
  static constexpr size_t kQBytes = size_t(kBlockRows) * D * 2;
  static constexpr size_t kKOffset = kQBytes;
  static constexpr size_t kVOffset = kKOffset + size_t(kStages) * kTileElems * 2;
  static constexpr size_t kPosOffset = kVOffset + (kPV ? size_t(kStages) * kTileElems * 2 : 0);
  static constexpr size_t kBytes = kPosOffset + size_t(kStages) * kBlockKeys * sizeof(int) + kSmemAlignSlack;
};

template <typename T, int D, bool kPV, bool kSparse, bool kWgmma>
__global__ void __launch_bounds__(kThreads, 1) prefill_attention_kernel(const AttentionArgs args) {
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  using Smem = AttentionSmem<D, kPV>;
  using Mma = Mma16<T>;
  constexpr int kStages = Smem::kStages;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kKeyTiles = kBlockKeys / 8;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = align_smem(smem_raw);
  T* const q_tile = reinterpret_cast<T*>(smem);
  T* const k_tiles = reinterpret_cast<T*>(smem + Smem::kKOffset);
  T* const v_tiles = reinterpret_cast<T*>(smem + Smem::kVOffset);
  int* const key_pos = reinterpret_cast<int*>(smem + Smem::kPosOffset);  // [kStages][kBlockKeys]

  const CallArgs& c = args.call;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int b = blockIdx.z;
  const int consumer = blockIdx.y;
  const int unit = gridDim.x - 1 - blockIdx.x;  // longest key lists first

  Sequence seq;
  if (!load_sequence(c, b, seq)) return;

  // ---- the CTA's rows and key list
  int kv_head, head0, nh;  // rows read KV head kv_head; row r holds query head head0 + r % nh
  int row0, rows_total;    // the CTA's rows are [row0, row0 + 128) of rows_total
  int pos_base, qidx_base; // query r / nh of the unit: position pos_base + ., packed index qidx_base + .
  int num_keys;
  const int32_t* row_entries = nullptr;
  int row_len = 0, entry_bound = 0, local_start = 0;
  if constexpr (!kSparse) {
    kv_head = consumer;
    head0 = consumer * c.group_size;
    nh = c.group_size;
    rows_total = seq.q_len * nh;
    row0 = unit * kBlockRows;
    if (row0 >= rows_total) return;
    pos_base = seq.first_pos;
    qidx_base = seq.q_start;
    num_keys = pos_base + (min(row0 + kBlockRows, rows_total) - 1) / nh + 1;
  } else {
    const RowArgs& r = args.rows;
    const int tile_in_call = unit / args.row_blocks_per_tile;
    const int block_in_tile = unit % args.row_blocks_per_tile;
    const CallTiles tiles = call_tiles(seq, r.tile_size);
    if (tile_in_call >= tiles.count) return;
    if (r.tile_base[b + 1] - r.tile_base[b] != tiles.count) {
      if (tid == 0) report_error(c, kPrefillErrorTileBase);
      return;
    }
    const TileQueries tq = tile_queries(seq, tiles.first + tile_in_call, r.tile_size);
    int row_id;
    if (r.per_query_head) {
      head0 = consumer;
      nh = 1;
      kv_head = consumer / c.group_size;
      row_id = consumer;
    } else {
      kv_head = consumer;
      head0 = consumer * c.group_size;
      nh = c.group_size;
      row_id = r.head_map ? r.head_map[consumer] : consumer;
    }
    if (row_id < 0 || row_id >= r.num_rows) {
      if (tid == 0) report_error(c, kErrorHeadMap);
      return;
    }
    rows_total = tq.count * nh;
    row0 = block_in_tile * kBlockRows;
    if (row0 >= rows_total) return;
    pos_base = tq.lo;
    qidx_base = seq.q_start + (tq.lo - seq.first_pos);
    const int64_t row = static_cast<int64_t>(r.tile_base[b] + tile_in_call) * r.num_rows + row_id;
    const int64_t begin = r.row_offsets[row];
    const int64_t length = r.row_offsets[row + 1] - begin;
    entry_bound = r.include_local ? tq.start : min(tq.start + r.tile_size, seq.kv_len);
    if (begin < 0 || length < 0 || length > entry_bound) {
      if (tid == 0) report_error(c, kErrorRowLen);
      return;
    }
    row_entries = r.indices + begin;
    row_len = static_cast<int>(length);
    local_start = tq.start;
    const int last_pos = pos_base + (min(row0 + kBlockRows, rows_total) - 1) / nh;
    num_keys = row_len + (r.include_local ? last_pos - tq.start + 1 : 0);
  }
  const int first_row_pos = pos_base + row0 / nh;
  const int num_blocks = (num_keys + kBlockKeys - 1) / kBlockKeys;

  // ---- Q tile (rows past rows_total are zero)
  {
    const T* q = static_cast<const T*>(c.q);
    for (int idx = tid; idx < kBlockRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, ch = idx % kChunks;
      const int row = row0 + r;
      int64_t offset = -1;
      if (row < rows_total) {
        offset = (static_cast<int64_t>(qidx_base + row / nh) * c.num_heads + head0 + row % nh) * D + ch * 8;
      }
      copy_chunk(q_tile + swizzle<D, kBlockRows>(r, ch), q, offset);
    }
    cp_async_commit();
  }

  // Position of entry i of the key list; -1 when outside the list or invalid.
  auto key_position = [&](int i) -> int {
    if (i >= num_keys) return -1;
    if constexpr (!kSparse) {
      return i;
    } else {
      if (i >= row_len) return local_start + (i - row_len);
      const int j = row_entries[i];
      if (j < 0 || j >= entry_bound) {
        report_error(c, kErrorIndex);
        return -1;
      }
      return j;
    }
  };
  const T* const k_base = static_cast<const T*>(c.k);
  const T* const v_base = static_cast<const T*>(c.v);
  auto load_block = [&](int kb) {
    const int stage = kb % kStages;
    T* k_dst = k_tiles + stage * Smem::kTileElems;
    T* v_dst = v_tiles + stage * Smem::kTileElems;
    for (int idx = tid; idx < kBlockKeys * kChunks; idx += kThreads) {
      const int r = idx / kChunks, ch = idx % kChunks;
      const int pos = key_position(kb * kBlockKeys + r);
      const int64_t row = pos >= 0 ? kv_row_offset<D>(c, b, pos, kv_head) : -1;
      if constexpr (kSparse) {
        if (ch == 0) key_pos[stage * kBlockKeys + r] = row >= 0 ? pos : INT_MAX;
      }
      const int64_t offset = row >= 0 ? row + ch * 8 : -1;
      copy_chunk(k_dst + swizzle<D, kBlockKeys>(r, ch), k_base, offset);
      if constexpr (kPV) copy_chunk(v_dst + swizzle<D, kBlockKeys>(r, ch), v_base, offset);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_blocks) load_block(s);
    cp_async_commit();
  }

  // ---- this thread's two rows: warp*16 + gid (h = 0) and + 8 (h = 1)
  int row_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + warp * 16 + gid + 8 * h;
    row_pos[h] = row < rows_total ? pos_base + row / nh : -1;
  }
  // A warp (mma.sync) or a warpgroup (wgmma) with no valid row skips the math.
  const bool active = kWgmma ? row0 + (warp >> 2) * 64 < rows_total : row0 + warp * 16 < rows_total;

  cp_async_wait<kStages - 1>();  // the Q group
  if constexpr (kWgmma) publish_to_async_proxy();
  __syncthreads();
  uint32_t qa[D / 16][4];
  if constexpr (!kWgmma) load_q_fragments<D, kBlockRows>(smem_address(q_tile), warp * 16, lane, qa);

  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.0f, 0.0f};
  float o_acc[kPV ? D / 8 : 1][4];
#pragma unroll
  for (int i = 0; i < (kPV ? D / 8 : 1); ++i) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;

  for (int kb = 0; kb < num_blocks; ++kb) {
    cp_async_wait<kStages - 2>();
    if constexpr (kWgmma) publish_to_async_proxy();
    __syncthreads();  // tile kb landed for every thread; tile kb - 1 is no longer read
    if (kb + kStages - 1 < num_blocks) load_block(kb + kStages - 1);
    cp_async_commit();
    if (!active) continue;

    const int stage = kb % kStages;
    float s[kKeyTiles][4];
    const uint32_t k_tile = smem_address(k_tiles + stage * Smem::kTileElems);
    if constexpr (kWgmma) {
      warpgroup_qk<T, D, kBlockRows>(smem_address(q_tile), (warp >> 2) * 64, k_tile, s);
    } else {
      warp_qk<T, D>(qa, k_tile, lane, s);
    }

    // scale into the log2 domain and mask keys a row does not see
    const bool needs_mask = kSparse || kb * kBlockKeys + kBlockKeys - 1 > first_row_pos;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = __fmul_rn(s[nt][e], c.scale_log2);  // never fused: masked and unmasked tiles round alike
        if (needs_mask) {
          const int col = nt * 8 + 2 * tig + (e & 1);
          const int j = kSparse ? key_pos[stage * kBlockKeys + col] : kb * kBlockKeys + col;
          if (j > row_pos[e >> 1]) x = -INFINITY;
        }
        s[nt][e] = x;
      }
    }

    // online softmax per row; s becomes p = 2^(x - m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[h], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = fast_exp2(m_run[h] - m_use);
      m_run[h] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        s[nt][2 * h] = fast_exp2(s[nt][2 * h] - m_use);
        s[nt][2 * h + 1] = fast_exp2(s[nt][2 * h + 1] - m_use);
        sum += s[nt][2 * h] + s[nt][2 * h + 1];
      }
      l_run[h] = l_run[h] * alpha + sum;
      if constexpr (kPV) {
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          o_acc[dt][2 * h] *= alpha;
          o_acc[dt][2 * h + 1] *= alpha;
        }
      }
    }

    if constexpr (kPV && kWgmma) {
      uint32_t pa[kBlockKeys / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
        pa[kk][0] = Mma::pack(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = Mma::pack(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = Mma::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = Mma::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
      warpgroup_pv<T, D>(pa, smem_address(v_tiles + stage * Smem::kTileElems), o_acc);
    } else if constexpr (kPV) {
      const uint32_t v_tile = smem_address(v_tiles + stage * Smem::kTileElems);
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
        const uint32_t a0 = Mma::pack(s[2 * kk][0], s[2 * kk][1]);
        const uint32_t a1 = Mma::pack(s[2 * kk][2], s[2 * kk][3]);
        const uint32_t a2 = Mma::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        const uint32_t a3 = Mma::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          // transposed matrices: keys kk*16 + 0..7 / 8..15 of channel chunks 2dp and 2dp + 1
          const int key = kk * 16 + (lane & 15);
          const int chunk = 2 * dp + (lane >> 4);
          uint32_t frag[4];
          ldmatrix_x4_trans(v_tile + swizzle<D, kBlockKeys>(key, chunk) * 2, frag);
          Mma::mma(o_acc[2 * dp], a0, a1, a2, a3, frag[0], frag[1]);
          Mma::mma(o_acc[2 * dp + 1], a0, a1, a2, a3, frag[2], frag[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // ---- epilogue: rows gid and gid + 8 of the warp
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = row0 + warp * 16 + gid + 8 * h;
    if (row >= rows_total) continue;
    const int64_t out_row = static_cast<int64_t>(qidx_base + row / nh) * c.num_heads + head0 + row % nh;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    if constexpr (kPV) {
      T* o = static_cast<T*>(args.o) + out_row * D + 2 * tig;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<uint32_t*>(o + dt * 8) = Mma::pack(o_acc[dt][2 * h] * inv, o_acc[dt][2 * h + 1] * inv);
      }
    }
    if (args.lse != nullptr && tig == 0) {
      args.lse[out_row] = l > 0.0f ? (m_run[h] + log2f(l)) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace kascade::cuda::prefill
