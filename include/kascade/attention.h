// kascade/attention.h — the views every attention op takes: queries, paged KV cache, outputs and
// index rows (DESIGN.md §3 "Kernel contract"). The CPU reference (src/ref) and the CUDA kernels
// (src/cuda) read exactly these layouts; pointers live in the memory of the backend that runs
// the op (host for the CPU backend, device for CUDA). Views do not own memory.
//
// Conventions (DESIGN.md §2):
// - H query heads, G KV heads (groups), g = H / G; query head h belongs to KV group h / g.
// - Positions are 0-based and attention is causal. The KV cache already holds the keys of the
//   call's own queries: query i (0-based within the call) of sequence b sits at absolute
//   position kv_len[b] - q_len[b] + i and sees keys 0 .. that position.
// - lse is the natural logarithm of the softmax denominator sum_j exp(scale * q·k_j) over the
//   attended keys; an empty set has lse = -inf and o = 0.
// Validation helpers are in src/ref/views.h; tested by tests/unit/ref/test_views.cpp.
#pragma once

#include <cstdint>

#include "kascade/dtype.h"

namespace kascade {

// Queries of one forward call, packed over sequences (varlen).
struct QueryBatch {
  const void* q = nullptr;           // [total_q, num_heads, head_dim], `dtype`, contiguous
  DType dtype = DType::kF32;
  int32_t batch = 0;                 // number of sequences
  int32_t total_q = 0;               // cu_q_lens[batch]
  int32_t num_heads = 0;             // H
  int32_t head_dim = 0;              // d
  const int32_t* cu_q_lens = nullptr;  // [batch + 1] prefix sums of per-sequence query counts
};

// One layer's paged KV cache. Key j of sequence b lives in page block_table[b][j / page_size],
// row j % page_size. Contiguous K/V is the special case of one page per sequence.
struct PagedKv {
  const void* k = nullptr;           // [num_pages, page_size, num_kv_heads, head_dim], `dtype`
  const void* v = nullptr;           // [num_pages, page_size, num_kv_heads, head_dim], `dtype`
  DType dtype = DType::kF32;
  int32_t num_pages = 0;
  int32_t page_size = 0;
  int32_t num_kv_heads = 0;          // G
  int32_t head_dim = 0;              // d
  const int32_t* block_table = nullptr;  // [batch, max_pages_per_seq] page ids
  int32_t max_pages_per_seq = 0;
  const int32_t* kv_lens = nullptr;  // [batch] valid keys per sequence (including this call's)
};

struct AttentionParams {
  float scale = 0.0f;  // softmax scale σ applied to q·k (1/sqrt(d) for Llama / Qwen3)
};

// Output of an attention op.
struct AttentionOutput {
  void* o = nullptr;     // [total_q, num_heads, head_dim], `dtype`
  DType dtype = DType::kF32;
  float* lse = nullptr;  // [total_q, num_heads] natural-log LSE; may be null when not needed
};

// Whether an index row serves a KV group (shared by its g query heads) or one query head.
enum class IndexGranularity : uint8_t { kPerKvGroup = 0, kPerQueryHead = 1 };

// Decode index rows: one row per (sequence, row r); r is a KV group or a query head.
// With kPerKvGroup, KV group g of the layer reads row head_map[g] (identity when head_map is
// null), so num_rows may be smaller than G (kascade-pooled keeps one row and maps every group
// to it). Rows are duplicate-free sets of key positions < kv_len[b]; order is unspecified.
struct DecodeIndexRows {
  int32_t* indices = nullptr;   // [batch, num_rows, k_max], entries past row_lens are -1
  int32_t* row_lens = nullptr;  // [batch, num_rows]
  int32_t batch = 0;
  int32_t num_rows = 0;
  int32_t k_max = 0;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
};

// Prefill index rows, compact (CSR). Sequence b's call touches the tiles
//   t_first(b) = (kv_len[b] - q_len[b]) / tile_size  ..  t_last(b) = (kv_len[b] - 1) / tile_size;
// tile t of sequence b is tile slot tile_base[b] + (t - t_first(b)), and row r of it is
//   row = slot * num_rows + r,  keys indices[row_offsets[row] .. row_offsets[row + 1]).
// With include_local (Kascade), rows hold candidates j < s_t = t * tile_size and query i of the
// tile also attends its local keys s_t .. i. Without it (the prefill oracle, tile_size 1), rows
// hold keys j < s_t + tile_size and each query attends the row's keys j <= its position.
struct PrefillIndexRows {
  int32_t* indices = nullptr;      // [row_offsets[num_slots * num_rows]]
  int64_t* row_offsets = nullptr;  // [num_slots * num_rows + 1]
  int32_t* tile_base = nullptr;    // [batch + 1]; num_slots = tile_base[batch]
  int32_t batch = 0;
  int32_t num_rows = 0;
  int32_t tile_size = 32;
  bool include_local = true;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
};

}  // namespace kascade
