// eval/runner.cpp — the eval runner (runner.h): samples × policies through the runtime, scored into
// a ResultsTable. Tested by tests/unit/eval/test_eval_runner.cpp.
#include "eval/runner.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "policy/cpu_backend.h"
#include "runtime/policy_setup.h"

namespace kascade::eval {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<AttentionPolicy>> build_policy(const Runtime& runtime, const EvalPolicy& policy) {
  auto setup = runtime::build_policy_config(runtime.config(), policy.attention);
  if (!setup.ok()) {
    Status s = setup.status();
    return s.with_context("policy '" + policy.name + "'");
  }
  auto made = make_policy(setup->config, make_cpu_backend());
  if (!made.ok()) {
    Status s = made.status();
    return s.with_context("policy '" + policy.name + "'");
  }
  return std::move(made).value();
}

// (prefill + decode attended) / (prefill + decode causal) over all layers.
double attended_fraction(const AttendedSummary& a) {
  AttendedCount total = a.prefill_total;
  total += a.decode_total;
  return total.fraction();
}

}  // namespace

TextCodec tokenizer_codec(std::shared_ptr<const Tokenizer> tokenizer) {
  TextCodec codec;
  codec.count = [tokenizer](std::string_view text) -> int64_t {
    auto ids = tokenizer->encode(text, /*add_special_tokens=*/true);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
  };
  codec.encode = [tokenizer](std::string_view text) { return tokenizer->encode(text, /*add_special_tokens=*/true); };
  codec.decode = [tokenizer](std::span<const int32_t> ids) {
    return tokenizer->decode(ids, /*skip_special_tokens=*/true);
  };
  return codec;
}

SampleSource suite_sample_source(Split split, uint64_t seed, TokenCounter count) {
  return [split, seed, count = std::move(count)](const std::string& task, int64_t length, int64_t index) {
    SampleRequest r;
    r.task = task;
    r.split = split;
    r.target_length = length;
    r.seed = seed;
    r.index = index;
    return generate_sample(r, count);
  };
}

std::string sample_outcome_json(const SampleOutcome& o) {
  nlohmann::ordered_json j = {{"task", o.task},
                              {"length", o.length},
                              {"policy", o.policy},
                              {"index", o.index},
                              {"prompt_tokens", o.prompt_tokens},
                              {"generated_tokens", o.generated_tokens},
                              {"finish", o.finish},
                              {"score", o.score},
                              {"keys_attended", o.keys_attended},
                              {"seconds", o.seconds},
                              {"prediction", o.prediction},
                              {"answers", o.answers}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status check_eval_plan(const Runtime& runtime, const EvalPlan& plan) {
  KC_CHECK_ARG(!plan.tasks.empty(), "eval: no tasks");
  KC_CHECK_ARG(!plan.lengths.empty(), "eval: no lengths");
  KC_CHECK_ARG(!plan.policies.empty(), "eval: no policies");
  KC_CHECK_ARG(plan.samples >= 1, "eval: samples per task and length is ", plan.samples, "; expected >= 1");
  std::set<std::string> names;
  for (const EvalPolicy& p : plan.policies) {
    KC_CHECK_ARG(!p.name.empty(), "eval: a policy has an empty name");
    KC_CHECK_ARG(names.insert(p.name).second, "eval: policy '", p.name, "' is listed twice");
    KC_ASSIGN_OR_RETURN(std::unique_ptr<AttentionPolicy> built, build_policy(runtime, p));
  }
  for (int64_t length : plan.lengths)
    KC_CHECK_ARG(length >= 1 && length <= runtime.max_context(), "eval: length ", length,
                 " is outside the model's context [1, ", runtime.max_context(), "] (--max-context)");
  return ok_status();
}

Result<EvalResult> run_eval(Runtime& runtime, const EvalPlan& plan, const TextCodec& codec, const SampleSource& source,
                            const EvalProgressFn& progress) {
  KC_RETURN_IF_ERROR(check_eval_plan(runtime, plan));
  KC_CHECK_ARG(codec.encode && codec.decode, "eval: the text codec lacks encode or decode");
  KC_CHECK_ARG(static_cast<bool>(source), "eval: no sample source");
  EvalResult result;
  EvalProgress state;
  state.total = static_cast<int64_t>(plan.tasks.size() * plan.lengths.size() * plan.policies.size()) * plan.samples;
  const auto start = Clock::now();
  for (const std::string& task : plan.tasks) {
    for (const int64_t length : plan.lengths) {
      const std::string cell = detail::concat("task ", task, ", length ", length);
      std::vector<Sample> samples;
      std::vector<std::vector<int32_t>> prompts;
      for (int64_t i = 0; i < plan.samples; ++i) {
        Result<Sample> sample = source(task, length, i);
        if (!sample.ok()) {
          Status s = sample.status();
          return s.with_context(detail::concat(cell, ", sample ", i));
        }
        Result<std::vector<int32_t>> ids = codec.encode(sample->prompt);
        if (!ids.ok()) {
          Status s = ids.status();
          return s.with_context(detail::concat(cell, ", sample ", i, ": encoding the prompt"));
        }
        KC_CHECK_ARG(!ids->empty(), cell, ", sample ", i, ": the prompt encodes to no tokens");
        KC_CHECK_ARG(sample->max_new_tokens >= 1, cell, ", sample ", i, ": max_new_tokens is ", sample->max_new_tokens);
        samples.push_back(std::move(sample).value());
        prompts.push_back(std::move(ids).value());
      }
      for (const EvalPolicy& policy : plan.policies) {
        KC_ASSIGN_OR_RETURN(std::unique_ptr<AttentionPolicy> built, build_policy(runtime, policy));
        KC_RETURN_IF_ERROR(runtime.set_policy(std::move(built)));
        for (size_t i = 0; i < samples.size(); ++i) {
          const Sample& sample = samples[i];
          const std::string where = detail::concat(cell, ", policy ", policy.name, ", sample ", i);
          GenerateOptions generate;
          generate.max_new_tokens = sample.max_new_tokens;
          generate.stop_at_eos = true;
          const auto t0 = Clock::now();
          Result<GenerateResult> out = runtime.generate({prompts[i]}, generate);
          if (!out.ok()) {
            Status s = out.status();
            return s.with_context(where);
          }
          const GeneratedSequence& seq = out->sequences[0];
          SampleOutcome o;
          o.task = task;
          o.length = length;
          o.policy = policy.name;
          o.index = static_cast<int64_t>(i);
          o.prompt_tokens = static_cast<int64_t>(prompts[i].size());
          o.generated_tokens = static_cast<int64_t>(seq.tokens.size());
          o.finish = finish_reason_name(seq.finish);
          o.answers = sample.answers;
          Result<std::string> text = codec.decode(seq.tokens);
          if (!text.ok()) {
            Status s = text.status();
            return s.with_context(where + ": decoding the generation");
          }
          o.prediction = std::move(text).value();
          Result<double> score = score_prediction(sample.scorer, o.prediction, sample.answers);
          if (!score.ok()) {
            Status s = score.status();
            return s.with_context(where + ": scoring");
          }
          o.score = *score;
          o.keys_attended = attended_fraction(out->stats.attended);
          KC_CHECK_ARG(std::isfinite(o.keys_attended), where, ": the policy recorded no attended keys");
          o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
          KC_RETURN_IF_ERROR(result.table.add_sample(task, length, policy.name, o.score, o.keys_attended));
          result.samples.push_back(std::move(o));
          state.done += 1;
          state.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
          state.last = &result.samples.back();
          if (progress) progress(state);
        }
      }
    }
  }
  return result;
}

}  // namespace kascade::eval
