// src/runtime/cache_attention.cpp — LayerAttention over the paged KV cache and the attention
// policy (src/runtime/cache_attention.h). Tested through tests/unit/runtime/.
#include "runtime/cache_attention.h"

#include <limits>

namespace kascade::runtime {

Result<CacheAttention> CacheAttention::create(PagedKvCache& cache, AttentionPolicy& policy, std::vector<int32_t> seqs,
                                              std::vector<int64_t> starts, std::vector<int32_t> q_lens) {
  KC_CHECK_ARG(!seqs.empty() && seqs.size() == starts.size() && seqs.size() == q_lens.size(),
               "cache attention: ", seqs.size(), " sequences, ", starts.size(), " starts, ", q_lens.size(), " q_lens");
  CacheAttention a(cache, policy);
  std::vector<int64_t> ends(seqs.size());
  a.kv_lens_.resize(seqs.size());
  for (size_t b = 0; b < seqs.size(); ++b) {
    KC_CHECK_ARG(starts[b] >= 0 && q_lens[b] >= 1, "cache attention: sequence ", b, " start ", starts[b], " q_len ",
                 q_lens[b]);
    ends[b] = starts[b] + q_lens[b];
    KC_CHECK_ARG(ends[b] <= std::numeric_limits<int32_t>::max(), "cache attention: ", ends[b],
                 " keys exceed the int32 range of kv_lens");
    a.kv_lens_[b] = static_cast<int32_t>(ends[b]);
  }
  KC_ASSIGN_OR_RETURN(a.tables_, cache.block_tables(seqs, ends));
  a.seqs_ = std::move(seqs);
  a.starts_ = std::move(starts);
  a.q_lens_ = std::move(q_lens);
  return a;
}

Status CacheAttention::store(int32_t layer, const float* k, const float* v) {
  const int64_t row = static_cast<int64_t>(cache_->config().num_kv_heads) * cache_->config().head_dim;
  int64_t packed = 0;
  for (size_t b = 0; b < seqs_.size(); ++b) {
    KC_RETURN_IF_ERROR(
        cache_->write(layer, seqs_[b], starts_[b], q_lens_[b], k + packed * row, v + packed * row));
    packed += q_lens_[b];
  }
  return ok_status();
}

Status CacheAttention::attend(int32_t layer, const QueryBatch& q, float scale, float* out) {
  KC_CHECK_ARG(q.batch == static_cast<int32_t>(seqs_.size()), "cache attention: queries of ", q.batch,
               " sequences for a call of ", seqs_.size());
  KC_ASSIGN_OR_RETURN(PagedKv kv, cache_->view(layer, tables_, kv_lens_.data()));
  AttentionParams params;
  params.scale = scale;
  AttentionOutput o;
  o.o = out;
  o.dtype = DType::kF32;
  return policy_->attention(layer, q, kv, params, o);
}

}  // namespace kascade::runtime
