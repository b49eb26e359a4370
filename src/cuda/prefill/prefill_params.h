// src/cuda/prefill/prefill_params.h — argument blocks of the prefill kernels and the tiling
// constants they share with their host launchers (prefill_ops.cpp). Plain structs, no CUDA types,
// so both the .cu kernel files and the C++20 host files include them.
//
// Work units (DESIGN.md §2.3, §3):
//   - attention kernels (dense, LSE-only, sparse): one CTA = up to kBlockRows "rows", a row being one
//     (query, query head) pair; the rows of a CTA share one KV head and are ordered query-major,
//     row = query · heads_per_row + head, so the g heads of a GQA group reuse every K/V tile;
//   - pooled-score kernel: one CTA = (key range, tile slot of the wave, KV group), all rows of the
//     tile (its queries in the call × the group's g heads, up to kMaxPoolRows) at once;
//   - Top-k kernel: one CTA = (tile slot of the wave, pooled row).
// Tested through the ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cstdint>

namespace kascade::cuda::prefill {

constexpr int kWarps = 8;                  // warps per attention / pooling CTA
constexpr int kThreads = kWarps * 32;      // 256
constexpr int kBlockRows = kWarps * 16;    // 128 rows per attention CTA (16 per warp)
constexpr int kBlockKeys = 64;             // keys per K/V tile
constexpr int kMaxPoolRows = 2 * kBlockRows;  // rows of one tile the pooling CTA holds (T·g <= 256)
constexpr int kTopkThreads = 1024;         // threads of a Top-k CTA
constexpr int kTopkBins = 2048;            // bins of the first two radix digits (the third has 1024)

// Warp-specialised sm_90a attention kernels (ws_attention_kernel.cuh): warpgroup 0 loads, warpgroups
// 1 and 2 compute 64 rows each (the same 128 query-major rows per unit as above), key tiles of 128.
constexpr int kWsConsumerGroups = 2;
constexpr int kWsThreads = (kWsConsumerGroups + 1) * 128;  // 384
constexpr int kWsBlockRows = kWsConsumerGroups * 64;        // 128
constexpr int kWsBlockKeys = 128;
static_assert(kWsBlockRows == kBlockRows, "both kernel families cut the rows alike");

#if defined(__CUDACC__)
#define KASCADE_PREFILL_HOST_DEVICE __host__ __device__
#else
#define KASCADE_PREFILL_HOST_DEVICE
#endif

// The warp-specialised kernels' persistent schedule: unit u (0 <= u < row_blocks · G · batch) is
// row block `row_block` of (sequence b, KV group kv_head); row blocks are taken from the last (the
// longest key lists) to the first, all (group, sequence) pairs of one row block together. CTA c of
// a grid of n walks units c, c + n, c + 2n, ...
struct WsUnitCoords {
  int row_block;
  int kv_head;
  int b;
};
KASCADE_PREFILL_HOST_DEVICE inline WsUnitCoords ws_unit_coords(int u, int row_blocks, int num_kv_heads, int batch) {
  const int per_block = num_kv_heads * batch;
  const int rem = u % per_block;
  return WsUnitCoords{row_blocks - 1 - u / per_block, rem % num_kv_heads, rem / num_kv_heads};
}
// The sparse (gathered) kernel's schedule: unit u (0 <= u < row_blocks · consumers · batch) walks one
// (sequence, row consumer) at a time — sequences slowest, then consumers — its row blocks from the last
// to the first. The CTAs in flight then gather from ONE consumer's K/V rows: neighbouring tiles'
// ascending key lists overlap and are walked in step, so a row fetched from HBM for one CTA is read by
// the others from L2 (with consumers fastest, as ws_unit_coords, the CTAs in flight read G disjoint
// K/V sets and the reuse pass was bound by HBM on lists with little overlap). Longest-first holds
// within each consumer; a CTA's lists shrink along the walk except where it passes to the next consumer.
KASCADE_PREFILL_HOST_DEVICE inline WsUnitCoords ws_gathered_unit_coords(int u, int row_blocks, int consumers) {
  const int pair = u / row_blocks;  // (sequence, consumer), consumers fastest
  return WsUnitCoords{row_blocks - 1 - u % row_blocks, pair % consumers, pair / consumers};
}

enum class ElementType : int { kF16 = 0, kBF16 = 1 };

// The call's views as the kernels read them (device pointers; host ints).
struct CallArgs {
  const void* q = nullptr;             // [total_q, H, d]
  const void* k = nullptr;             // [num_pages, page_size, G, d]
  const void* v = nullptr;             // [num_pages, page_size, G, d]
  const int32_t* cu_q_lens = nullptr;  // [batch + 1]
  const int32_t* kv_lens = nullptr;    // [batch]
  const int32_t* block_table = nullptr;  // [batch, max_pages_per_seq]
  int32_t batch = 0;
  int32_t num_heads = 0;               // H
  int32_t num_kv_heads = 0;            // G
  int32_t group_size = 0;              // g = H / G
  int32_t page_size = 0;
  int32_t num_pages = 0;
  int32_t max_pages_per_seq = 0;
  int32_t max_q_len = 0;               // plan limit: every q_len must be <= this
  int32_t max_kv_len = 0;              // plan limit: every kv_len must be <= this
  int32_t max_total_q = 0;             // q.total_q: cu_q_lens[b + 1] <= this for every b
  float scale_log2 = 0.0f;             // softmax scale · log2(e)
  uint32_t* errors = nullptr;          // DeviceError / PrefillError bits
};

// Compact prefill index rows (kascade::PrefillIndexRows) as the kernels read them.
struct RowArgs {
  const int32_t* indices = nullptr;      // [row_offsets[num_slots · num_rows]]
  const int64_t* row_offsets = nullptr;  // [num_slots · num_rows + 1]
  const int32_t* tile_base = nullptr;    // [batch + 1]
  int32_t num_rows = 0;
  int32_t tile_size = 0;
  int32_t include_local = 1;
  int32_t per_query_head = 0;            // rows serve one query head each (else one KV group)
  const int32_t* head_map = nullptr;     // [G] or null (identity), per-KV-group rows only
};

// Attention kernels. Grid: x = row blocks (dense: ceil(max_q_len·g / 128); sparse: tiles per
// sequence × row blocks per tile), y = consumers (KV groups, or query heads for per-query-head
// rows), z = batch.
struct AttentionArgs {
  CallArgs call;
  RowArgs rows;                 // sparse only
  int32_t row_blocks_per_tile = 1;  // sparse only
  // Warp-specialised dense / LSE kernels only (persistent grid of gridDim.x CTAs): units are
  // (row block, KV group, sequence), row_blocks per (group, sequence), taken longest first.
  int32_t row_blocks = 0;
  void* o = nullptr;            // [total_q, H, d] (not written by the LSE-only kernel)
  float* lse = nullptr;         // [total_q, H] natural-log LSE, or null (attention kernels only)
};

// Pooled post-softmax scores of the tiles of one wave. Grid: x = key splits, y = tile slots of the
// wave (slots wave_base + y), z = KV groups.
//   scores[y][g][j] = reduce over rows (query i of the tile in the call, head h of group g) of
//                     exp(σ q_{i,h}·k_{g,j} − lse[i][h]),   j < s_t,
// written only for tiles whose pooled row needs a selection (0 < k_t < s_t).
struct PoolArgs {
  CallArgs call;
  RowArgs rows;                 // the rows being selected (their lengths say which tiles need scores)
  const float* lse = nullptr;   // [total_q, H] natural-log LSE over each query's causal keys
  float* scores = nullptr;      // [tiles_in_flight, G, score_stride]
  int64_t score_stride = 0;     // >= max_kv_len, multiple of 4
  int32_t wave_base = 0;        // first tile slot of the wave
  int32_t pool_rows = 0;        // R: pooled rows per tile (divides G)
  int32_t reduce_max = 0;       // 0: sum, 1: max
  // Warp-specialised kernel only (ws_pooled_scores_kernels.cu; persistent grid): units are
  // (wave slot, KV group, key chunk of kWsPoolChunkTiles tiles of 128 keys), wave slots fastest.
  int32_t wave_slots = 0;       // W: slots of the wave
  int32_t key_chunks = 0;       // chunks per (slot, group): ceil(ceil(max_kv_len / 128) / kWsPoolChunkTiles)
};

// Key tiles (of kWsBlockKeys) per unit of the warp-specialised pooled-score kernel. Each unit starts
// with a Q load and the consumers' per-unit set-up (row LSEs, the unit's rows), a pipeline bubble
// that 16-tile units paid ~14 % of the consumers' time for (Nsight Compute, 2026-12-03); 32 halves
// it and still leaves thousands of units per wave at long lengths (load balance), and the GPU tests'
// 4097-key rows still cross a unit boundary.
constexpr int kWsPoolChunkTiles = 32;

// Its persistent schedule: unit u (0 <= u < wave_slots · G · key_chunks) is key chunk `chunk` (key
// tiles [chunk · kWsPoolChunkTiles, + kWsPoolChunkTiles)) of (wave slot `slot`, KV group `group`),
// wave slots fastest (neighbouring CTAs read the same K chunk).
struct WsPoolUnitCoords {
  int slot;
  int group;
  int chunk;
};
KASCADE_PREFILL_HOST_DEVICE inline WsPoolUnitCoords ws_pool_unit_coords(int u, int wave_slots, int num_kv_heads) {
  const int rest = u / wave_slots;
  return WsPoolUnitCoords{u % wave_slots, rest % num_kv_heads, rest / num_kv_heads};
}

// Top-k of one wave. Grid: x = tile slots of the wave, y = pooled rows R. Row r of slot s reads
// the scores of groups [r·G/R, (r+1)·G/R) (summed, or max) and writes its k_t largest
// (ties: lower index) in ascending order at indices[row_offsets[s·R + r] ..].
struct TopkArgs {
  CallArgs call;
  RowArgs rows;                 // indices are written here (the kernel casts constness away)
  int32_t* out_indices = nullptr;  // = rows.indices, writable
  const float* scores = nullptr;   // [tiles_in_flight, G, score_stride]
  int64_t score_stride = 0;
  int32_t wave_base = 0;
  int32_t pool_rows = 0;
  int32_t reduce_max = 0;
  int32_t slot_capacity = 0;       // waves × tiles_in_flight: tile_base[batch] must not exceed it
};

}  // namespace kascade::cuda::prefill
