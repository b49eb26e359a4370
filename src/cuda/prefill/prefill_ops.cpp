// src/cuda/prefill/prefill_ops.cpp — the CUDA prefill ops (prefill_ops.h): host-side checks, then
// kernel launches on `stream` (no allocation, no synchronisation). Anchor selection runs the LSE
// pass (or takes the dense kernel's LSE), then for each wave of tiles the pooled-score kernel and
// the Top-k kernel, so the score scratch holds one wave at a time.
// Tested by tests/cuda/test_prefill_dense.cpp, test_prefill_sparse.cpp, test_prefill_select.cpp,
// test_prefill_anchor.cpp.
#include "cuda/prefill/prefill_ops.h"

#include "cuda/common/cuda_status.h"
#include "cuda/prefill/causal_launch.h"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda/prefill/prefill_stages.h"
#include "cuda/prefill/prefill_validate.h"

namespace kascade::cuda {
namespace {

// The dense kernel writing o and lse (lse may be null).
Status launch_dense(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                    void* o, float* lse, void* workspace, cudaStream_t stream) {
  prefill::AttentionArgs args;
  args.call = prefill::make_call_args(plan, q, kv, params, workspace);
  args.o = o;
  args.lse = lse;
  return prefill::launch_causal_attention(plan, prefill::CausalPass::kDense, args, q.batch, kv.num_kv_heads, stream);
}

Status launch_sparse(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out,
                     void* workspace, cudaStream_t stream) {
  prefill::AttentionArgs args;
  args.call = prefill::make_call_args(plan, q, kv, params, workspace);
  args.rows = prefill::make_row_args(rows, head_map);
  args.o = out.o;
  args.lse = out.lse;
  return prefill::launch_sparse_attention_pass(plan, args, q.batch, q.num_heads, kv.num_kv_heads, rows.tile_size,
                                               stream);
}

// Pooling and Top-k of every wave, from the LSE in `lse` ([total_q, H]).
Status select_waves(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                    const ScorePooling& pooling, const PrefillIndexRows& rows, const float* lse, void* workspace,
                    cudaStream_t stream) {
  for (int32_t wave = 0; wave < plan.num_waves; ++wave) {
    KC_RETURN_IF_ERROR(pooled_scores_wave(plan, q, kv, params, pooling, rows, lse, wave, workspace, stream));
    KC_RETURN_IF_ERROR(topk_wave(plan, q, kv, pooling, rows, wave, workspace, stream));
  }
  return ok_status();
}

}  // namespace

Status dense_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const AttentionOutput& out, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_output(plan, out, /*needs_o=*/true));
  return launch_dense(plan, q, kv, params, out.o, out.lse, workspace, stream);
}

Status sparse_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out,
                      void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_output(plan, out, /*needs_o=*/true));
  KC_RETURN_IF_ERROR(prefill::validate_rows(q, kv, rows, head_map));
  return launch_sparse(plan, q, kv, params, rows, head_map, out, workspace, stream);
}

Status select_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const ScorePooling& pooling, const PrefillIndexRows& rows, void* workspace,
                      cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_selection(plan, q, kv, pooling, rows));
  float* lse = prefill_lse_scratch(plan, workspace);
  KC_RETURN_IF_ERROR(prefill_lse(plan, q, kv, params, lse, workspace, stream));
  return select_waves(plan, q, kv, params, pooling, rows, lse, workspace, stream);
}

Status anchor_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const ScorePooling& pooling, const PrefillIndexRows& rows, AnchorOutput output,
                      const int32_t* head_map, const AttentionOutput& out, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(prefill::validate_call(plan, q, kv, params, workspace));
  KC_RETURN_IF_ERROR(prefill::validate_selection(plan, q, kv, pooling, rows));
  KC_RETURN_IF_ERROR(prefill::validate_output(plan, out, /*needs_o=*/true));
  KC_CHECK_ARG(output == AnchorOutput::kDense || output == AnchorOutput::kSparse, "output holds unknown value ",
               static_cast<int>(output));
  if (output == AnchorOutput::kSparse) KC_RETURN_IF_ERROR(prefill::validate_rows(q, kv, rows, head_map));
  if (output == AnchorOutput::kDense) {
    // Layer 0: the dense kernel's LSE feeds the pooling (the caller's lse, or the scratch).
    float* lse = out.lse != nullptr ? out.lse : prefill_lse_scratch(plan, workspace);
    KC_RETURN_IF_ERROR(launch_dense(plan, q, kv, params, out.o, lse, workspace, stream));
    return select_waves(plan, q, kv, params, pooling, rows, lse, workspace, stream);
  }
  float* lse = prefill_lse_scratch(plan, workspace);
  KC_RETURN_IF_ERROR(prefill_lse(plan, q, kv, params, lse, workspace, stream));
  KC_RETURN_IF_ERROR(select_waves(plan, q, kv, params, pooling, rows, lse, workspace, stream));
  return launch_sparse(plan, q, kv, params, rows, head_map, out, workspace, stream);
}

}  // namespace kascade::cuda
