// src/cuda/prefill/prefill_stages.h — the stages anchor selection is made of, exposed so that tests
// and benchmarks can check and time each one (prefill_ops.h composes them):
//   prefill_lse         — the LSE of every (query, head) over its causal keys (no V, no o);
//   pooled_scores_wave  — pooled scores of the tiles of one wave into the workspace's score scratch;
//   topk_wave           — the Top-k of the tiles of one wave from the score scratch into the rows.
// Wave w covers the flat tile slots [w·W, (w+1)·W) of the rows (W = plan.tiles_in_flight); slot
// s - w·W of the scratch holds tile slot s. Validation as in prefill_ops.h.
// Tested by tests/cuda/test_prefill_select.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/prefill/prefill_plan.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// The workspace's LSE region, f32 [plan max_total_q, H] (null when the plan has no selection).
float* prefill_lse_scratch(const PrefillPlan& plan, void* workspace);
// The workspace's score scratch, f32 [tiles_in_flight, G, score_stride] (null without selection).
float* prefill_score_scratch(const PrefillPlan& plan, void* workspace);

// lse: device [total_q, H] natural-log LSE of each query over keys 0..its position.
Status prefill_lse(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   float* lse, void* workspace, cudaStream_t stream);

// lse: the LSE of the call's queries (prefill_lse or the dense op's); rows and pooling as in
// select_prefill. Writes prefill_score_scratch for the tiles of wave `wave` that need a selection.
Status pooled_scores_wave(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv,
                          const AttentionParams& params, const ScorePooling& pooling, const PrefillIndexRows& rows,
                          const float* lse, int32_t wave, void* workspace, cudaStream_t stream);

// Reads prefill_score_scratch; writes the rows of the tiles of wave `wave`.
Status topk_wave(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const ScorePooling& pooling,
                 const PrefillIndexRows& rows, int32_t wave, void* workspace, cudaStream_t stream);

}  // namespace kascade::cuda
