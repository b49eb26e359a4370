// src/cuda/kascade/selection_kernels.h — argument blocks and cudaError_t launchers of the anchor
// selection kernels: pooling of post-softmax scores (pooled_scores_kernels.cu) and the exact
// radix Top-k (radix_topk_kernels.cu, row_topk_kernel.cu). Status-returning entry points: anchor_decode.h and
// radix_topk.h. Tested by tests/cuda/test_anchor_decode.cpp and test_radix_topk.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kascade::cuda::detail {

// Radix select digits over the uint32 image of a float: bits [31:21], [20:10], [9:0].
constexpr int kTopkBins = 2048;        // bins of the first two digits (the third has 1024)
constexpr int kTopkFirstShift = 21;

// pooled[b][r][j] = reduce over heads h of row r (heads [r·H/R, (r+1)·H/R)) of
//                   exp(logit(b, h, j) − lse[b][h]),  j < min(kv_len[b], max_seq_len),
// logit(b, h, j) = logits[b][h / g][j][h % g] (key-major per KV group, as the scoring pass writes them).
struct PoolScoresParams {
  const float* logits = nullptr;   // [B, G, stride, logits_heads]
  const float* lse = nullptr;      // [B, H] natural-log LSE over all keys
  const int32_t* kv_lens = nullptr;  // [B]
  float* pooled = nullptr;         // [B, R, stride]
  int32_t* first_histograms = nullptr;  // [B, R, kTopkBins] or null: counts of the first radix
                                        // digit of the pooled scores are added here (zero before;
                                        // TopkScratch::histograms of the Top-k that follows)
  int64_t stride = 0;              // multiple of 4
  int32_t max_seq_len = 0;
  int32_t num_heads = 0;           // H
  int32_t num_kv_heads = 0;        // G, divides H (g = H / G)
  int32_t logits_heads = 0;        // floats per key of a group block: g rounded up to 1, 2, 4 or 8
  int32_t num_rows = 0;            // R, divides H
  int32_t reduce_max = 0;          // 0: sum, 1: max
};
cudaError_t launch_pool_scores(const PoolScoresParams& params, int batch, cudaStream_t stream);

// Scratch of the Top-k (radix_topk.h sizes it): histograms and tickets are zero before a run and
// left zero by it; state and chunk_counts are written before they are read.
constexpr int kTopkStateWords = 4;        // prefix, mask, k_rem, (padding)
constexpr int kTopkThreads = 512;         // threads of every Top-k CTA
constexpr int kTopkChunkQuantum = 8192;   // chunks are multiples of this many scores
struct TopkScratch {
  int32_t* histograms = nullptr;    // [B, R, kTopkBins] (the pooling kernel may fill the first digit's)
  int32_t* tickets = nullptr;       // [B, R] chunk CTAs finished with the current digit
  uint32_t* state = nullptr;        // [B, R, kTopkStateWords] the digits chosen so far
  int32_t* chunk_counts = nullptr;  // [B, R, max_chunks, 2] keys > T and == T per chunk
};

// The fused pooling of the row kernel (row_topk_kernel.cu with TopkParams::fused_pooling): each CTA
// pools its slice of row (b, r) from the logits into shared memory (pool_device.cuh: the same bits as
// pool_scores_kernel) and selects from there, so the pooled scores are neither written nor read
// back and one launch goes. They are written to pooled_out only when it is set (tests, LessIsMore,
// diagnostics). Logits rows share TopkParams::stride.
struct FusedPooling {
  const float* logits = nullptr;   // [B, G, stride, logits_heads] (the scoring pass's key-major logits)
  const float* lse = nullptr;      // [B, H] natural-log LSE over all keys
  float* pooled_out = nullptr;     // [B, R, stride] or null
  int32_t num_heads = 0;           // H (R divides H)
  int32_t num_kv_heads = 0;        // G, divides H
  int32_t logits_heads = 0;        // floats per key of a group block: g rounded up to 1, 2, 4 or 8
  int32_t reduce_max = 0;          // 0: sum, 1: max
};

