// src/cuda/prefill/prefill_stages.cpp — the stages of anchor selection (prefill_stages.h): LSE
// pass, pooled scores of one wave, Top-k of one wave. Tested by tests/cuda/test_prefill_select.cpp.
#include "cuda/prefill/prefill_stages.h"

#include "cuda/common/cuda_status.h"
#include "cuda/common/plan_support.h"
#include "cuda/prefill/causal_launch.h"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda/prefill/prefill_validate.h"

namespace kascade::cuda {

using prefill::element_type;

float* prefill_lse_scratch(const PrefillPlan& plan, void* workspace) {
  if (!plan.selection || workspace == nullptr) return nullptr;
  return detail::workspace_at<float>(workspace, plan.workspace.lse);
}

float* prefill_score_scratch(const PrefillPlan& plan, void* workspace) {
  if (!plan.selection || workspace == nullptr) return nullptr;
  return detail::workspace_at<float>(workspace, plan.workspace.scores);
}

Status prefill_lse(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   float* lse, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_CHECK_ARG(lse != nullptr, "lse is null");
  prefill::AttentionArgs args;
  args.call = prefill::make_call_args(plan, q, kv, params, workspace);
  args.lse = lse;
  return prefill::launch_causal_attention(plan, prefill::CausalPass::kLseOnly, args, q.batch, kv.num_kv_heads,
                                         stream);
}

Status pooled_scores_wave(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv,
                          const AttentionParams& params, const ScorePooling& pooling, const PrefillIndexRows& rows,
                          const float* lse, int32_t wave, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_selection(plan, q, kv, pooling, rows));
  KC_CHECK_ARG(lse != nullptr, "lse is null");
  KC_CHECK_ARG(wave >= 0 && wave < plan.num_waves, "wave is ", wave, "; the plan has ", plan.num_waves);
  prefill::PoolArgs args;
  args.call = prefill::make_call_args(plan, q, kv, params, workspace);
  args.rows = prefill::make_row_args(rows, nullptr);
  args.lse = lse;
  args.scores = prefill_score_scratch(plan, workspace);
  args.score_stride = plan.score_stride;
  args.wave_base = wave * plan.tiles_in_flight;
  args.pool_rows = pooling.num_rows;
  args.reduce_max = pooling.reduce == ScoreReduce::kMax ? 1 : 0;
  return prefill::launch_pooled_scores_pass(plan, args, stream);
}

Status topk_wave(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const ScorePooling& pooling,
                 const PrefillIndexRows& rows, int32_t wave, void* workspace, cudaStream_t stream) {
  AttentionParams unit_scale;  // the Top-k stage does not use the scale
  unit_scale.scale = 1.0f;
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, unit_scale, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_selection(plan, q, kv, pooling, rows));
  KC_CHECK_ARG(wave >= 0 && wave < plan.num_waves, "wave is ", wave, "; the plan has ", plan.num_waves);
  prefill::TopkArgs args;
  args.call = prefill::make_call_args(plan, q, kv, unit_scale, workspace);
  args.rows = prefill::make_row_args(rows, nullptr);
  args.out_indices = rows.indices;
  args.scores = prefill_score_scratch(plan, workspace);
  args.score_stride = plan.score_stride;
  args.wave_base = wave * plan.tiles_in_flight;
  args.pool_rows = pooling.num_rows;
  args.reduce_max = pooling.reduce == ScoreReduce::kMax ? 1 : 0;
  args.slot_capacity = plan.slot_capacity();
  const dim3 grid(static_cast<unsigned>(plan.tiles_in_flight), static_cast<unsigned>(pooling.num_rows));
  KC_CUDA_RETURN_IF_ERROR(prefill::launch_tile_topk(args, grid, stream));
  return ok_status();
}

}  // namespace kascade::cuda
