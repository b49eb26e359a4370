// src/policy/cpu_select.h — the CPU backend's score-based selection (kascade/backend.h):
// select_decode (pooled post-softmax scores of one query → exact Top-k per row), select_prefill
// (per tile: pooled scores over candidates j < s_t → Top-k at the planned row length, streamed
// tile by tile with scratch R·s_t) and the prefill oracle (per query head and query: top-k of its
// own p over j <= i). All arithmetic is src/ref's (pooled_scores_*_ref, topk_select_ref); these
// functions loop, validate and lay out rows. Host memory.
// Tested by tests/unit/policy/test_cpu_backend.cpp (against rows composed in the test from the
// ref ops and against brute-force selections).
#pragma once

#include <cstdint>
#include <functional>

#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::policy {

// Shared checks of the selection ops: valid q / kv views (src/ref/views.h), one query per sequence.
Status check_decode_inputs(const QueryBatch& q, const PagedKv& kv, const char* op);
// rows: non-null pointers, rows.batch == batch, rows.num_rows == num_rows, k_max >= 0.
Status check_decode_rows(const DecodeIndexRows& rows, int32_t batch, int32_t num_rows, const char* op);
// Prefill rows against the call: non-null pointers, rows.batch, rows.num_rows == num_rows,
// tile_size >= 1, one tile slot per tile each sequence's queries touch, monotone offsets.
Status check_prefill_rows(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows, int32_t num_rows,
                          const char* op);
// The shared checks of select_decode: check_decode_inputs, check_pooling, check_decode_rows, then
// k_per_seq non-null with every k in [0, kv_len] and <= rows.k_max.
Status check_select_decode_call(const QueryBatch& q, const PagedKv& kv, const ScorePooling& pooling,
                                const int32_t* k_per_seq, const DecodeIndexRows& rows, const char* op);
// pooling.num_rows >= 1 and divides H.
Status check_pooling(const ScorePooling& pooling, int32_t num_heads, const char* op);

// Picks the k winners of pooled row r into out ([k] int32, ascending); 0 < k < n.
using RowTopK = std::function<Status(int32_t r, int64_t k, int32_t* out)>;

// Writes the num_rows decode rows of sequence b (k of its n candidates): every key when k == n,
// else top_k(r, k, row) when k > 0; pads each row with -1 to k_max and sets row_lens.
Status write_decode_rows(const DecodeIndexRows& rows, int32_t b, int32_t num_rows, int64_t k, int64_t n,
                         const RowTopK& top_k);
// Checks that no row of tile slot `slot` (tile t of sequence b) holds more than its s_t candidates;
// returns whether every row takes all of them (a saturated tile needs no scores).
Result<bool> check_tile_rows_saturated(const PrefillIndexRows& rows, int32_t b, int64_t t, int64_t slot,
                                       int32_t num_rows, int64_t s_t, const char* op);
// Writes the rows of tile slot `slot` (s_t candidates): every candidate when a row's planned
// length is s_t, else top_k(r, len, row) when len > 0.
Status write_tile_rows(const PrefillIndexRows& rows, int64_t slot, int32_t num_rows, int64_t s_t,
                       const RowTopK& top_k);

Status cpu_select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const ScorePooling& pooling, const int32_t* k_per_seq /* [batch] host */,
                         const DecodeIndexRows& rows);

Status cpu_select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const ScorePooling& pooling, const PrefillIndexRows& rows);

Status cpu_select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                 const PrefillIndexRows& rows);

}  // namespace kascade::policy