// For each (b, r): the k = k_per_seq[b], or k(n) when k_per_seq is null (n = kv_len[b],
// DESIGN.md §2.1), largest of scores[b][r][0..n),
// ties to the lower index, written in ascending index order to indices[b][r][0..k), −1 after;
// row_lens[b][r] = k. A radix select over the order-preserving uint32 image of the floats
// (11 + 11 + 10 bit digits, one histogram pass each over chunks of `chunk` scores, one CTA per
// chunk), then one compaction pass (radix_topk_kernels.cu).
struct TopkParams {
  const float* scores = nullptr;     // [B, R, stride], rows 16-byte aligned (stride % 4 == 0); unused
                                     // (may be null) with fused_pooling
  const int32_t* kv_lens = nullptr;  // [B]
  int32_t* indices = nullptr;        // [B, R, k_max]
  int32_t* row_lens = nullptr;       // [B, R]
  uint32_t* error_flags = nullptr;   // DeviceError bits
  int64_t stride = 0;
  const int32_t* k_per_seq = nullptr;  // [B] or null (then the Budget below)
  TopkScratch scratch;
  int32_t first_digit_counted = 0;   // 1: the pooling kernel filled scratch.histograms with the first digit
  int64_t rho_ppm = 0, k_min = 0, k_round = 1;  // the Budget
  int32_t max_seq_len = 0;
  int32_t num_rows = 0;
  int32_t k_max = 0;
  int32_t chunk = 0;                 // scores per chunk CTA, a multiple of kTopkChunkQuantum
  int32_t max_chunks = 0;            // chunk · max_chunks >= max_seq_len
  int32_t by_rows = 0;               // 1: the row kernel (row_topk_kernel.cu), max_seq_len <= kRowTopkMaxKeys
  int32_t row_cluster = 1;           // the row kernel's CTAs per row (a cluster): 1, 2, 4 or 8
  int32_t fused_pooling = 0;         // 1: the row kernel pools its slices from `pool` (by_rows only)
  FusedPooling pool;
};
// The chunked select, or the row kernel when params.by_rows.
cudaError_t launch_radix_topk(const TopkParams& params, int batch, cudaStream_t stream);

// The Top-k with one cluster of row_cluster CTAs per row (row_topk_kernel.cu): rows of at most
// kRowTopkMaxKeys scores, each CTA holding the n-bit masks of its slice in shared memory and
// listing up to kRowTopkCandidates keys of the first digit's threshold bin there (more in the whole
// row: passes over the row instead). Uses scratch.histograms only (the pooled first digit).
constexpr int32_t kRowTopkMaxKeys = 262144;
constexpr int kRowTopkCandidates = 8192;
constexpr int32_t kRowTopkMaxCluster = 8;       // the portable cluster size
constexpr int32_t kRowTopkMinSliceKeys = 8192;  // a cluster's CTAs get at least this many keys each
// With the fused pooling a CTA also holds its slice's pooled scores (fp32) in shared memory and a
// shorter candidate list (a slice holds a part of the row's candidates; when its own do not fit, the
// digits after the first are counted by passes over the shared slice): slices of at most
// kFusedPoolSliceKeys keys leave room for two CTAs per SM (~108 KB each), kFusedPoolMaxSliceKeys is
// the most one CTA holds.
constexpr int32_t kFusedPoolSliceKeys = 16384;
constexpr int32_t kFusedPoolMaxSliceKeys = 32768;
constexpr int kFusedPoolCandidates = 3072;
// Keys of one CTA's slice: whole 32-key words, the row's words split over the cluster.
int32_t row_topk_slice_keys(int32_t max_seq_len, int32_t cluster);
// Whether `cluster` CTAs hold rows of up to max_seq_len keys for the fused pooling: a row the row
// kernel takes (<= kRowTopkMaxKeys) in slices of at most kFusedPoolMaxSliceKeys keys.
bool fused_pool_holds(int32_t max_seq_len, int32_t cluster);
size_t row_topk_smem_bytes(int32_t max_seq_len, int32_t cluster, bool fused_pooling = false);
cudaError_t launch_row_topk(const TopkParams& params, int batch, cudaStream_t stream);

}  // namespace kascade::cuda::detail
