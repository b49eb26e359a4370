// src/cuda/kascade/radix_topk.cpp — validation and launch of the decode Top-k (radix_topk.h).
// Tested by tests/cuda/test_radix_topk.cpp.
#include "cuda/kascade/radix_topk.h"

#include <algorithm>

#include "cuda/common/cuda_status.h"
#include "cuda/common/plan_support.h"

namespace kascade::cuda {

namespace detail {
namespace {

struct ScratchOffsets {
  size_t histograms = 0, tickets = 0, state = 0, chunk_counts = 0, total = 0;
};

ScratchOffsets scratch_offsets(int64_t rows_total, int32_t max_chunks) {
  ScratchOffsets o;
  const auto rows = static_cast<size_t>(rows_total);
  o.tickets = o.histograms + align_workspace_bytes(rows * kTopkBins * sizeof(int32_t));
  o.state = o.tickets + align_workspace_bytes(rows * sizeof(int32_t));
  o.chunk_counts = o.state + align_workspace_bytes(rows * kTopkStateWords * sizeof(uint32_t));
  o.total = o.chunk_counts + align_workspace_bytes(rows * static_cast<size_t>(max_chunks) * 2 * sizeof(int32_t));
  return o;
}

}  // namespace

Result<TopkPlan> plan_topk_for(int64_t rows_total, int32_t max_seq_len, int32_t multiprocessors,
                               TopkAlgorithm algorithm, bool clusters) {
  KC_CHECK_ARG(rows_total >= 1, "Top-k rows: ", rows_total, "; expected >= 1");
  KC_CHECK_ARG(max_seq_len >= 1, "Top-k max_seq_len is ", max_seq_len, "; expected >= 1");
  KC_CHECK_ARG(multiprocessors >= 1, "multiprocessors is ", multiprocessors, "; expected >= 1");
  const int64_t quanta = (static_cast<int64_t>(max_seq_len) + kTopkChunkQuantum - 1) / kTopkChunkQuantum;
  const int64_t wanted = (2 * static_cast<int64_t>(multiprocessors) + rows_total - 1) / rows_total;
  const int64_t per_row = std::clamp<int64_t>(wanted, 1, quanta);
  TopkPlan plan;
  plan.rows_total = rows_total;
  plan.chunk = static_cast<int32_t>((quanta + per_row - 1) / per_row * kTopkChunkQuantum);
  plan.max_chunks = static_cast<int32_t>((max_seq_len + static_cast<int64_t>(plan.chunk) - 1) / plan.chunk);
  plan.scratch_bytes = scratch_offsets(rows_total, plan.max_chunks).total;
  KC_CHECK_ARG(algorithm != TopkAlgorithm::kByRows || max_seq_len <= kRowTopkMaxKeys,
               "the Top-k by rows takes rows of up to ", kRowTopkMaxKeys, " scores; max_seq_len is ", max_seq_len);
  // The row kernel's cluster: the most CTAs per row that keep the CTAs within one per SM (and
  // slices of >= kRowTopkMinSliceKeys keys). Measured on the H200, llama bf16 128K, the Top-k after
  // the pooling: 8 rows best with 8 CTAs each, 32 rows with 4, 64 rows with 2 (2 CTAs a row: 60 us,
  // 4: 76 us, chunks 99 us), 512 rows with 1 (docs/perf.md "Decode round 10").
  int32_t cluster = 1;
  while (clusters && cluster < kRowTopkMaxCluster && rows_total * 2 * cluster <= multiprocessors &&
         static_cast<int64_t>(max_seq_len) >= 2 * cluster * static_cast<int64_t>(kRowTopkMinSliceKeys))
    cluster *= 2;
  plan.row_cluster = cluster;
  // kAuto: the row kernel when its CTAs fill at least a quarter of the SMs (8 rows of 128K in
  // clusters of 8 took 29 us, the chunked select 36 us), or when the chunked select would not
  // split a row anyway; the chunks otherwise (a few rows whose clusters cannot spread). Without
  // clusters (one CTA a row) the rows must fill the SMs (measured before the clusters: 512 rows
  // 527 -> 340 us, 64 rows 98 -> 115 us).
  const int64_t ctas = rows_total * cluster;
  const bool rows_fill_gpu = (clusters ? 4 * ctas : ctas) >= multiprocessors || plan.max_chunks == 1;
  plan.by_rows = algorithm == TopkAlgorithm::kByRows ||
                 (algorithm == TopkAlgorithm::kAuto && max_seq_len <= kRowTopkMaxKeys && rows_fill_gpu);
  return plan;
}

Result<TopkPlan> plan_topk(int64_t rows_total, int32_t max_seq_len, TopkAlgorithm algorithm, int32_t row_cluster) {
  KC_CHECK_ARG(row_cluster == 0 || row_cluster == 1 || row_cluster == 2 || row_cluster == 4 || row_cluster == 8,
               "the Top-k's row_cluster is ", row_cluster, "; expected 0 (the plan's) or 1, 2, 4, 8");
  KC_ASSIGN_OR_RETURN(const int32_t sms, current_multiprocessor_count());
  KC_ASSIGN_OR_RETURN(const bool clusters, current_device_has_clusters());
  KC_CHECK_ARG(row_cluster <= 1 || clusters, "the Top-k's row_cluster is ", row_cluster,
               "; thread-block clusters need a GPU of compute capability 9.0 or later");
  KC_ASSIGN_OR_RETURN(TopkPlan plan, plan_topk_for(rows_total, max_seq_len, sms, algorithm, clusters));
  if (row_cluster != 0) plan.row_cluster = row_cluster;
  return plan;
}

int32_t fused_pool_cluster(int32_t max_seq_len, int32_t min_cluster, bool clusters) {
  const int32_t most = clusters ? kRowTopkMaxCluster : 1;
  if (!fused_pool_holds(max_seq_len, most)) return 0;
  for (int32_t c = std::max(1, min_cluster); c <= most; c *= 2)
    if (row_topk_slice_keys(max_seq_len, c) <= kFusedPoolSliceKeys) return c;
  return most;
}

TopkScratch topk_scratch_at(const TopkPlan& plan, void* scratch) {
  const ScratchOffsets o = scratch_offsets(plan.rows_total, plan.max_chunks);
  TopkScratch s;
  s.histograms = workspace_at<int32_t>(scratch, o.histograms);
  s.tickets = workspace_at<int32_t>(scratch, o.tickets);
  s.state = workspace_at<uint32_t>(scratch, o.state);
  s.chunk_counts = workspace_at<int32_t>(scratch, o.chunk_counts);
  return s;
}

}  // namespace detail

Result<size_t> radix_topk_scratch_bytes(int32_t batch, int32_t num_rows, int32_t max_seq_len) {
  KC_CHECK_ARG(batch >= 1 && num_rows >= 1, "batch ", batch, " and num_rows ", num_rows, "; expected >= 1 each");
  KC_ASSIGN_OR_RETURN(const detail::TopkPlan plan,
                      detail::plan_topk(static_cast<int64_t>(batch) * num_rows, max_seq_len));
  return plan.scratch_bytes;
}

Status radix_topk_decode(const float* scores, int64_t scores_stride, const int32_t* kv_lens, int32_t batch,
                         int32_t max_seq_len, const Budget& budget, const int32_t* k_per_seq,
                         const DecodeIndexRows& out, void* scratch, uint32_t* error_flags, cudaStream_t stream,
                         TopkAlgorithm algorithm, int32_t row_cluster) {
  KC_RETURN_IF_ERROR(validate_budget(budget));
  KC_CHECK_ARG(scores != nullptr && kv_lens != nullptr && error_flags != nullptr && scratch != nullptr,
               "scores, kv_lens, scratch or error_flags is null");
  KC_CHECK_ARG(batch >= 1 && batch <= 65535, "batch is ", batch, "; expected 1..65535");
  KC_CHECK_ARG(max_seq_len >= 1, "max_seq_len is ", max_seq_len, "; expected >= 1");
  KC_CHECK_ARG(scores_stride >= max_seq_len && scores_stride % 4 == 0, "scores_stride is ", scores_stride,
               "; expected a multiple of 4 >= max_seq_len ", max_seq_len);
  KC_CHECK_ARG(out.indices != nullptr && out.row_lens != nullptr, "out.indices or out.row_lens is null");
  KC_CHECK_ARG(out.batch == batch, "out.batch is ", out.batch, "; expected ", batch);
  KC_CHECK_ARG(out.num_rows >= 1 && out.num_rows <= 65535, "out.num_rows is ", out.num_rows, "; expected 1..65535");
  const int64_t k_needed = k_per_seq ? 1 : budget_k(max_seq_len, budget);
  KC_CHECK_ARG(out.k_max >= k_needed && out.k_max >= 1, "out.k_max is ", out.k_max, "; k(max_seq_len = ",
               max_seq_len, ") is ", k_needed);
  KC_ASSIGN_OR_RETURN(const detail::TopkPlan plan, detail::plan_topk(static_cast<int64_t>(batch) * out.num_rows,
                                                                     max_seq_len, algorithm, row_cluster));
  detail::TopkParams p;
  p.row_cluster = plan.row_cluster;
  p.scratch = detail::topk_scratch_at(plan, scratch);
  p.chunk = plan.chunk;
  p.max_chunks = plan.max_chunks;
  p.by_rows = plan.by_rows ? 1 : 0;
  p.scores = scores;
  p.kv_lens = kv_lens;
  p.indices = out.indices;
  p.row_lens = out.row_lens;
  p.error_flags = error_flags;
  p.stride = scores_stride;
  p.k_per_seq = k_per_seq;
  p.rho_ppm = budget.rho_ppm;
  p.k_min = budget.k_min;
  p.k_round = budget.k_round;
  p.max_seq_len = max_seq_len;
  p.num_rows = out.num_rows;
  p.k_max = out.k_max;
  return cuda_status(detail::launch_radix_topk(p, batch, stream), "launch of the radix Top-k kernels");
}

}  // namespace kascade::cuda
