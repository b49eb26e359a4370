// src/runtime/forward_session.h — what Runtime::generate and Runtime::teacher_forced drive: a batch
// of sequences in flight and the forward calls that extend them, on the CPU (session.h) or on the
// GPU (src/cuda/model/cuda_session.h). Header-only interface, so the CUDA library implements it
// without depending on the runtime library.
//   step         one forward call; the logits of the requested rows come back to the host.
//   step_sample  one forward call that picks one token per requesting item with the sampler of
//                runtime/sampler.h semantics (greedy, or inverse CDF at the given uniforms); the
//                CPU session samples the host logits, the CUDA session samples on the device and
//                copies back only the tokens.
//   submit_decode / collect_decode  pipelined decode (RuntimeOptions::pipelined_decode): a decode
//                call is launched before the previous call's tokens are read, its tokens taken from
//                that call's samples where the host does not know them yet ("fed"). The default
//                below runs each call at submit (the CPU session); the CUDA session overrides both
//                so that the host prepares step t + 1 while the GPU runs step t.
// Tested through tests/unit/runtime/ (CPU) and tests/cuda/test_gpu_runtime_*.cpp (CUDA).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "kascade/policy.h"
#include "kascade/runtime.h"
#include "kascade/status.h"
#include "model/forward.h"

namespace kascade::runtime {

// New tokens of one sequence in a call. Logits are wanted for the tokens at indices
// logits_from .. tokens.size() − 1 of this item (logits_from == tokens.size(): none).
struct CallItem {
  int32_t sequence = 0;              // index in the session
  std::span<const int32_t> tokens;   // >= 1 token
  int64_t logits_from = 0;
};

// One item of a pipelined decode call: the sequence and its token, or (fed) the token the previous
// submitted decode call sampled for that sequence.
struct DecodeItem {
  int32_t sequence = 0;
  int32_t token = 0;  // ignored when fed
  bool fed = false;
};

// The row of `sequence` in the previous submitted decode call (last_sequences: its sequences in row
// order), which a fed item reads; refused when that call did not sample the sequence. `who`
// prefixes the message. Inline: the CUDA session uses it too.
inline Result<int64_t> fed_row(const std::vector<int32_t>& last_sequences, int32_t sequence, const char* who) {
  const auto it = std::find(last_sequences.begin(), last_sequences.end(), sequence);
  KC_CHECK_ARG(it != last_sequences.end(), who, ": sequence ", sequence,
               " is fed but the previous decode call sampled no token for it");
  return static_cast<int64_t>(it - last_sequences.begin());
}

class ForwardSession {
 public:
  virtual ~ForwardSession() = default;
  // One forward call in `mode` over the items (distinct sequences). logits: the requested rows in
  // item order, [rows, vocab] fp32 (resized).
  virtual Status step(ForwardMode mode, const std::vector<CallItem>& items, std::vector<float>* logits) = 0;
  // One forward call; each item requests at most one logit row, and tokens (resized) gets one token
  // per requested row, in item order, sampled with `sampler` (its seed unused: uniforms[i] is row
  // i's uniform in [0, 1), read when temperature > 0).
  virtual Status step_sample(ForwardMode mode, const std::vector<CallItem>& items, const SamplerConfig& sampler,
                             std::span<const double> uniforms, std::vector<int32_t>* tokens) = 0;
  // Pipelined decode: a decode call of one token per item (distinct sequences), each item sampling
  // one token with `sampler` at uniforms[i]; returns without waiting for the tokens. A fed item
  // needs the previous submitted call to have sampled its sequence. At most two calls are in
  // flight (submitted, not collected); step and step_sample need none.
  // Whether submit_decode may be used; a session that cannot pipeline (the CUDA session with a
  // host-memory policy or a layer observer) is driven step by step — the same tokens.
  virtual bool can_pipeline_decode() const { return true; }
  virtual Status submit_decode(const std::vector<DecodeItem>& items, const SamplerConfig& sampler,
                               std::span<const double> uniforms) {
    KC_CHECK_ARG(ran_.size() < 2, "submit_decode: two decode calls are in flight already; collect one first");
    std::vector<int32_t> tokens(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      tokens[i] = items[i].token;
      if (!items[i].fed) continue;
      KC_ASSIGN_OR_RETURN(const int64_t row, fed_row(last_sequences_, items[i].sequence, "submit_decode"));
      tokens[i] = last_tokens_[static_cast<size_t>(row)];
    }
    std::vector<CallItem> call(items.size());
    for (size_t i = 0; i < items.size(); ++i) call[i] = {items[i].sequence, std::span<const int32_t>(&tokens[i], 1), 0};
    std::vector<int32_t> sampled;
    KC_RETURN_IF_ERROR(step_sample(ForwardMode::kDecode, call, sampler, uniforms, &sampled));
    last_sequences_.clear();
    for (const DecodeItem& item : items) last_sequences_.push_back(item.sequence);
    last_tokens_ = sampled;
    ran_.push_back(std::move(sampled));
    return ok_status();
  }
  // Waits for the oldest submitted decode call not yet collected; tokens (resized): its samples in
  // item order.
  virtual Status collect_decode(std::vector<int32_t>* tokens) {
    KC_CHECK_ARG(tokens != nullptr, "collect_decode: tokens is null");
    KC_CHECK_ARG(!ran_.empty(), "collect_decode: no decode call is in flight");
    *tokens = std::move(ran_.front());
    ran_.pop_front();
    return ok_status();
  }
  // Timings of all calls so far.
  virtual ForwardTimings timings() const = 0;
  // How the decode calls so far ran (CUDA graphs); the CPU session runs every call eagerly.
  virtual CudaGraphStats cuda_graph_stats() const { return cpu_graph_stats(); }

