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
// pooling.num_rows >= 1 and divides H.
Status check_pooling(const ScorePooling& pooling, int32_t num_heads, const char* op);

Status cpu_select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const ScorePooling& pooling, const int32_t* k_per_seq /* [batch] host */,
                         const DecodeIndexRows& rows);

Status cpu_select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const ScorePooling& pooling, const PrefillIndexRows& rows);

Status cpu_select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                 const PrefillIndexRows& rows);

}  // namespace kascade::policy
