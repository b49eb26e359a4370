// src/cuda/backend/baseline_kernels.h — argument blocks and cudaError_t launchers of the baseline
// selection kernels (baseline_kernels.cu): Quest page scoring and page selection, and the score
// gather LessIsMore's host merge reads. Simple kernels, neither tuned nor graph-safe by intent
// (DESIGN.md §3: baseline selection exists for accuracy studies). Status-returning entry points:
// quest_select.h and lessismore_select.h.
// Tested by tests/cuda/test_backend_policies.cpp and test_backend_ops.cpp (against the CPU backend).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kascade::cuda::detail {

enum class KvElement : int { kF16 = 0, kBF16 = 1 };

// Quest page scores of one decode step. For sequence b, KV group g and quest page p (keys
// [p·quest_page, min(n, (p+1)·quest_page)), n = kv_len[b]): per channel c the min and max of the
// page's keys (fp32), then for each query head h of the group
//   score[b][h][p] = Σ_c max(q_c·min_c, q_c·max_c)
// in fp64, channel by channel in ascending order with round-to-nearest products and sums: the same
// operations, in the same order, as the CPU backend (bit-identical scores).
struct QuestScoreParams {
  const void* q = nullptr;               // [B, H, d] element type
  const void* k = nullptr;               // [num_pages, kv_page_size, G, d] element type
  const int32_t* block_table = nullptr;  // [B, max_pages_per_seq]
  const int32_t* kv_lens = nullptr;      // [B]
  double* scores = nullptr;              // [B, H, score_stride]
  uint32_t* error_flags = nullptr;       // DeviceError bits (cuda/common/device_errors.h)
  int64_t score_stride = 0;              // >= ceil(max_seq_len / quest_page)
  int32_t max_pages_per_seq = 0;
  int32_t num_pages = 0;
  int32_t kv_page_size = 0;
  int32_t quest_page = 0;
  int32_t num_heads = 0;     // H
  int32_t num_kv_heads = 0;  // G
  int32_t head_dim = 0;      // d <= 128
  int32_t max_seq_len = 0;   // kv_len outside [0, max_seq_len] is flagged and clamped
  KvElement element = KvElement::kF16;
};
// Grid (ceil(score_stride / pages per block), G, B).
cudaError_t launch_quest_page_scores(const QuestScoreParams& params, int batch, cudaStream_t stream);

// Quest selection of one decode step: for each (b, h), pages in descending score (ties: lower page)
// are taken whole while the keys of the pages taken before them number < k = k_per_seq[b]; the
// keys of the taken pages are written in ascending order to indices[b][h][0..len), −1 after, and
// row_lens[b][h] = len. A k outside [0, n] or a len above k_max is flagged (kErrorRowLen) and
// clamped.
struct QuestSelectParams {
  const double* scores = nullptr;      // [B, H, score_stride]
  const int32_t* kv_lens = nullptr;    // [B]
  const int32_t* k_per_seq = nullptr;  // [B]
  uint8_t* taken = nullptr;            // [B, H, score_stride] scratch
  int32_t* indices = nullptr;          // [B, H, k_max]
  int32_t* row_lens = nullptr;         // [B, H]
  uint32_t* error_flags = nullptr;
  int64_t score_stride = 0;
  int32_t quest_page = 0;
  int32_t num_heads = 0;
  int32_t k_max = 0;
  int32_t max_seq_len = 0;
};
// Grid (H, B).
cudaError_t launch_quest_select(const QuestSelectParams& params, int batch, cudaStream_t stream);

// gathered[b][r][i] = scores[b][r][indices[b][r][i]] for i < row_lens[b][r] (0 after).
struct GatherScoresParams {
  const float* scores = nullptr;     // [B, R, score_stride]
  const int32_t* indices = nullptr;  // [B, R, k_max]
  const int32_t* row_lens = nullptr; // [B, R]
  float* gathered = nullptr;         // [B, R, k_max]
  int64_t score_stride = 0;
  int32_t num_rows = 0;
  int32_t k_max = 0;
};
// Grid (ceil(k_max / threads), R, B).
cudaError_t launch_gather_scores(const GatherScoresParams& params, int batch, cudaStream_t stream);

}  // namespace kascade::cuda::detail
