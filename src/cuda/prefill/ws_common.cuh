// src/cuda/prefill/ws_common.cuh — what the warp-specialised sm_90a prefill kernels share
// (ws_attention_kernel.cuh: dense, LSE pass and sparse prefill; ws_pooled_scores_kernels.cu):
// their key lists (WsKeys), shared-memory layout (WsSmem), mbarrier ring slots and the work units
// of the attention kernels with their decoders:
//   causal units: 128 query-major rows of one (sequence, KV group) over the keys 0 .. the unit's
//     last position (dense prefill, LSE pass);
//   gathered units: 128 rows of one (sequence, tile, row consumer) over the row's Top-k entries
//     (any order), then with include_local the tile's local keys s_t .. the unit's last position
//     (sparse prefill; the same rows and key lists as the kSparse instantiation of attention_kernel.cuh).
// Device-only; tested through the kernels (tests/cuda/test_prefill_dense.cpp, test_prefill_sparse.cpp,
// test_prefill_select.cpp, test_prefill_anchor.cpp).
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_params.h"

namespace kascade::cuda::prefill::ws {

// The key list of a unit: a causal prefix of the sequence's keys (K/V tiles read in place) or
// a gathered list (Top-k entries, then local keys; K/V rows gathered key by key).
enum class WsKeys { kCausal, kGathered };

// Shared memory: Q [128][D], K ring [kStages][128][D], V ring (kPV), then the mbarriers, for
// gathered key lists a ring of kKeyRowSlots × 128 resolved K/V head rows (int32) of the tiles in
// flight, and 16 bytes per consumer warp for its scheduling pins.
// Every tile in the swizzle<> layout, 1024-byte aligned. At least 120 KB, so one CTA owns a
// multiprocessor (setmaxnreg.inc then always finds the producer's released registers).
template <int D, bool kPV, WsKeys kKeys = WsKeys::kCausal>
struct WsSmem {
  static constexpr int kStages = kPV ? (D == 128 ? 3 : 4) : (D == 128 ? 4 : 6);
  static constexpr size_t kTileBytes = size_t(kWsBlockKeys) * D * 2;
  static constexpr size_t kQBytes = size_t(kWsBlockRows) * D * 2;
  static constexpr size_t kKOffset = kQBytes;
  static constexpr size_t kVOffset = kKOffset + kStages * kTileBytes;
  static constexpr size_t kBarrierOffset = kVOffset + (kPV ? kStages * kTileBytes : 0);
  // q_full, q_empty, k_full[S], k_empty[S], v_full[S], v_empty[S]
  static constexpr size_t kBarriers = 2 + 4 * size_t(kStages);
  // Resolved rows of tile t live in slot t % 3 (read by K(t) and V(t), rewritten for t + 3).
  static constexpr int kKeyRowSlots = 3;
  static constexpr size_t kKeyRowsOffset = kBarrierOffset + kBarriers * 8;
  static constexpr size_t kKeyRowsBytes =
      kKeys == WsKeys::kGathered ? size_t(kKeyRowSlots) * kWsBlockKeys * sizeof(int32_t) : 0;
  // The consumers' scheduling pins (pin_before_wait): 16 bytes per consumer warp, never read.
  static constexpr size_t kPinOffset = (kKeyRowsOffset + kKeyRowsBytes + 15) / 16 * 16;
  static constexpr size_t kPinBytes = size_t(kWsConsumerGroups) * 4 * 16;
  static constexpr size_t kUsed = kPinOffset + kPinBytes + kSmemAlignSlack;
  static constexpr size_t kBytes = kUsed > size_t{120} << 10 ? kUsed : size_t{120} << 10;
  static_assert(kUsed <= 227 * 1024, "shared memory per block");
};

#ifdef KASCADE_PREFILL_HAS_WGMMA
// (Device code of the sm_90a pass only.)

// A slot of a ring of kStages barriers/tiles: index and the parity of its current use.
struct RingSlot {
  int index;
  uint32_t parity;
};
template <int kStages>
__device__ __forceinline__ RingSlot ring_slot(int count) {
  return RingSlot{count % kStages, static_cast<uint32_t>((count / kStages) & 1)};
}

// One unit of work: 128 rows of one (sequence, row consumer), or invalid (no rows / bad data).
// Row r (0 <= r < rows_total) is query r / nh of the unit (position pos_base + r / nh, packed index
// qidx_base + r / nh) with query head head0 + r % nh; every row reads KV head kv_head.
struct WsUnit {
  bool valid = false;
  int b = 0, kv_head = 0, head0 = 0, nh = 1;
  int row0 = 0, rows_total = 0;  // rows [row0, row0 + 128) of rows_total
  int pos_base = 0, qidx_base = 0;
  int num_keys = 0, num_blocks = 0;
  // Gathered key lists: key i < row_len is row_entries[i] (checked against [0, entry_bound)); key
  // i >= row_len is local_start + (i - row_len) (include_local only).
  const int32_t* row_entries = nullptr;
  int row_len = 0, entry_bound = 0, local_start = 0;
  bool include_local = true;
};

// Reads sequence b's lengths; with `report`, sets the error bits of bad data (load_sequence),
// else the same checks silently (one thread of the CTA reports for all).
__device__ __forceinline__ bool read_sequence(const CallArgs& c, int b, bool report, Sequence& seq) {
  if (report) return load_sequence(c, b, seq);
  const int q0 = c.cu_q_lens[b], q1 = c.cu_q_lens[b + 1];
  seq.q_start = q0;
  seq.q_len = q1 - q0;
  seq.kv_len = c.kv_lens[b];
  if (q0 < 0 || seq.q_len < 0 || q1 > c.max_total_q || seq.q_len > c.max_q_len) return false;
  if (seq.kv_len < seq.q_len || seq.kv_len > c.max_kv_len ||
      (static_cast<int64_t>(seq.kv_len) + c.page_size - 1) / c.page_size > c.max_pages_per_seq)
    return false;
  seq.first_pos = seq.kv_len - seq.q_len;
  return true;
}

// Causal unit u of args.row_blocks × G × batch (longest first: ws_unit_coords).
__device__ __forceinline__ WsUnit decode_causal_unit(const AttentionArgs& args, int u, bool report) {
  const CallArgs& c = args.call;
  WsUnit w;
  const WsUnitCoords at = ws_unit_coords(u, args.row_blocks, c.num_kv_heads, c.batch);
  w.kv_head = at.kv_head;
  w.b = at.b;
  w.nh = c.group_size;
  w.head0 = at.kv_head * c.group_size;
  Sequence seq;
  if (!read_sequence(c, w.b, report, seq)) return w;
  w.rows_total = seq.q_len * w.nh;
  w.row0 = at.row_block * kWsBlockRows;
  if (w.row0 >= w.rows_total) return w;
  w.pos_base = seq.first_pos;
  w.qidx_base = seq.q_start;
  w.num_keys = w.pos_base + (min(w.row0 + kWsBlockRows, w.rows_total) - 1) / w.nh + 1;
  w.num_blocks = (w.num_keys + kWsBlockKeys - 1) / kWsBlockKeys;
  w.valid = true;
  return w;
}

// Gathered unit u of args.row_blocks (= tile slots per sequence × row_blocks_per_tile) × consumers
// (KV groups, or query heads for per-query-head rows) × batch: one consumer at a time, later tiles
// (longer lists) first (ws_gathered_unit_coords).
// The same rows, key lists and error checks as the kSparse path of attention_kernel.cuh.
__device__ __forceinline__ WsUnit decode_gathered_unit(const AttentionArgs& args, int u, bool report) {
  const CallArgs& c = args.call;
  const RowArgs& r = args.rows;
  WsUnit w;
  const int consumers = r.per_query_head ? c.num_heads : c.num_kv_heads;
  const WsUnitCoords at = ws_gathered_unit_coords(u, args.row_blocks, consumers);
  const int consumer = at.kv_head;
  w.b = at.b;
  Sequence seq;
  if (!read_sequence(c, w.b, report, seq)) return w;
  const int tile_in_call = at.row_block / args.row_blocks_per_tile;
  const int block_in_tile = at.row_block % args.row_blocks_per_tile;
  const CallTiles tiles = call_tiles(seq, r.tile_size);
  if (tile_in_call >= tiles.count) return w;
  if (r.tile_base[w.b + 1] - r.tile_base[w.b] != tiles.count) {
    if (report) report_error(c, kPrefillErrorTileBase);
    return w;
  }
  const TileQueries tq = tile_queries(seq, tiles.first + tile_in_call, r.tile_size);
  int row_id;
  if (r.per_query_head) {
    w.head0 = consumer;
    w.nh = 1;
    w.kv_head = consumer / c.group_size;
    row_id = consumer;
  } else {
    w.kv_head = consumer;
    w.head0 = consumer * c.group_size;
    w.nh = c.group_size;
    row_id = r.head_map ? r.head_map[consumer] : consumer;
  }
  if (row_id < 0 || row_id >= r.num_rows) {
    if (report) report_error(c, kErrorHeadMap);
    return w;
  }
  w.rows_total = tq.count * w.nh;
  w.row0 = block_in_tile * kWsBlockRows;
  if (w.row0 >= w.rows_total) return w;
  w.pos_base = tq.lo;
  w.qidx_base = seq.q_start + (tq.lo - seq.first_pos);
  const int64_t row = static_cast<int64_t>(r.tile_base[w.b] + tile_in_call) * r.num_rows + row_id;
  const int64_t begin = r.row_offsets[row];
  const int64_t length = r.row_offsets[row + 1] - begin;
  w.include_local = r.include_local != 0;
  w.entry_bound = w.include_local ? tq.start : min(tq.start + r.tile_size, seq.kv_len);
  if (begin < 0 || length < 0 || length > w.entry_bound) {
    if (report) report_error(c, kErrorRowLen);
    return w;
  }
  w.row_entries = r.indices + begin;
  w.row_len = static_cast<int>(length);
  w.local_start = tq.start;
  const int last_pos = w.pos_base + (min(w.row0 + kWsBlockRows, w.rows_total) - 1) / w.nh;
  w.num_keys = w.row_len + (w.include_local ? last_pos - tq.start + 1 : 0);
  w.num_blocks = (w.num_keys + kWsBlockKeys - 1) / kWsBlockKeys;
  w.valid = true;
  return w;
}

template <WsKeys kKeys>
__device__ __forceinline__ WsUnit decode_unit(const AttentionArgs& args, int u, bool report) {
  if constexpr (kKeys == WsKeys::kGathered) {
    return decode_gathered_unit(args, u, report);
  } else {
    return decode_causal_unit(args, u, report);
  }
}

// Position of key i of a gathered unit's list for the causal mask `position <= row position`:
// INT_MIN for an entry of an include_local row (always visible: entries < s_t), the entry itself
// otherwise (INT_MAX when it is out of range: the producer reports it), the local key's position,
// INT_MAX past the list.
__device__ __forceinline__ int gathered_key_position(const WsUnit& w, int i) {
  if (i >= w.num_keys) return INT_MAX;
  if (i >= w.row_len) return w.local_start + (i - w.row_len);
  if (w.include_local) return INT_MIN;
  const int j = __ldg(w.row_entries + i);
  return j >= 0 && j < w.entry_bound ? j : INT_MAX;
}

// Q rows [row0, row0 + 128) of the unit into the Q tile at `q_tile` (zero past rows_total): one row
// per producer thread (tid 0..127), 16-byte cp.async; the caller commits and publishes.
template <typename T, int D>
__device__ __forceinline__ void load_unit_q(const CallArgs& c, const WsUnit& w, uint32_t q_tile, int tid) {
  const T* q = static_cast<const T*>(c.q);
  const int row = w.row0 + tid;
  int64_t offset = -1;
  if (row < w.rows_total) {
    offset = (static_cast<int64_t>(w.qidx_base + row / w.nh) * c.num_heads + w.head0 + row % w.nh) * D;
  }
#pragma unroll
  for (int ch = 0; ch < D / 8; ++ch) {
    const uint32_t to = q_tile + 2u * swizzle<D, kWsBlockRows>(tid, ch);
    cp_async_16(to, offset >= 0 ? q + offset + ch * 8 : q, offset >= 0 ? 16 : 0);
  }
}

#endif  // KASCADE_PREFILL_HAS_WGMMA

}  // namespace kascade::cuda::prefill::ws
