// src/runtime/anchor_agreement.cpp — the refinement's scorer (anchor_agreement.h): the dense
// reference, the kascade policy of a candidate set over the runtime's budget, teacher-forced runs
// and the row comparison (argmax match, KL).
// Tested by tests/unit/runtime/test_anchor_agreement.cpp.
#include "runtime/anchor_agreement.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kascade/backends.h"
#include "runtime/policy_setup.h"

namespace kascade::runtime {
namespace {

// The runtime's attention options for `policy` (its budget and tile kept, no schedule source).
AttentionOptions attention_for(const Runtime& runtime, const char* policy, const std::vector<int32_t>& anchors) {
  AttentionOptions a = runtime.options().attention;
  a.policy = policy;
  a.calibration_file.clear();
  a.num_anchors = 0;
  a.anchors = anchors;
  return a;
}

Status install(Runtime& runtime, const PolicyConfig& config) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<AttentionPolicy> policy, make_policy(config, make_cpu_backend()));
  return runtime.set_policy(std::move(policy));
}

int32_t argmax(std::span<const float> values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());  // first max
}

// log-softmax in fp64.
std::vector<double> log_softmax(std::span<const float> logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v) - top);
  const double log_z = top + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
  return out;
}

// The teacher-forced rows of one reference prompt under the runtime's current policy.
Result<TeacherForcedOutput> run_rows(Runtime& runtime, const DenseReference::Prompt& p) {
  TeacherForcedInput in;
  in.prompt = p.prompt;
  in.continuation = p.continuation;
  in.first_logit_position = static_cast<int64_t>(p.prompt.size()) - 1;
  Result<std::vector<TeacherForcedOutput>> out = runtime.teacher_forced({in});
  if (!out.ok()) {
    Status s = out.status();
    return s.with_context("prompt '" + p.name + "'");
  }
  const int64_t rows = static_cast<int64_t>(p.continuation.size()) + 1;
  KC_CHECK_ARG((*out)[0].rows == rows, "prompt '", p.name, "': ", (*out)[0].rows, " logit rows, expected ", rows);
  return std::move((*out)[0]);
}

}  // namespace

int64_t DenseReference::steps() const {
  int64_t n = 0;
  for (const Prompt& p : prompts) n += static_cast<int64_t>(p.targets.size());
  return n;
}

Result<PolicyConfig> kascade_policy_config(const Runtime& runtime, const Schedule& schedule) {
  KC_ASSIGN_OR_RETURN(PolicySetup setup,
                      build_policy_config(runtime.config(), attention_for(runtime, "kascade", schedule.anchors)));
  setup.config.schedule = schedule;
  KC_RETURN_IF_ERROR(validate_policy_config(setup.config));
  return setup.config;
}

RowComparison compare_row(std::span<const float> dense_log_probs, int32_t target, std::span<const float> logits) {
  RowComparison r;
  r.match = argmax(logits) == target;
  const std::vector<double> q = log_softmax(logits);
  double kl = 0.0;
  for (size_t v = 0; v < q.size(); ++v) {
    const double lp = dense_log_probs[v];
    const double p = std::exp(lp);
    if (p > 0.0) kl += p * (lp - q[v]);
  }
  r.kl = std::max(0.0, kl);  // KL >= 0; a negative sum is rounding
  return r;
}

Result<DenseReference> build_dense_reference(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                             const AgreementOptions& options, const PromptRunFn& on_prompt) {
  KC_CHECK_ARG(!prompts.empty(), "agreement reference: no prompts");
  KC_CHECK_ARG(options.tokens >= 1, "agreement reference: tokens is ", options.tokens, "; expected >= 1");
  KC_ASSIGN_OR_RETURN(PolicySetup dense, build_policy_config(runtime.config(), attention_for(runtime, "dense", {})));
  KC_RETURN_IF_ERROR(install(runtime, dense.config));
  DenseReference ref;
  ref.vocab = runtime.config().vocab_size;
  const size_t vocab = static_cast<size_t>(ref.vocab);
  GenerateOptions generate;
  generate.max_new_tokens = options.tokens - 1;
  generate.stop_at_eos = options.stop_at_eos;  // greedy: the default sampler
  for (const CalibrationPrompt& cp : prompts) {
    DenseReference::Prompt p;
    p.name = cp.name;
    p.prompt = cp.tokens;
    if (generate.max_new_tokens > 0) {
      Result<GenerateResult> g = runtime.generate({cp.tokens}, generate);
      if (!g.ok()) {
        Status s = g.status();
        return s.with_context("agreement reference, prompt '" + cp.name + "'");
      }
      p.continuation = g->sequences[0].tokens;
    }
    Result<TeacherForcedOutput> rows = run_rows(runtime, p);
    if (!rows.ok()) {
      Status s = rows.status();
      return s.with_context("agreement reference");
    }
    p.log_probs.resize(static_cast<size_t>(rows->rows) * vocab);
    for (int64_t r = 0; r < rows->rows; ++r) {
      const std::span<const float> row(rows->logits.data() + static_cast<size_t>(r) * vocab, vocab);
      p.targets.push_back(argmax(row));
      const std::vector<double> lp = log_softmax(row);
      std::transform(lp.begin(), lp.end(), p.log_probs.begin() + static_cast<ptrdiff_t>(r * ref.vocab),
                     [](double v) { return static_cast<float>(v); });
    }
    ref.prompts.push_back(std::move(p));
    if (on_prompt) on_prompt();
  }
  return ref;
}

Result<calib::AgreementScore> score_agreement(Runtime& runtime, const DenseReference& reference,
                                              const Schedule& schedule, const PromptRunFn& on_prompt) {
  KC_CHECK_ARG(!reference.prompts.empty(), "agreement: the reference holds no prompts");
  KC_CHECK_ARG(reference.vocab == runtime.config().vocab_size, "agreement: the reference has a vocabulary of ",
               reference.vocab, ", the model ", runtime.config().vocab_size);
  KC_ASSIGN_OR_RETURN(const PolicyConfig config, kascade_policy_config(runtime, schedule));
  KC_RETURN_IF_ERROR(install(runtime, config));
  const size_t vocab = static_cast<size_t>(reference.vocab);
  calib::AgreementScore score;
  double kl_sum = 0.0;
  for (const DenseReference::Prompt& p : reference.prompts) {
    KC_ASSIGN_OR_RETURN(const TeacherForcedOutput rows, run_rows(runtime, p));
    for (int64_t r = 0; r < rows.rows; ++r) {
      const size_t at = static_cast<size_t>(r) * vocab;
      const RowComparison c = compare_row(std::span<const float>(p.log_probs.data() + at, vocab),
                                          p.targets[static_cast<size_t>(r)],
                                          std::span<const float>(rows.logits.data() + at, vocab));
      score.matches += c.match ? 1 : 0;
      kl_sum += c.kl;
      score.steps += 1;
    }
    if (on_prompt) on_prompt();
  }
  score.mean_kl = kl_sum / static_cast<double>(score.steps);
  return score;
}

}  // namespace kascade::runtime
