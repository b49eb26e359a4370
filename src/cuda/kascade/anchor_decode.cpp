// src/cuda/kascade/anchor_decode.cpp — plan and run of anchor-layer decode (anchor_decode.h).
// Tested by tests/cuda/test_anchor_decode.cpp.
#include "cuda/kascade/anchor_decode.h"

#include <algorithm>
#include <cmath>

#include "cuda/attention/decode_launch.h"
#include "cuda/common/cuda_status.h"
#include "cuda/common/plan_support.h"
#include "cuda/kascade/selection_kernels.h"
#include "cuda/kascade/sparse_decode.h"

namespace kascade::cuda {

Result<AnchorDecodePlan> plan_anchor_decode(const DecodeShape& shape, const AnchorOptions& options) {
  KC_RETURN_IF_ERROR(supports_decode(shape));
  KC_RETURN_IF_ERROR(validate_budget(options.budget));
  const int32_t h = shape.num_heads, g = shape.num_kv_heads;
  KC_CHECK_ARG(options.pooling.num_rows >= 1 && h % options.pooling.num_rows == 0, "anchor num_rows is ", options.pooling.num_rows,
               "; expected a divisor of num_heads ", h);
  AnchorDecodePlan plan;
  plan.shape = shape;
  plan.options = options;
  plan.k_max = static_cast<int32_t>(budget_k(shape.max_seq_len, options.budget));
  plan.logits_stride = (static_cast<int64_t>(shape.max_seq_len) + 3) / 4 * 4;
  const bool per_head = options.pooling.num_rows == h && h != g;
  plan.granularity = per_head ? IndexGranularity::kPerQueryHead : IndexGranularity::kPerKvGroup;
  if (!options.dense_output && !per_head) {
    KC_CHECK_ARG(g % options.pooling.num_rows == 0, "anchor num_rows is ", options.pooling.num_rows,
                 "; a sparse output needs one row per query head (", h, ") or a divisor of num_kv_heads ", g);
  }
  const detail::DecodeMode mode = options.dense_output ? detail::DecodeMode::kDenseLogits : detail::DecodeMode::kScoring;
  KC_ASSIGN_OR_RETURN(const int32_t ctas, detail::prepare_decode_kernel(mode, shape.dtype, shape.head_dim));
  plan.scoring.num_slots = g;
  plan.scoring.max_len = shape.max_seq_len;
  KC_ASSIGN_OR_RETURN(plan.scoring.num_splits,
                      detail::choose_num_splits(static_cast<int64_t>(shape.batch) * g, ctas, shape.max_seq_len));
  int32_t max_splits = plan.scoring.num_splits;
  if (!options.dense_output) {
    KC_ASSIGN_OR_RETURN(plan.sparse, detail::plan_sparse_pass(shape, plan.granularity, plan.k_max,
                                                              /*from_logits=*/true));
    max_splits = std::max(max_splits, plan.sparse.num_splits);
  }
  KC_ASSIGN_OR_RETURN(plan.topk, detail::plan_topk(static_cast<int64_t>(shape.batch) * options.pooling.num_rows,
                                                   shape.max_seq_len, options.topk_algorithm,
                                                   options.topk_row_cluster));
  if (options.pool_fusion == PoolFusion::kFused) {
    KC_CHECK_ARG(options.topk_algorithm != TopkAlgorithm::kChunked,
                 "the fused pooling runs inside the row Top-k; topk_algorithm kChunked cannot take it");
    KC_ASSIGN_OR_RETURN(const bool clusters, detail::current_device_has_clusters());
    int32_t cluster = 0;
    if (options.topk_row_cluster != 0) {  // forced (tests, benchmarks): its slices must fit
      if (detail::fused_pool_holds(shape.max_seq_len, options.topk_row_cluster)) cluster = options.topk_row_cluster;
    } else {
      cluster = detail::fused_pool_cluster(shape.max_seq_len, plan.topk.row_cluster, clusters);
    }
    KC_CHECK_ARG(cluster != 0, "the fused pooling holds a row in shared memory, in slices of at most ",
                 detail::kFusedPoolMaxSliceKeys, " keys over at most ", clusters ? detail::kRowTopkMaxCluster : 1,
                 " CTAs", options.topk_row_cluster != 0 ? " (the forced cluster)" : "", "; max_seq_len is ",
                 shape.max_seq_len, ": use PoolFusion::kSeparate");
    plan.topk.by_rows = true;
    plan.topk.row_cluster = cluster;
  }
  plan.workspace = detail::layout_workspace(shape, max_splits, plan.logits_stride, options.pooling.num_rows,
                                            plan.topk.scratch_bytes);
  return plan;
}

Status anchor_decode(const AnchorDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                     const AttentionParams& params, const DecodeIndexRows& rows, const AttentionOutput& out,
                     const AnchorRunExtras& extras, void* workspace, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(detail::validate_decode_run(plan.shape, q, kv, out, /*needs_o=*/true));
  KC_CHECK_ARG(std::isfinite(params.scale) && params.scale > 0.0f, "params.scale is ", params.scale,
               "; expected a positive finite softmax scale");
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate plan.workspace.total_bytes = ",
               plan.workspace.total_bytes);
  KC_RETURN_IF_ERROR(detail::validate_index_rows(plan.shape, q, rows, plan.granularity));
  KC_CHECK_ARG(rows.num_rows == plan.options.pooling.num_rows, "rows.num_rows is ", rows.num_rows, "; the plan pools into ",
               plan.options.pooling.num_rows, " rows");
  // With k(kv_len) from the plan's budget the rows must hold k(max_seq_len); with explicit sizes the
  // kernel flags (kErrorRowLen) and clamps any k above rows.k_max.
  if (extras.k_per_seq == nullptr)
    KC_CHECK_ARG(rows.k_max >= plan.k_max, "rows.k_max is ", rows.k_max, "; k(max_seq_len) is ", plan.k_max);
  if (plan.granularity == IndexGranularity::kPerQueryHead)
    KC_CHECK_ARG(extras.head_map == nullptr, "head_map must be null with per-query-head rows");
  KC_CHECK_ARG(!(plan.options.dense_output && extras.exact_lse != nullptr),
               "exact_lse must be null with a dense output (out.lse is the exact LSE)");
  using detail::workspace_at;
  float* logits = workspace_at<float>(workspace, plan.workspace.logits);
  float* ws_lse = workspace_at<float>(workspace, plan.workspace.exact_lse);
  float* pooled = workspace_at<float>(workspace, plan.workspace.pooled);
  auto* error_flags = workspace_at<uint32_t>(workspace, plan.workspace.error_flags);
  const detail::TopkScratch topk_scratch =
      detail::topk_scratch_at(plan.topk, workspace_at<unsigned char>(workspace, plan.workspace.topk_scratch));

