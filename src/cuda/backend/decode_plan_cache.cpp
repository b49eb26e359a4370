// src/cuda/backend/decode_plan_cache.cpp — lazily made decode plans and their workspaces
// (decode_plan_cache.h). Tested through the backend (tests/cuda/test_backend_*.cpp).
#include "cuda/backend/decode_plan_cache.h"

#include <algorithm>

#include "cuda/backend/device_memory.h"
#include "cuda/common/plan_support.h"

namespace kascade::cuda {
namespace {

template <typename Keyed>
auto* find_entry(std::vector<Keyed>& entries, const DecodeKey& key, int32_t variant) {
  for (auto& e : entries) {
    if (e.key == key && e.variant == variant) return e.entry.get();
  }
  return static_cast<decltype(entries.front().entry.get())>(nullptr);
}

}  // namespace

DecodePlanCache::DecodePlanCache(int32_t max_seq_len, const Budget& budget, cudaStream_t stream, bool programmatic)
    : max_seq_len_(max_seq_len), budget_(budget), stream_(stream), programmatic_(programmatic) {}

DecodeShape DecodePlanCache::shape_of(const DecodeKey& key) const {
  DecodeShape s;
  set_plan_heads(key, key.plan_batch, s);
  s.page_size = key.page_size;
  s.max_seq_len = max_seq_len_;
  return s;
}

Result<BackendBuffer> DecodePlanCache::make_workspace(const WorkspaceLayout& layout, const char* what) {
  KC_ASSIGN_OR_RETURN(BackendBuffer workspace, device_allocate(std::max<size_t>(layout.total_bytes, 1), what));
  ++allocations_;
  KC_RETURN_IF_ERROR(initialize_workspace(layout, workspace.data(), stream_));
  workspaces_.emplace_back(workspace.data(), layout);
  return workspace;
}

Result<const DecodePlanCache::Dense*> DecodePlanCache::dense(const DecodeKey& key) {
  if (const Dense* found = find_entry(dense_, key, 0)) return found;
  auto entry = std::make_unique<Dense>();
  KC_ASSIGN_OR_RETURN(entry->plan, plan_dense_decode(shape_of(key)));
  entry->plan.pass.programmatic = programmatic_;
  KC_ASSIGN_OR_RETURN(entry->workspace, make_workspace(entry->plan.workspace, "the dense decode workspace"));
  const Dense* result = entry.get();
  dense_.push_back({key, 0, std::move(entry)});
  return result;
}

Result<const DecodePlanCache::Sparse*> DecodePlanCache::sparse(const DecodeKey& key, IndexGranularity granularity) {
  const int32_t variant = static_cast<int32_t>(granularity);
  if (const Sparse* found = find_entry(sparse_, key, variant)) return found;
  auto entry = std::make_unique<Sparse>();
  const int32_t k_plan = static_cast<int32_t>(std::max<int64_t>(1, budget_k(max_seq_len_, budget_)));
  KC_ASSIGN_OR_RETURN(entry->plan, plan_sparse_decode(shape_of(key), granularity, k_plan));
  entry->plan.pass.programmatic = programmatic_;
  KC_ASSIGN_OR_RETURN(entry->workspace, make_workspace(entry->plan.workspace, "the sparse decode workspace"));
  const Sparse* result = entry.get();
  sparse_.push_back({key, variant, std::move(entry)});
  return result;
}

Result<const DecodePlanCache::Anchor*> DecodePlanCache::anchor(const DecodeKey& key, const ScorePooling& pooling,
                                                               bool dense_output) {
  const int32_t variant =
      pooling.num_rows * 4 + (pooling.reduce == ScoreReduce::kMax ? 2 : 0) + (dense_output ? 1 : 0);
  if (const Anchor* found = find_entry(anchor_, key, variant)) return found;
  auto entry = std::make_unique<Anchor>();
  AnchorOptions options;
  options.pooling = pooling;
  options.budget = budget_;
  options.dense_output = dense_output;
  KC_ASSIGN_OR_RETURN(entry->plan, plan_anchor_decode(shape_of(key), options));
  entry->plan.scoring.programmatic = programmatic_;
  entry->plan.sparse.programmatic = programmatic_;
  KC_ASSIGN_OR_RETURN(entry->workspace, make_workspace(entry->plan.workspace, "the anchor decode workspace"));
  const Anchor* result = entry.get();
  anchor_.push_back({key, variant, std::move(entry)});
  return result;
}

void DecodePlanCache::error_words(std::vector<uint32_t*>* words) const {
  for (const auto& [workspace, layout] : workspaces_) words->push_back(detail::workspace_at<uint32_t>(workspace, layout.error_flags));
}

}  // namespace kascade::cuda
