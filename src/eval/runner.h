// eval/runner.h — the eval runner of `kascade eval`: samples of the task suite (eval split) run
// through the CPU runtime under each attention policy (greedy, the task's max_new_tokens, stop at
// the model's end-of-sequence tokens), scored with the suite's scorers, with the fraction of keys
// attended from the policy's statistics, into a ResultsTable (task × length × policy).
//
// Order: for each task, for each length, the N samples are generated once, then every policy runs
// them one at a time (one sequence per generate call, so each sample has its own attended
// fraction). Policies are built for the runtime's model up front (check_policies), so a bad policy
// (e.g. kascade without anchors) fails before any sample runs; the runtime's policy is replaced as
// the run goes (it holds the last one afterwards).
// keys_attended of a sample = (attended in prefill + decode) / (causal range in prefill + decode),
// summed over all layers and heads: dense is exactly 1.
//
// Text goes through a TextCodec (the model's tokenizer in `kascade eval`; tests plug a stand-in),
// samples through a SampleSource (the suite; tests plug stand-in tasks).
// Tested by tests/unit/eval/test_eval_runner.cpp (tiny checkpoint, stand-in codec and tasks: counts,
// accuracies against the test's own scoring of the predictions, predictions against a separate
// greedy run, dense fraction 1, streaming fraction against a closed-form count, JSON output).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/results.h"
#include "kascade/runtime.h"
#include "kascade/status.h"
#include "kascade/tasks.h"
#include "kascade/tokenizer.h"

namespace kascade::eval {

struct EvalPolicy {
  std::string name;            // the label in the table, usually attention.policy
  AttentionOptions attention;  // policy name, calibration file or anchors, budget, tile size
};

// Text in and out of the model.
struct TextCodec {
  TokenCounter count;                                                    // tokens the model reads for a text
  std::function<Result<std::vector<int32_t>>(std::string_view)> encode;  // the prompt's token ids
  std::function<Result<std::string>(std::span<const int32_t>)> decode;   // generated ids -> text
};
// The model's tokenizer: prompts encoded with special tokens (BOS where the model's post-processor
// adds it, as `kascade tasks` counts them), generations decoded without special tokens.
TextCodec tokenizer_codec(std::shared_ptr<const Tokenizer> tokenizer);

// Samples of (task, target length, index).
using SampleSource = std::function<Result<Sample>(const std::string& task, int64_t length, int64_t index)>;
// The suite's generator (kascade/tasks.h) on `split` with the user seed `seed`.
SampleSource suite_sample_source(Split split, uint64_t seed, TokenCounter count);

struct EvalPlan {
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;
  int64_t samples = 1;  // per task and length
  std::vector<EvalPolicy> policies;
};

struct SampleOutcome {
  std::string task;
  int64_t length = 0;
  std::string policy;
  int64_t index = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  std::string finish;      // "length", "stop", "context"
  std::string prediction;  // decoded generation
  std::vector<std::string> answers;
  double score = 0.0;          // in [0, 1]
  double keys_attended = 0.0;  // in [0, 1]
  double seconds = 0.0;
};
// One JSON object (a line of samples.jsonl).
std::string sample_outcome_json(const SampleOutcome& outcome);

struct EvalProgress {
  int64_t done = 0;
  int64_t total = 0;
  double elapsed_s = 0.0;
  const SampleOutcome* last = nullptr;  // the sample just finished
  double samples_per_s() const { return elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0; }
  double eta_s() const {
    const double rate = samples_per_s();
    return rate > 0 ? static_cast<double>(total - done) / rate : 0.0;
  }
};
using EvalProgressFn = std::function<void(const EvalProgress&)>;

struct EvalResult {
  ResultsTable table;
  std::vector<SampleOutcome> samples;  // in run order
};

// Validates the plan (non-empty tasks, lengths, policies; samples >= 1; distinct policy names) and
// builds every policy for the runtime's model; the error names the policy.
Status check_eval_plan(const Runtime& runtime, const EvalPlan& plan);

Result<EvalResult> run_eval(Runtime& runtime, const EvalPlan& plan, const TextCodec& codec, const SampleSource& source,
                            const EvalProgressFn& progress = {});

}  // namespace kascade::eval
