// src/cuda/backend/prefill_plan_cache.cpp — prefill plans per call shape and their shared, growing
// workspace (prefill_plan_cache.h). Tested by tests/cuda/test_backend_ops.cpp and
// test_backend_prefill.cpp.
#include "cuda/backend/prefill_plan_cache.h"

#include <algorithm>
#include <limits>

#include "cuda/backend/device_memory.h"

namespace kascade::cuda {
namespace {

bool same_shape(const PrefillShape& a, const PrefillShape& b) {
  return a.dtype == b.dtype && a.batch == b.batch && a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.max_total_q == b.max_total_q && a.max_q_len == b.max_q_len &&
         a.max_kv_len == b.max_kv_len && a.tile_size == b.tile_size;
}

}  // namespace

int32_t planned_total_q(int64_t total_q, int32_t num_heads, int32_t max_batch, int32_t max_seq_len) {
  const int64_t row_limit = std::numeric_limits<int32_t>::max() / std::max(num_heads, 1);
  const int64_t cap = std::min<int64_t>(int64_t{max_batch} * max_seq_len, row_limit);
  int64_t rounded = 16;
  while (rounded < total_q) rounded *= 2;
  rounded = std::max(std::min(rounded, cap), total_q);
  return static_cast<int32_t>(std::min<int64_t>(rounded, std::numeric_limits<int32_t>::max()));
}

PrefillPlanCache::PrefillPlanCache(int32_t max_batch, int32_t max_seq_len, cudaStream_t stream)
    : max_batch_(max_batch), max_seq_len_(max_seq_len), stream_(stream) {}

PrefillShape PrefillPlanCache::shape_of(const PrefillKey& key) const {
  PrefillShape s;
  set_plan_heads(key, max_batch_, s);
  s.max_total_q = planned_total_q(key.total_q, key.num_heads, max_batch_, max_seq_len_);
  s.max_q_len = std::min(s.max_total_q, max_seq_len_);
  s.max_kv_len = max_seq_len_;
  s.tile_size = key.selection ? key.tile_size : 1;
  return s;
}

Status PrefillPlanCache::grow_workspace(const PrefillPlan& plan) {
  const size_t bytes = std::max<size_t>(plan.workspace.total_bytes, 1);
  if (workspace_.data() != nullptr && workspace_.bytes() >= bytes) return ok_status();
  if (workspace_.data() != nullptr) {
    // Keep the bits the old word holds; this also waits for the kernels still using it.
    KC_ASSIGN_OR_RETURN(const uint32_t bits, read_prefill_errors(*plans_.front(), workspace_.data(), stream_));
    carried_errors_ |= bits;
  }
  workspace_.reset();
  KC_ASSIGN_OR_RETURN(workspace_, device_allocate(bytes, "the prefill workspace"));
  ++allocations_;
  return initialize_prefill_workspace(plan, workspace_.data(), stream_);
}

Result<PrefillPlanCache::Planned> PrefillPlanCache::plan(const PrefillKey& key) {
  const PrefillShape shape = shape_of(key);
  for (const auto& p : plans_) {
    if (p->selection != key.selection || !same_shape(p->shape, shape)) continue;
    KC_RETURN_IF_ERROR(grow_workspace(*p));  // a no-op unless an earlier allocation failed
    return Planned{p.get(), workspace_.data()};
  }
  PrefillPlanOptions options;
  options.selection = key.selection;
  KC_ASSIGN_OR_RETURN(PrefillPlan made, plan_prefill(shape, options));
  if (!plans_.empty() && made.workspace.error_flags != plans_.front()->workspace.error_flags) {
    return internal_error("prefill plans put their error word at offsets ", plans_.front()->workspace.error_flags,
                          " and ", made.workspace.error_flags, "; the cuda backend shares one workspace among them");
  }
  auto entry = std::make_unique<PrefillPlan>(made);
  KC_RETURN_IF_ERROR(grow_workspace(*entry));
  plans_.push_back(std::move(entry));
  return Planned{plans_.back().get(), workspace_.data()};
}

uint32_t* PrefillPlanCache::error_word() const {
  if (workspace_.data() == nullptr) return nullptr;
  return reinterpret_cast<uint32_t*>(static_cast<char*>(workspace_.data()) + plans_.front()->workspace.error_flags);
}

uint32_t PrefillPlanCache::take_carried_errors() {
  const uint32_t bits = carried_errors_;
  carried_errors_ = 0;
  return bits;
}

}  // namespace kascade::cuda
