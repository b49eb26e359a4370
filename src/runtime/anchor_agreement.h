// src/runtime/anchor_agreement.h — the scorer of the anchor refinement (`kascade calibrate --refine
// agreement`, docs/spec-notes.md): how closely the model with the kascade policy of one anchor set
// follows the dense model on the dev prompts.
//
//   reference = build_dense_reference(runtime, prompts, {tokens});   // once: dense policy
//   score     = score_agreement(runtime, reference, schedule);         // per candidate set
//
// The reference, per prompt: the dense model's greedy continuation of up to `tokens` − 1 tokens is
// generated, then teacher-forced (prompt prefill, one decode step per continuation token); the rows
// scored are the prompt's last position and every continuation position: `tokens` rows, fewer when
// the continuation stopped at an end-of-sequence token (its row, which predicts that token, is the
// last one scored) or at the context limit. Each row keeps the dense log-softmax and its argmax
// (ties: the lower id, as the greedy sampler), the target. A candidate is the same teacher-forced run
// with the kascade policy of its schedule; a row matches when its argmax is the target, and
// contributes KL(dense || kascade) of the two next-token distributions (fp64, clamped at 0 against
// rounding). The policy is "kascade" over the runtime's own budget (AttentionOptions: Top-k
// fraction, k_min, tile, rolling) — what `kascade eval --policies kascade` runs with a calibration
// file holding that set and the same flags. Runs on the runtime's device (CPU or CUDA: set_policy
// remakes the policy over the CUDA backend); each call replaces the runtime's policy.
// Tested by tests/unit/runtime/test_anchor_agreement.cpp (row comparison against hand-computed
// values; targets are the greedy tokens; dense scores 1 and KL 0; a candidate's score against a
// recomputation from the runtime's teacher-forced logits; refusals).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kascade/calibration.h"
#include "kascade/policy.h"
#include "kascade/runtime.h"
#include "runtime/calibration_collector.h"

namespace kascade::runtime {

struct AgreementOptions {
  int32_t tokens = 32;      // rows scored per prompt (>= 1)
  bool stop_at_eos = true;  // the dense continuation stops at the model's end-of-sequence tokens
};

struct DenseReference {
  struct Prompt {
    std::string name;
    std::vector<int32_t> prompt;        // the prompt tokens
    std::vector<int32_t> continuation;  // the dense greedy tokens fed back (rows − 1 of them)
    std::vector<int32_t> targets;       // [rows] the dense argmax of each scored row
    std::vector<float> log_probs;       // [rows, vocab] the dense log-softmax of each scored row
  };
  int64_t vocab = 0;
  std::vector<Prompt> prompts;
  int64_t steps() const;  // rows over all prompts
};

// Called after each prompt's run (the reference's generate + teacher-forced pair counts as one).
using PromptRunFn = std::function<void()>;

// The kascade PolicyConfig of `schedule` with the runtime's budget settings.
Result<PolicyConfig> kascade_policy_config(const Runtime& runtime, const Schedule& schedule);

// Installs the dense policy and builds the reference (refuses no prompts, tokens < 1).
Result<DenseReference> build_dense_reference(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                             const AgreementOptions& options, const PromptRunFn& on_prompt = {});

// One row: whether argmax(logits) (ties: lower id) equals `target`, and KL(dense || softmax(logits)).
struct RowComparison {
  bool match = false;
  double kl = 0.0;
};
// dense_log_probs, logits: [vocab].
RowComparison compare_row(std::span<const float> dense_log_probs, int32_t target, std::span<const float> logits);

// Installs the kascade policy of `schedule` and scores it against `reference`.
Result<calib::AgreementScore> score_agreement(Runtime& runtime, const DenseReference& reference,
                                              const Schedule& schedule, const PromptRunFn& on_prompt = {});

}  // namespace kascade::runtime