  // 1. scoring pass: logits + exact LSE (+ dense output)
  detail::DecodeKernelParams p =
      detail::make_decode_params(plan.shape, q, kv, params, plan.scoring, plan.workspace, workspace);
  p.logits = logits;
  p.logits_stride = plan.logits_stride;
  p.lse2 = ws_lse;
  if (plan.options.dense_output) {
    p.o = out.o;
    p.lse = out.lse;
  } else {
    p.lse = extras.exact_lse;
  }
  KC_RETURN_IF_ERROR(detail::launch_decode_kernel(
      plan.options.dense_output ? detail::DecodeMode::kDenseLogits : detail::DecodeMode::kScoring, plan.shape.dtype,
      plan.shape.head_dim, p, q.batch, stream, plan.scoring.programmatic));

  // 2. pooled post-softmax scores (fused: inside the row Top-k of step 3)
  const bool fused = plan.options.pool_fusion == PoolFusion::kFused;
  const int32_t reduce_max = plan.options.pooling.reduce == ScoreReduce::kMax ? 1 : 0;
  if (!fused) {
    detail::PoolScoresParams pool;
    pool.logits = logits;
    pool.lse = ws_lse;
    pool.kv_lens = kv.kv_lens;
    pool.pooled = pooled;
    pool.first_histograms = topk_scratch.histograms;
    pool.stride = plan.logits_stride;
    pool.num_kv_heads = plan.shape.num_kv_heads;
    pool.logits_heads = p.logits_heads;
    pool.max_seq_len = plan.shape.max_seq_len;
    pool.num_heads = plan.shape.num_heads;
    pool.num_rows = plan.options.pooling.num_rows;
    pool.reduce_max = reduce_max;
    KC_RETURN_IF_ERROR(cuda_status(detail::launch_pool_scores(pool, q.batch, stream), "launch of pool_scores_kernel"));
  }

  // 3. exact Top-k of each pooled row
  detail::TopkParams topk;
  if (fused) {
    topk.fused_pooling = 1;
    topk.pool.logits = logits;
    topk.pool.lse = ws_lse;
    topk.pool.pooled_out = extras.write_pooled_scores ? pooled : nullptr;
    topk.pool.num_heads = plan.shape.num_heads;
    topk.pool.num_kv_heads = plan.shape.num_kv_heads;
    topk.pool.logits_heads = p.logits_heads;
    topk.pool.reduce_max = reduce_max;
  } else {
    topk.scores = pooled;
    topk.first_digit_counted = 1;
  }
  topk.kv_lens = kv.kv_lens;
  topk.indices = rows.indices;
  topk.row_lens = rows.row_lens;
  topk.error_flags = error_flags;
  topk.stride = plan.logits_stride;
  topk.rho_ppm = plan.options.budget.rho_ppm;
  topk.k_min = plan.options.budget.k_min;
  topk.k_round = plan.options.budget.k_round;
  topk.k_per_seq = extras.k_per_seq;
  topk.scratch = topk_scratch;
  topk.chunk = plan.topk.chunk;
  topk.max_chunks = plan.topk.max_chunks;
  topk.by_rows = plan.topk.by_rows ? 1 : 0;
  topk.row_cluster = plan.topk.row_cluster;
  topk.max_seq_len = plan.shape.max_seq_len;
  topk.num_rows = plan.options.pooling.num_rows;
  topk.k_max = rows.k_max;
  KC_RETURN_IF_ERROR(cuda_status(detail::launch_radix_topk(topk, q.batch, stream),
                                 fused ? "launch of the fused pooling + row Top-k kernel"
                                                    : "launch of the radix Top-k kernels"));

  // 4. sparse output over the anchor's own rows: S from the stored logits, V rows only
  if (plan.options.dense_output) return ok_status();
  const detail::StoredLogits stored{logits, plan.logits_stride};
  return detail::run_sparse_pass(plan.shape, plan.sparse, q, kv, params, rows, extras.head_map, out,
                                 plan.workspace, workspace, stream, &stored);
}

const float* anchor_pooled_scores(const AnchorDecodePlan& plan, const void* workspace) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(workspace) + plan.workspace.pooled);
}

const float* anchor_logits(const AnchorDecodePlan& plan, const void* workspace) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(workspace) + plan.workspace.logits);
}

}  // namespace kascade::cuda
