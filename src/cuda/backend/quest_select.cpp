// src/cuda/backend/quest_select.cpp — Quest decode selection on the GPU (quest_select.h).
// Tested by tests/cuda/test_backend_ops.cpp and test_backend_policies.cpp.
#include "cuda/backend/quest_select.h"

#include "cuda/backend/baseline_kernels.h"
#include "cuda/common/cuda_status.h"

namespace kascade::cuda {

Status QuestSelector::run(const DecodeKey& key, const QueryBatch& q, const PagedKv& kv, int32_t page_size,
                          const int32_t* k_device, const DecodeIndexRows& rows, int32_t max_batch,
                          int32_t max_seq_len, uint32_t* error_flags, int64_t* allocations, cudaStream_t stream) {
  constexpr const char* kOp = "select_quest_decode";
  KC_CHECK_ARG(page_size >= 1, kOp, ": page_size is ", page_size, "; expected >= 1");
  KC_CHECK_ARG(rows.granularity == IndexGranularity::kPerQueryHead, kOp, ": rows must be per query head");
  KC_CHECK_ARG(q.q != nullptr && kv.k != nullptr && kv.block_table != nullptr && kv.kv_lens != nullptr, kOp,
               ": q.q, kv.k, kv.block_table and kv.kv_lens must be non-null");
  KC_CHECK_ARG(kv.num_pages >= 1, kOp, ": kv.num_pages is ", kv.num_pages, "; expected >= 1");
  const int64_t pages = (static_cast<int64_t>(max_seq_len) + page_size - 1) / page_size;
  const size_t entries = static_cast<size_t>(max_batch) * key.num_heads * static_cast<size_t>(pages);
  KC_RETURN_IF_ERROR(scores_.ensure(entries * sizeof(double), "Quest page scores", allocations));
  KC_RETURN_IF_ERROR(taken_.ensure(entries, "Quest page flags", allocations));

  detail::QuestScoreParams score;
  score.q = q.q;
  score.k = kv.k;
  score.block_table = kv.block_table;
  score.kv_lens = kv.kv_lens;
  score.scores = scores_.as<double>();
  score.error_flags = error_flags;
  score.score_stride = pages;
  score.max_pages_per_seq = kv.max_pages_per_seq;
  score.num_pages = kv.num_pages;
  score.kv_page_size = kv.page_size;
  score.quest_page = page_size;
  score.num_heads = key.num_heads;
  score.num_kv_heads = key.num_kv_heads;
  score.head_dim = key.head_dim;
  score.max_seq_len = max_seq_len;
  score.element = key.dtype == DType::kBF16 ? detail::KvElement::kBF16 : detail::KvElement::kF16;
  KC_RETURN_IF_ERROR(
      cuda_status(detail::launch_quest_page_scores(score, q.batch, stream), "launch of quest_page_scores_kernel"));

  detail::QuestSelectParams select;
  select.scores = scores_.as<double>();
  select.kv_lens = kv.kv_lens;
  select.k_per_seq = k_device;
  select.taken = taken_.as<uint8_t>();
  select.indices = rows.indices;
  select.row_lens = rows.row_lens;
  select.error_flags = error_flags;
  select.score_stride = pages;
  select.quest_page = page_size;
  select.num_heads = key.num_heads;
  select.k_max = rows.k_max;
  select.max_seq_len = max_seq_len;
  return cuda_status(detail::launch_quest_select(select, q.batch, stream), "launch of quest_select_kernel");
}

}  // namespace kascade::cuda
