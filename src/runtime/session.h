// src/runtime/session.h — a batch of sequences in flight: their KV cache and the forward calls that
// extend them. Runtime::generate and Runtime::teacher_forced (src/runtime/runtime.cpp) both drive
// a Session; it owns the glue of DESIGN.md §3's data flow for one call:
//   reserve pages → policy.begin_forward({mode, q_lens, kv_lens}) → forward (each layer stores its
//   K/V rows into the cache and attends through the policy) → commit the new lengths.
// Tested by tests/unit/runtime/test_runtime_hf_parity.cpp and test_runtime_generate.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kascade/policy.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/forward_session.h"
#include "runtime/kv_cache.h"

namespace kascade::runtime {

// The CPU implementation of ForwardSession (forward_session.h).
class Session final : public ForwardSession {
 public:
  // A cache for `num_sequences` sequences of at most max_tokens[s] tokens each.
  static Result<std::unique_ptr<Session>> create(const Model& model, AttentionPolicy& policy,
                                                 const std::vector<int64_t>& max_tokens, int32_t page_size,
                                                 DType kv_dtype, ForwardObserver* observer);

  // One forward call in `mode` over the items (distinct sequences). logits: the requested rows in
  // item order, [rows, vocab] fp32 (resized).
  Status step(ForwardMode mode, const std::vector<CallItem>& items, std::vector<float>* logits) override;
  // step, then sample_host_rows over the logits.
  Status step_sample(ForwardMode mode, const std::vector<CallItem>& items, const SamplerConfig& sampler,
                     std::span<const double> uniforms, std::vector<int32_t>* tokens) override;

  // Committed tokens of a sequence.
  int64_t length(int32_t sequence) const { return lengths_[static_cast<size_t>(sequence)]; }
  int32_t num_sequences() const { return static_cast<int32_t>(lengths_.size()); }
  // Timings of all calls so far.
  ForwardTimings timings() const override { return workspace_.timings; }

 private:
  Session(const Model& model, AttentionPolicy& policy, ForwardObserver* observer)
      : model_(&model), policy_(&policy), observer_(observer) {}
  const Model* model_;
  AttentionPolicy* policy_;
  ForwardObserver* observer_;
  std::unique_ptr<PagedKvCache> cache_;
  std::vector<int32_t> cache_ids_;   // [num_sequences]
  std::vector<int64_t> lengths_;     // [num_sequences]
  std::vector<int64_t> max_tokens_;  // [num_sequences]
  ForwardWorkspace workspace_;
};

}  // namespace kascade::runtime
