// src/ref/attention_ref.h — CPU reference attention: dense causal (prefill and decode), sparse
// over index sets (decode rows, prefill CSR rows ∪ local keys), and the merge of partial states.
// fp32 accumulation over f32 / f16 / bf16 inputs; o is written in out.dtype, lse in fp32.
// These are the oracle of the CUDA kernels and the arithmetic of the CPU backend.
// Every op validates its views first (views.h: validate_kv, validate_params, validate_output;
// index_rows.h for the rows) and writes nothing when it refuses them. Results do not depend on the
// page layout, nor on the order of a row's entries.
// Tested by tests/unit/ref/test_dense_attention.cpp, test_sparse_attention.cpp and
// test_merge_states.cpp (against fp64 implementations inside the tests).
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
// null, and then num_rows must equal G); kPerQueryHead → row h (head_map must be null, num_rows
// == H). Softmax is restricted to the row; K and V come from head h's own KV group h / g.
// Rows must be duplicate-free, entries in [0, kv_len) for the first row_len entries; an empty row
// gives o = 0, lse = -inf. Entries past row_len must be -1. Bad rows are refused with a Status naming
// (b, row, entry): OutOfRange for an entry outside [0, kv_len), row_len outside [0, k_max] or a
// head_map entry outside [0, num_rows); InvalidArgument for a duplicate or bad padding.
Status sparse_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const DecodeIndexRows& rows, const int32_t* head_map /* [G] or null */,
                         const AttentionOutput& out);

// Sparse prefill: query i of tile t (position p) attends the keys of its tile's row (see
// PrefillIndexRows) plus, with rows.include_local, its local keys s_t..p. Keys of the row beyond
// p are masked (causal); a query left with no key gets o = 0, lse = -inf. Row selection as in
// sparse_decode_ref. Rows are validated: tile_base must give each sequence exactly the tiles its
// call touches, row_offsets start at 0 and never decrease, rows are duplicate-free (InvalidArgument),
// entries lie in [0, s_t) (include_local) or [0, min(s_t + tile_size, kv_len)) (without) (OutOfRange).
Status sparse_prefill_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const PrefillIndexRows& rows, const int32_t* head_map /* [G] or null */,
                          const AttentionOutput& out);

// Merges two partial attention states over disjoint key sets into the state over their union:
//   lse = log(exp(lse_a) + exp(lse_b)),  o = o_a·exp(lse_a − lse) + o_b·exp(lse_b − lse).
// An empty state (lse = -inf) contributes nothing (the other state is copied exactly, whatever the
// empty state's o holds); two empty states give o = 0, lse = -inf.
// o_*: [rows, head_dim] fp32; lse_*: [rows]. Outputs may alias input a or b (element by element).
Status merge_states_ref(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b,
                        int64_t rows, int32_t head_dim, float* o, float* lse);

}  // namespace kascade::ref
