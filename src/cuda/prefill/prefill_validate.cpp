// src/cuda/prefill/prefill_validate.cpp — host-side checks of prefill views and the kernels'
// argument blocks (prefill_validate.h). Tested by tests/cuda/test_prefill_plan.cpp.
#include "cuda/prefill/prefill_validate.h"

#include <cmath>
#include <cstdint>

#include "cuda/common/plan_support.h"

namespace kascade::cuda::prefill {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

Status validate_call(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const void* workspace) {
  const PrefillShape& s = plan.shape;
  KC_CHECK_ARG(q.q != nullptr, "q.q is null");
  KC_CHECK_ARG(q.cu_q_lens != nullptr, "q.cu_q_lens is null");
  KC_CHECK_ARG(q.dtype == s.dtype, "q.dtype is ", dtype_name(q.dtype), " but the plan is for ", dtype_name(s.dtype));
  KC_CHECK_ARG(q.batch >= 1 && q.batch <= s.batch, "q.batch is ", q.batch, "; the plan allows 1..", s.batch);
  KC_CHECK_ARG(q.total_q >= 0 && q.total_q <= s.max_total_q, "q.total_q is ", q.total_q, "; the plan allows 0..",
               s.max_total_q);
  KC_CHECK_ARG(q.num_heads == s.num_heads, "q.num_heads is ", q.num_heads, " but the plan is for ", s.num_heads);
  KC_CHECK_ARG(q.head_dim == s.head_dim, "q.head_dim is ", q.head_dim, " but the plan is for ", s.head_dim);
  KC_CHECK_ARG(aligned16(q.q), "q.q is not 16-byte aligned");
  KC_CHECK_ARG(kv.k != nullptr, "kv.k is null");
  KC_CHECK_ARG(kv.v != nullptr, "kv.v is null");
  KC_CHECK_ARG(kv.block_table != nullptr, "kv.block_table is null");
  KC_CHECK_ARG(kv.kv_lens != nullptr, "kv.kv_lens is null");
  KC_CHECK_ARG(kv.dtype == s.dtype, "kv.dtype is ", dtype_name(kv.dtype), " but the plan is for ",
               dtype_name(s.dtype));
  KC_CHECK_ARG(kv.num_kv_heads == s.num_kv_heads, "kv.num_kv_heads is ", kv.num_kv_heads, " but the plan is for ",
               s.num_kv_heads);
  KC_CHECK_ARG(kv.head_dim == s.head_dim, "kv.head_dim is ", kv.head_dim, " but the plan is for ", s.head_dim);
  KC_CHECK_ARG(kv.page_size >= 1, "kv.page_size is ", kv.page_size, "; expected >= 1");
  KC_CHECK_ARG(kv.num_pages >= 1, "kv.num_pages is ", kv.num_pages, "; expected >= 1");
  const int64_t pages_needed = (int64_t{s.max_kv_len} + kv.page_size - 1) / kv.page_size;
  KC_CHECK_ARG(kv.max_pages_per_seq >= pages_needed, "kv.max_pages_per_seq is ", kv.max_pages_per_seq, "; the plan's ",
               "max_kv_len ", s.max_kv_len, " needs ", pages_needed, " pages of ", kv.page_size);
  KC_CHECK_ARG(aligned16(kv.k) && aligned16(kv.v), "kv.k or kv.v is not 16-byte aligned");
  KC_CHECK_ARG(std::isfinite(params.scale) && params.scale > 0.0f, "params.scale is ", params.scale,
               "; expected a positive finite softmax scale");
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate plan.workspace.total_bytes = ",
               plan.workspace.total_bytes);
  return ok_status();
}

Status validate_output(const PrefillPlan& plan, const AttentionOutput& out, bool needs_o) {
  if (!needs_o) return ok_status();
  KC_CHECK_ARG(out.o != nullptr, "out.o is null");
  KC_CHECK_ARG(out.dtype == plan.shape.dtype, "out.dtype is ", dtype_name(out.dtype), " but the plan is for ",
               dtype_name(plan.shape.dtype));
  KC_CHECK_ARG(aligned16(out.o), "out.o is not 16-byte aligned");
  return ok_status();
}

