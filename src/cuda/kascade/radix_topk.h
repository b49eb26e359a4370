// src/cuda/kascade/radix_topk.h — exact decode Top-k on the GPU (DESIGN.md §2.1, §2.2): for each
// sequence b and score row r, the k = k(kv_len[b]) largest of scores[b][r][0..kv_len[b]), ties to
// the lower index (exactly ref::topk_select_ref, NaN excepted: NaN ranks above +inf here), written
// as a −1-padded int32 row in ascending index order with its length. Many rows of up to 256K
// scores: one CTA per row, one read of the row and the radix select on chip (row_topk_kernel.cu);
// few or longer rows: a radix select (three histogram passes, then a compaction pass) over chunks
// of each row, one CTA per chunk. No sort, no host round trip; graph-capturable.
// Tested by tests/cuda/test_radix_topk.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/budget.h"
#include "kascade/status.h"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda {

// Which Top-k kernels run: kAuto picks the row kernel (row_topk_kernel.cu: a cluster of 1–8 CTAs
// per row) when max_seq_len <= detail::kRowTopkMaxKeys and the rows, in clusters, fill a quarter
// of the GPU (4 · batch · rows · cluster >= SMs, or rows short enough that the chunked select keeps
// one chunk per row), else the chunked radix select; the other two force one (kByRows fails on longer rows).
// Tests run both on the same inputs.
enum class TopkAlgorithm { kAuto, kChunked, kByRows };

namespace detail {

// How the Top-k of rows_total rows of up to max_seq_len scores is cut into chunk CTAs (enough
// CTAs for two per multiprocessor, chunks of a multiple of kTopkChunkQuantum scores, one chunk per
// row once the rows alone fill the GPU), and the scratch bytes it needs.
struct TopkPlan {
  int64_t rows_total = 0;  // batch · rows
  int32_t chunk = 0;
  int32_t max_chunks = 0;
  bool by_rows = false;  // the row kernel instead of the chunks
  int32_t row_cluster = 1;  // its CTAs per row: the most (a power of two <= kRowTopkMaxCluster, slices
                            // of >= kRowTopkMinSliceKeys keys) with batch · rows · cluster <= SMs
  size_t scratch_bytes = 0;
};
// For a GPU of `multiprocessors` SMs that launches thread-block clusters or not (before compute
// capability 9.0: row_cluster stays 1). Host arithmetic only; tested without a GPU.
Result<TopkPlan> plan_topk_for(int64_t rows_total, int32_t max_seq_len, int32_t multiprocessors,
                               TopkAlgorithm algorithm = TopkAlgorithm::kAuto, bool clusters = true);
// For the current device; row_cluster 1, 2, 4 or 8 forces the row kernel's cluster (0: the plan's;
// more than 1 refused on a GPU without clusters).
Result<TopkPlan> plan_topk(int64_t rows_total, int32_t max_seq_len, TopkAlgorithm algorithm = TopkAlgorithm::kAuto,
                           int32_t row_cluster = 0);

// The cluster of the fused pooling + row Top-k (each CTA pools its slice of a row into shared
// memory) for rows of up to max_seq_len keys: the smallest power of two >= min_cluster whose slices
// hold at most kFusedPoolSliceKeys keys (two CTAs per SM); failing that, the largest cluster
// (kRowTopkMaxCluster, or 1 without clusters) if its slices hold at most kFusedPoolMaxSliceKeys;
// 0 when no cluster holds the row. Host arithmetic only; tested without a GPU.
int32_t fused_pool_cluster(int32_t max_seq_len, int32_t min_cluster, bool clusters);

// The scratch views inside `scratch` (plan.scratch_bytes, 256-byte aligned).
TopkScratch topk_scratch_at(const TopkPlan& plan, void* scratch);

}  // namespace detail

// Scratch bytes radix_topk_decode needs for batch × num_rows rows of up to max_seq_len scores.
Result<size_t> radix_topk_scratch_bytes(int32_t batch, int32_t num_rows, int32_t max_seq_len);

// scores: device [batch, out.num_rows, scores_stride] fp32, scores_stride >= max_seq_len and a
// multiple of 4; kv_lens: device [batch]; out: device rows with out.k_max >= k(max_seq_len);
// k_per_seq: device [batch] selection sizes, or null for k(kv_len) from `budget`;
// scratch: device, radix_topk_scratch_bytes(batch, out.num_rows, max_seq_len) bytes, zeroed before
// its first use (every call leaves it ready for the next);
// error_flags: device uint32 that gets kErrorKvLen when a kv_len lies outside [0, max_seq_len]
// and kErrorRowLen when a k lies outside [0, min(kv_len, out.k_max)].
// algorithm: which kernels (TopkAlgorithm; the scratch size is the same for all); row_cluster: 0 for
// the plan's CTAs per row of the row kernel, or 1, 2, 4, 8 to force them (tests, benchmarks; more
// than 1 needs a GPU of compute capability 9.0+).
Status radix_topk_decode(const float* scores, int64_t scores_stride, const int32_t* kv_lens, int32_t batch,
                         int32_t max_seq_len, const Budget& budget, const int32_t* k_per_seq,
                         const DecodeIndexRows& out, void* scratch, uint32_t* error_flags, cudaStream_t stream,
                         TopkAlgorithm algorithm = TopkAlgorithm::kAuto, int32_t row_cluster = 0);

}  // namespace kascade::cuda
