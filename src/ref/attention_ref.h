// src/ref/attention_ref.h — CPU reference attention: dense causal (prefill and decode), sparse
// over index sets (decode rows, prefill CSR rows ∪ local keys), and the merge of partial states.
// fp32 accumulation over f32 / f16 / bf16 inputs; o is written in out.dtype, lse in fp32.
// These are the oracle of the CUDA kernels and the arithmetic of the CPU backend.
// Tested by tests/unit/test_attention_ref.cpp (against an fp64 implementation inside the test).
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::ref {

// Dense causal GQA attention: query i of sequence b (position p) attends keys 0..p.
// Decode is the case q_len = 1 for every sequence.
Status dense_attention_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const AttentionOutput& out);

// Sparse decode: every sequence has q_len = 1 at position kv_len - 1; head h attends exactly the
// keys of its row: rows.granularity kPerKvGroup → row head_map[h / g] (identity when head_map is
// null); kPerQueryHead → row h (head_map must be null). Softmax is restricted to the row.
// Rows must be duplicate-free, entries in [0, kv_len) for the first row_len entries; an empty row
// gives o = 0, lse = -inf. Bad rows are refused with a Status naming (b, row, entry).
Status sparse_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const DecodeIndexRows& rows, const int32_t* head_map /* [G] or null */,
                         const AttentionOutput& out);

// Sparse prefill: query i of tile t (position p) attends the keys of its tile's row (see
// PrefillIndexRows) plus, with rows.include_local, its local keys s_t..p. Keys of the row beyond
// p are masked (causal). Row selection as in sparse_decode_ref. Rows are validated: duplicate-free,
// entries < s_t (include_local) or < s_t + tile_size (without).
Status sparse_prefill_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const PrefillIndexRows& rows, const int32_t* head_map /* [G] or null */,
                          const AttentionOutput& out);

// Merges two partial attention states over disjoint key sets into the state over their union:
//   lse = log(exp(lse_a) + exp(lse_b)),  o = o_a·exp(lse_a − lse) + o_b·exp(lse_b − lse).
// An empty state (lse = -inf) contributes nothing; two empty states give o = 0, lse = -inf.
// o_*: [rows, head_dim] fp32; lse_*: [rows]. Outputs may alias input a.
Status merge_states_ref(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b,
                        int64_t rows, int32_t head_dim, float* o, float* lse);

}  // namespace kascade::ref