 private:
  // The default pipelining: the samples of the calls run at submit, and of the last one by sequence.
  std::deque<std::vector<int32_t>> ran_;
  std::vector<int32_t> last_sequences_, last_tokens_;
  static CudaGraphStats cpu_graph_stats() {
    CudaGraphStats stats;
    stats.eager_reason = "the CPU runtime has no CUDA graphs";
    return stats;
  }
};

// Host sampling of logit rows ([rows, vocab] fp32), the CPU Sampler's rule at the given uniforms.
Status sample_host_rows(const std::vector<float>& logits, int64_t vocab, const SamplerConfig& sampler,
                        std::span<const double> uniforms, std::vector<int32_t>* tokens);

// The checks every session makes of one item of a forward call: the sequence exists and appears
// once (seen: [sequences], marked here), it brings >= 1 token (exactly 1 in decode), logits_from is
// within the tokens, and the sequence stays within the tokens it was sized for. `who` prefixes the
// messages ("session", "cuda session"). lengths, max_tokens: [sequences]. Inline: the CUDA session
// uses it too.
inline Status check_call_item(ForwardMode mode, const CallItem& item, std::vector<bool>& seen,
                              const std::vector<int64_t>& lengths, const std::vector<int64_t>& max_tokens,
                              const char* who) {
  const int32_t n_seq = static_cast<int32_t>(lengths.size());
  KC_CHECK_ARG(item.sequence >= 0 && item.sequence < n_seq, who, ": sequence ", item.sequence, " outside [0, ", n_seq,
               ")");
  KC_CHECK_ARG(!seen[item.sequence], who, ": sequence ", item.sequence, " appears twice in one call");
  seen[item.sequence] = true;
  const int64_t n = static_cast<int64_t>(item.tokens.size());
  KC_CHECK_ARG(n >= 1, who, ": sequence ", item.sequence, " has no tokens in this call");
  KC_CHECK_ARG(mode != ForwardMode::kDecode || n == 1, who, ": decode call with ", n, " tokens for sequence ",
               item.sequence);
  KC_CHECK_ARG(item.logits_from >= 0 && item.logits_from <= n, who, ": logits_from ", item.logits_from,
               " outside [0, ", n, "]");
  const int64_t start = lengths[item.sequence];
  KC_CHECK_ARG(start + n <= max_tokens[item.sequence], who, ": sequence ", item.sequence, " would hold ", start + n,
               " tokens, more than the ", max_tokens[item.sequence], " it was sized for");
  return ok_status();
}

// Checks that each item requests at most one logit row and that there is one uniform per row;
// returns the row count (step_sample's contract). Inline: the CUDA session uses it too.
inline Result<int64_t> count_sampled_rows(const std::vector<CallItem>& items, size_t uniforms) {
  int64_t rows = 0;
  for (const CallItem& item : items) {
    const int64_t wanted = static_cast<int64_t>(item.tokens.size()) - item.logits_from;
    KC_CHECK_ARG(wanted == 0 || wanted == 1, "step_sample: sequence ", item.sequence, " requests ", wanted,
                 " logit rows; sampling takes at most one per sequence");
    rows += wanted;
  }
  KC_CHECK_ARG(static_cast<size_t>(rows) == uniforms, "step_sample: ", rows, " sampled rows but ", uniforms,
               " uniforms");
  return rows;
}

}  // namespace kascade::runtime
