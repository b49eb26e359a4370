// src/runtime/cache_attention.h — the runtime's LayerAttention (src/model/forward.h): stores each
// layer's new K/V rows into the paged KV cache and runs the attention policy over the cache.
//
// One object per forward call: it is built from the call's sequences (cache ids), the number of
// new tokens of each and their start positions; the pages must already be reserved
// (PagedKvCache::reserve). The policy must have seen begin_forward() for the same call.
// Tested by tests/unit/runtime/test_runtime_hf_parity.cpp (runtime logits against Hugging Face for
// several page sizes and chunkings, every policy) and test_runtime_generate.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/policy.h"
#include "model/forward.h"
#include "runtime/kv_cache.h"

namespace kascade::runtime {

class CacheAttention final : public LayerAttention {
 public:
  // seqs: cache sequence ids; starts[b]: position of the first new token (= the sequence's
  // committed length); q_lens[b]: new tokens. Builds the block tables for start + q_len keys.
  static Result<CacheAttention> create(PagedKvCache& cache, AttentionPolicy& policy, std::vector<int32_t> seqs,
                                       std::vector<int64_t> starts, std::vector<int32_t> q_lens);

  Status store(int32_t layer, const float* k, const float* v) override;
  Status attend(int32_t layer, const QueryBatch& q, float scale, float* out) override;

  const std::vector<int32_t>& kv_lens() const { return kv_lens_; }

 private:
  CacheAttention(PagedKvCache& cache, AttentionPolicy& policy) : cache_(&cache), policy_(&policy) {}
  PagedKvCache* cache_;
  AttentionPolicy* policy_;
  std::vector<int32_t> seqs_;
  std::vector<int64_t> starts_;
  std::vector<int32_t> q_lens_;
  std::vector<int32_t> kv_lens_;  // [batch] start + q_len
  BlockTables tables_;
};

}  // namespace kascade::runtime
