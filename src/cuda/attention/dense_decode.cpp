// src/cuda/attention/dense_decode.cpp — plan and run of dense split-KV decode (dense_decode.h).
// Tested by tests/cuda/test_dense_decode.cpp.
#include "cuda/attention/dense_decode.h"

#include <cmath>

#include "cuda/attention/decode_launch.h"

namespace kascade::cuda {

Result<DenseDecodePlan> plan_dense_decode(const DecodeShape& shape) {
  KC_RETURN_IF_ERROR(supports_decode(shape));
  DenseDecodePlan plan;
  plan.shape = shape;
  KC_ASSIGN_OR_RETURN(const int32_t ctas, detail::prepare_decode_kernel(detail::DecodeMode::kDense, shape.dtype,
                                                                       shape.head_dim));
  plan.pass.num_slots = shape.num_kv_heads;
  plan.pass.max_len = shape.max_seq_len;
  KC_ASSIGN_OR_RETURN(plan.pass.num_splits,
                      detail::choose_num_splits(static_cast<int64_t>(shape.batch) * shape.num_kv_heads, ctas,
                                                shape.max_seq_len));
  plan.workspace = detail::layout_workspace(shape, plan.pass.num_splits, 0, 0);
  return plan;
}

Status dense_decode(const DenseDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                    const AttentionParams& params, const AttentionOutput& out, void* workspace,
                    cudaStream_t stream) {
  KC_RETURN_IF_ERROR(detail::validate_decode_run(plan.shape, q, kv, out, /*needs_o=*/true));
  KC_CHECK_ARG(std::isfinite(params.scale) && params.scale > 0.0f, "params.scale is ", params.scale,
               "; expected a positive finite softmax scale");
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate plan.workspace.total_bytes = ",
               plan.workspace.total_bytes);
  detail::DecodeKernelParams p =
      detail::make_decode_params(plan.shape, q, kv, params, plan.pass, plan.workspace, workspace);
  p.o = out.o;
  p.lse = out.lse;
  return detail::launch_decode_kernel(detail::DecodeMode::kDense, plan.shape.dtype, plan.shape.head_dim, p, q.batch,
                                      stream, plan.pass.programmatic);
}

}  // namespace kascade::cuda
