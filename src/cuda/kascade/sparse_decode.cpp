// src/cuda/kascade/sparse_decode.cpp — plan and run of sparse decode over index rows
// (sparse_decode.h). Tested by tests/cuda/test_sparse_decode.cpp.
#include "cuda/kascade/sparse_decode.h"

#include <algorithm>
#include <cmath>

#include "cuda/attention/decode_launch.h"

namespace kascade::cuda {
namespace detail {

Status validate_index_rows(const DecodeShape& shape, const QueryBatch& q, const DecodeIndexRows& rows,
                           IndexGranularity granularity) {
  KC_CHECK_ARG(rows.indices != nullptr && rows.row_lens != nullptr, "rows.indices or rows.row_lens is null");
  KC_CHECK_ARG(rows.batch == q.batch, "rows.batch is ", rows.batch, "; q.batch is ", q.batch);
  KC_CHECK_ARG(rows.k_max >= 1, "rows.k_max is ", rows.k_max, "; expected >= 1");
  KC_CHECK_ARG(rows.granularity == granularity, "rows.granularity is ",
               rows.granularity == IndexGranularity::kPerKvGroup ? "per KV group" : "per query head",
               "; the plan is for ", granularity == IndexGranularity::kPerKvGroup ? "per KV group" : "per query head");
  if (granularity == IndexGranularity::kPerQueryHead) {
    KC_CHECK_ARG(rows.num_rows == shape.num_heads, "rows.num_rows is ", rows.num_rows,
                 "; per-query-head rows need one row per query head (", shape.num_heads, ")");
  } else {
    KC_CHECK_ARG(rows.num_rows >= 1, "rows.num_rows is ", rows.num_rows, "; expected >= 1");
  }
  return ok_status();
}

Result<PassPlan> plan_sparse_pass(const DecodeShape& shape, IndexGranularity granularity, int32_t k_max,
                                  bool from_logits) {
  KC_CHECK_ARG(k_max >= 1, "k_max is ", k_max, "; expected >= 1");
  KC_ASSIGN_OR_RETURN(const int32_t ctas,
                      prepare_decode_kernel(from_logits ? DecodeMode::kSparseFromLogits : DecodeMode::kSparse,
                                            shape.dtype, shape.head_dim));
  PassPlan pass;
  pass.from_logits = from_logits;
  pass.num_slots = granularity == IndexGranularity::kPerQueryHead ? shape.num_heads : shape.num_kv_heads;
  pass.max_len = k_max;
  KC_ASSIGN_OR_RETURN(pass.num_splits,
                      choose_num_splits(static_cast<int64_t>(shape.batch) * pass.num_slots, ctas, k_max));
  return pass;
}

Status run_sparse_pass(const DecodeShape& shape, const PassPlan& pass, const QueryBatch& q, const PagedKv& kv,
                       const AttentionParams& params, const DecodeIndexRows& rows, const int32_t* head_map,
                       const AttentionOutput& out, const WorkspaceLayout& layout, void* workspace,
                       cudaStream_t stream, const StoredLogits* stored) {
  if ((stored != nullptr) != pass.from_logits)
    return internal_error("sparse pass: planned ", pass.from_logits ? "with" : "without", " stored logits but run ",
                          stored != nullptr ? "with" : "without");
  DecodeKernelParams p = make_decode_params(shape, q, kv, params, pass, layout, workspace);
  p.indices = rows.indices;
  p.row_lens = rows.row_lens;
  p.head_map = head_map;
  p.num_rows = rows.num_rows;
  p.k_max = rows.k_max;
  p.per_query_head = rows.granularity == IndexGranularity::kPerQueryHead ? 1 : 0;
  p.o = out.o;
  p.lse = out.lse;
  if (stored != nullptr) {
    if (stored->logits == nullptr || stored->stride < shape.max_seq_len)
      return internal_error("sparse pass: stored logits null, or their stride ", stored->stride, " below max_seq_len ",
                            shape.max_seq_len);
    p.logits = const_cast<float*>(stored->logits);  // read only in this mode
    p.logits_stride = stored->stride;
  }
  return launch_decode_kernel(stored != nullptr ? DecodeMode::kSparseFromLogits : DecodeMode::kSparse, shape.dtype,
                              shape.head_dim, p, q.batch, stream, pass.programmatic);
}

}  // namespace detail

Result<SparseDecodePlan> plan_sparse_decode(const DecodeShape& shape, IndexGranularity granularity, int32_t k_max) {
  KC_RETURN_IF_ERROR(supports_decode(shape));
  SparseDecodePlan plan;
  plan.shape = shape;
  plan.granularity = granularity;
  plan.k_max = k_max;
  KC_ASSIGN_OR_RETURN(plan.pass, detail::plan_sparse_pass(shape, granularity, k_max));
  plan.workspace = detail::layout_workspace(shape, plan.pass.num_splits, 0, 0);
  return plan;
}

Status sparse_decode(const SparseDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                     const AttentionParams& params, const DecodeIndexRows& rows, const int32_t* head_map,
                     const AttentionOutput& out, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(detail::validate_decode_run(plan.shape, q, kv, out, /*needs_o=*/true));
  KC_CHECK_ARG(std::isfinite(params.scale) && params.scale > 0.0f, "params.scale is ", params.scale,
               "; expected a positive finite softmax scale");
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate plan.workspace.total_bytes = ",
               plan.workspace.total_bytes);
  KC_RETURN_IF_ERROR(detail::validate_index_rows(plan.shape, q, rows, plan.granularity));
  if (plan.granularity == IndexGranularity::kPerQueryHead) {
    KC_CHECK_ARG(head_map == nullptr, "head_map must be null with per-query-head rows");
  } else if (head_map == nullptr) {
    KC_CHECK_ARG(rows.num_rows == plan.shape.num_kv_heads, "rows.num_rows is ", rows.num_rows,
                 "; with a null head_map (identity) each of the ", plan.shape.num_kv_heads,
                 " KV groups needs its own row");
  }
  return detail::run_sparse_pass(plan.shape, plan.pass, q, kv, params, rows, head_map, out, plan.workspace,
                                 workspace, stream);
}

}  // namespace kascade::cuda