Status validate_rows(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows, const int32_t* head_map) {
  KC_CHECK_ARG(rows.row_offsets != nullptr, "rows.row_offsets is null");
  KC_CHECK_ARG(rows.tile_base != nullptr, "rows.tile_base is null");
  KC_CHECK_ARG(rows.indices != nullptr, "rows.indices is null");
  KC_CHECK_ARG(rows.batch == q.batch, "rows.batch is ", rows.batch, " but q.batch is ", q.batch);
  KC_CHECK_ARG(rows.tile_size >= 1, "rows.tile_size is ", rows.tile_size, "; expected >= 1");
  KC_CHECK_ARG(rows.num_rows >= 1, "rows.num_rows is ", rows.num_rows, "; expected >= 1");
  switch (rows.granularity) {
    case IndexGranularity::kPerKvGroup:
      KC_CHECK_ARG(head_map != nullptr || rows.num_rows == kv.num_kv_heads, "rows.num_rows is ", rows.num_rows,
                   " but without a head_map per-KV-group rows need one row per KV group (", kv.num_kv_heads, ")");
      break;
    case IndexGranularity::kPerQueryHead:
      KC_CHECK_ARG(head_map == nullptr, "head_map must be null for per-query-head rows");
      KC_CHECK_ARG(rows.num_rows == q.num_heads, "rows.num_rows is ", rows.num_rows,
                   " but per-query-head rows need one row per query head (", q.num_heads, ")");
      break;
    default:
      return invalid_argument("rows.granularity holds unknown value ", static_cast<int>(rows.granularity));
  }
  return ok_status();
}

Status validate_selection(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv,
                          const ScorePooling& pooling, const PrefillIndexRows& rows) {
  KC_CHECK_ARG(plan.selection, "the plan was made without selection (PrefillPlanOptions::selection)");
  KC_CHECK_ARG(pooling.num_rows >= 1 && kv.num_kv_heads % pooling.num_rows == 0, "pooling.num_rows is ",
               pooling.num_rows, "; prefill selection pools whole KV groups, so it must divide G = ", kv.num_kv_heads);
  KC_CHECK_ARG(pooling.reduce == ScoreReduce::kSum || pooling.reduce == ScoreReduce::kMax,
               "pooling.reduce holds unknown value ", static_cast<int>(pooling.reduce));
  KC_CHECK_ARG(rows.granularity == IndexGranularity::kPerKvGroup, "selection writes per-KV-group rows");
  KC_CHECK_ARG(rows.include_local, "selection rows must have include_local (candidates j < s_t plus local keys)");
  KC_CHECK_ARG(rows.num_rows == pooling.num_rows, "rows.num_rows is ", rows.num_rows, " but pooling.num_rows is ",
               pooling.num_rows);
  KC_CHECK_ARG(rows.tile_size == plan.shape.tile_size, "rows.tile_size is ", rows.tile_size,
               " but the plan's tile_size is ", plan.shape.tile_size);
  KC_CHECK_ARG(rows.indices != nullptr, "rows.indices is null");
  KC_CHECK_ARG(rows.row_offsets != nullptr, "rows.row_offsets is null");
  KC_CHECK_ARG(rows.tile_base != nullptr, "rows.tile_base is null");
  KC_CHECK_ARG(rows.batch == q.batch, "rows.batch is ", rows.batch, " but q.batch is ", q.batch);
  return ok_status();
}

CallArgs make_call_args(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        void* workspace) {
  CallArgs c;
  c.q = q.q;
  c.k = kv.k;
  c.v = kv.v;
  c.cu_q_lens = q.cu_q_lens;
  c.kv_lens = kv.kv_lens;
  c.block_table = kv.block_table;
  c.batch = q.batch;
  c.num_heads = q.num_heads;
  c.num_kv_heads = kv.num_kv_heads;
  c.group_size = q.num_heads / kv.num_kv_heads;
  c.page_size = kv.page_size;
  c.num_pages = kv.num_pages;
  c.max_pages_per_seq = kv.max_pages_per_seq;
  c.max_q_len = plan.shape.max_q_len;
  c.max_kv_len = plan.shape.max_kv_len;
  c.max_total_q = q.total_q;  // the rows q and o actually hold (<= the plan's max_total_q)
  c.scale_log2 = params.scale * 1.4426950408889634f;
  c.errors = cuda::detail::workspace_at<uint32_t>(workspace, plan.workspace.error_flags);
  return c;
}

RowArgs make_row_args(const PrefillIndexRows& rows, const int32_t* head_map) {
  RowArgs r;
  r.indices = rows.indices;
  r.row_offsets = rows.row_offsets;
  r.tile_base = rows.tile_base;
  r.num_rows = rows.num_rows;
  r.tile_size = rows.tile_size;
  r.include_local = rows.include_local ? 1 : 0;
  r.per_query_head = rows.granularity == IndexGranularity::kPerQueryHead ? 1 : 0;
  r.head_map = rows.granularity == IndexGranularity::kPerKvGroup ? head_map : nullptr;
  return r;
}

}  // namespace kascade::cuda::prefill
