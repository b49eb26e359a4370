// src/ref/index_rows.h — validation of index rows (DecodeIndexRows, PrefillIndexRows of
// include/kascade/attention.h) against one attention call, and the row/tile arithmetic the sparse
// ops share. Every failure names the sequence, row and entry. Status codes: a bad field, size,
// tile count, duplicate entry or non -1 padding is InvalidArgument; an entry or head_map value
// outside its range, or a row longer than k_max, is OutOfRange.
// Tested by tests/unit/ref/test_sparse_attention.cpp (bad-input cases) through the sparse ops.
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::ref {

// The tiles that sequence b's call touches (PrefillIndexRows): first = (kv_len - q_len) / T,
// count = (kv_len - 1) / T - first + 1, or count 0 when q_len is 0.
struct CallTiles {
  int64_t first = 0;
  int64_t count = 0;
};
CallTiles call_tiles(int32_t q_len, int32_t kv_len, int32_t tile_size);

// The row that KV group g reads with kPerKvGroup granularity.
inline int32_t row_of_group(const int32_t* head_map, int32_t g) { return head_map ? head_map[g] : g; }

// Checks the granularity against the layer: kPerKvGroup with head_map → every head_map[g] (g < G)
// in [0, num_rows); without → num_rows == G; kPerQueryHead → num_rows == H and head_map null.
Status validate_row_mapping(IndexGranularity granularity, int32_t num_rows, const int32_t* head_map /* [G] */,
                            int32_t num_heads, int32_t num_kv_heads);

// Decode rows for a validated (q, kv): rows.batch == q.batch, k_max >= 0, 0 <= row_len <= k_max,
// entries [0, row_len) distinct and in [0, kv_len[b]), entries [row_len, k_max) equal to -1, and
// the row mapping above.
Status validate_decode_rows(const DecodeIndexRows& rows, const int32_t* head_map, const QueryBatch& q,
                            const PagedKv& kv);

// Prefill rows for a validated (q, kv): rows.batch == q.batch, tile_size >= 1, tile_base[0] = 0 and
// tile_base[b+1] - tile_base[b] = call_tiles(b).count, row_offsets from 0 and non-decreasing, every
// row duplicate-free with entries in [0, s_t) (include_local) or [0, min(s_t + tile_size, kv_len))
// (without), and the row mapping above.
Status validate_prefill_rows(const PrefillIndexRows& rows, const int32_t* head_map, const QueryBatch& q,
                             const PagedKv& kv);

}  // namespace kascade::ref
