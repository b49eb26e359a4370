// src/policy/cpu_fast_attention.h — the CPU backend's fast attention ops: dense causal attention
// (prefill and decode), sparse decode over index rows and sparse prefill over CSR rows ∪ local keys,
// with exactly the semantics, validation and errors of src/ref/attention_ref.h (the reference
// they are tested against). Work is cut into blocks of (queries × the query heads of one KV group)
// that share one key list — sequence, KV group / row consumer, query tile — and the blocks run in
// parallel (OpenMP, dynamic schedule); each block is computed by cpu_fast_core's blocked
// online-softmax attention (QKᵀ and PV as sgemm calls on gathered tiles of 256 keys). Each output
// element is written by one block whose arithmetic does not depend on the thread that runs it, so
// results are identical for any thread count.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp (against src/ref, 1 vs 2 threads).
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::policy {

Status fast_dense_attention(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                            const AttentionOutput& out);

Status fast_sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const DecodeIndexRows& rows, const int32_t* head_map /* [G] or null */,
                          const AttentionOutput& out);

Status fast_sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const PrefillIndexRows& rows, const int32_t* head_map /* [G] or null */,
                           const AttentionOutput& out);

// The lse of every (query, head) of the call over its full causal range (no output), the first
// pass of the anchor scores (cpu_fast_select.h). lse: [total_q, num_heads] fp32.
// Validates q and kv (src/ref/views.h) and params.
Status fast_causal_lse(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params, float* lse);

}  // namespace kascade::policy
