// src/cuda/prefill/prefill_validate.h — host-side checks of a prefill call's views against its
// plan (fields the host can read; device memory is never touched) and the translation of checked
// views into the kernels' argument blocks (prefill_params.h). Every failure names the field.
// Tested by tests/cuda/test_prefill_plan.cpp (refusals, no GPU needed).
#pragma once

#include <cstdint>

#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/prefill_plan.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda::prefill {

// q and kv against the plan: pointers, dtypes, heads, head dim, batch <= planned, total_q <=
// max_total_q, block-table width covering max_kv_len, 16-byte alignment; the softmax scale; the
// workspace pointer.
Status validate_call(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const void* workspace);
// out.o (when needs_o) non-null, plan dtype, 16-byte aligned.
Status validate_output(const PrefillPlan& plan, const AttentionOutput& out, bool needs_o);
// rows for sparse attention: pointers, batch, tile_size, granularity and head map rules.
Status validate_rows(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows, const int32_t* head_map);
// rows and pooling for selection: the above plus per KV group, include_local, the plan's tile size,
// num_rows == pooling.num_rows dividing G, a known reduce, and a plan with selection.
Status validate_selection(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv,
                          const ScorePooling& pooling, const PrefillIndexRows& rows);

CallArgs make_call_args(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        void* workspace);
RowArgs make_row_args(const PrefillIndexRows& rows, const int32_t* head_map);

}  // namespace kascade::cuda::prefill
