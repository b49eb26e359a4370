// src/cuda/kascade/selection_kernels.h — argument blocks and cudaError_t launchers of the anchor
// selection kernels: pooling of post-softmax scores (pooled_scores_kernels.cu) and the exact
// radix Top-k (radix_topk_kernels.cu). Status-returning entry points: anchor_decode.h and
// radix_topk.h. Tested by tests/cuda/test_anchor_decode.cpp and test_radix_topk.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kascade::cuda::detail {

// Radix select digits over the uint32 image of a float: bits [31:21], [20:10], [9:0].
constexpr int kTopkBins = 2048;        // bins of the first two digits (the third has 1024)
constexpr int kTopkFirstShift = 21;

// pooled[b][r][j] = reduce over heads h of row r (heads [r·H/R, (r+1)·H/R)) of
//                   exp(logits[b][h][j] − lse[b][h]),  j < min(kv_len[b], max_seq_len).
struct PoolScoresParams {
  const float* logits = nullptr;   // [B, H, stride]
  const float* lse = nullptr;      // [B, H] natural-log LSE over all keys
  const int32_t* kv_lens = nullptr;  // [B]
  float* pooled = nullptr;         // [B, R, stride]
  int32_t* first_histograms = nullptr;  // [B, R, kTopkBins] or null: counts of the first radix
                                        // digit of the pooled scores are added here (zero before)
  int64_t stride = 0;              // multiple of 4
  int32_t max_seq_len = 0;
  int32_t num_heads = 0;           // H
  int32_t num_rows = 0;            // R, divides H
  int32_t reduce_max = 0;          // 0: sum, 1: max
};
cudaError_t launch_pool_scores(const PoolScoresParams& params, int batch, cudaStream_t stream);

// For each (b, r): the k = k_per_seq[b], or k(n) when k_per_seq is null (n = kv_len[b],
// DESIGN.md §2.1), largest of scores[b][r][0..n),
// ties to the lower index, written in ascending index order to indices[b][r][0..k), −1 after;
// row_lens[b][r] = k. A radix select over the order-preserving uint32 image of the floats
// (11 + 11 + 10 bit digits, one shared-memory histogram pass each), then one compaction pass.
struct TopkParams {
  const float* scores = nullptr;     // [B, R, stride], rows 16-byte aligned (stride % 4 == 0)
  const int32_t* kv_lens = nullptr;  // [B]
  int32_t* indices = nullptr;        // [B, R, k_max]
  int32_t* row_lens = nullptr;       // [B, R]
  uint32_t* error_flags = nullptr;   // DeviceError bits
  int64_t stride = 0;
  const int32_t* k_per_seq = nullptr;  // [B] or null (then the Budget below)
  int32_t* first_histograms = nullptr;  // [B, R, kTopkBins] from the pooling kernel, or null (the
                                        // kernel counts the first digit itself); left zeroed
  int64_t rho_ppm = 0, k_min = 0, k_round = 1;  // the Budget
  int32_t max_seq_len = 0;
  int32_t num_rows = 0;
  int32_t k_max = 0;
};
cudaError_t launch_radix_topk(const TopkParams& params, int batch, cudaStream_t stream);

}  // namespace kascade::cuda::detail
