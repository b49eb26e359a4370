// tools/cmd_eval.cpp — `kascade eval`: accuracy of attention policies on the long-context task suite
// (eval split by default; --split dev / train to see how the model does on held-in wordings) through the runtime on the CPU or a CUDA GPU (--device; src/eval/runner.h), as a
// table task × length × policy of
// accuracy and fraction of keys attended.
//
//   kascade eval --model models/kascade-tiny --tasks all --lengths 2k,4k --policies dense,kascade,streaming
//       --samples 20 --topk-fraction 0.1 --out eval-out
//
// Samples are generated with the model's tokenizer (prompts encoded with its special tokens, BOS
// included), run greedily with the task's max_new_tokens (stopping at the model's end-of-sequence
// tokens) and scored with the suite's RULER scorers. The kascade policies read
// <model dir>/kascade_calibration.json when no --calibration or --anchors is given and the file
// exists; otherwise they are refused (runtime::choose_schedule) with a message saying how to make one.
// Output: stderr a progress line (samples done / total, samples/s, ETA); stdout the markdown table;
// in --out: results.json (eval/results.h format), results.md, samples.jsonl (every prediction) and
// accuracy.png from scripts/plot_eval.py (missing matplotlib is reported; the command still succeeds).
// Exit codes: 0, 1 on an error ("kascade eval: error: ..."), 2 on bad usage.
// The runner is tested by tests/unit/eval/test_eval_runner.cpp; this file parses and prints.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "eval/results.h"
#include "eval/runner.h"
#include "kascade/runtime.h"
#include "kascade/tasks.h"
#include "kascade/tokenizer.h"
#include "policy/policy_program.h"
#include "python_script.h"
#include "runtime_flags.h"
#include "status_line.h"

namespace kascade::tools {
namespace {

namespace fs = std::filesystem;


struct Args {
  RuntimeFlags runtime;
  BudgetFlags budget;
  std::string tokenizer;
  std::string tasks = "all";
  std::string lengths = "4k";
  std::string policies = "dense,kascade";
  int64_t samples = 10;
  uint64_t seed = 0;
  std::string split = "eval";
  std::string calibration;
  int32_t num_anchors = 0;
  std::string anchors;
  std::string out = "eval-out";
  bool no_plot = false;
  bool no_progress = false;
  std::string command_line;
};

Result<std::vector<std::string>> split_list(const std::string& text, const char* what) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    KC_CHECK_ARG(!item.empty(), what, " '", text, "' has an empty entry");
    out.push_back(item);
  }
  KC_CHECK_ARG(!out.empty(), what, " is empty");
  return out;
}

Result<std::vector<int32_t>> parse_int_list(const std::string& text, const char* what) {
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> items, split_list(text, what));
  std::vector<int32_t> out;
  for (const std::string& item : items) {
    try {
      size_t used = 0;
      const long value = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(static_cast<int32_t>(value));
    } catch (const std::exception&) {
      return invalid_argument(what, ": '", item, "' is not an integer");
    }
  }
  return out;
}

// The policies with their attention options: the kascade variants get the anchors (--anchors), or the
// calibration file (--calibration, else the model directory's default file); runtime::choose_schedule
// (through eval::check_eval_plan) refuses both, neither, and a schedule for a policy that reads none.
Result<std::vector<eval::EvalPolicy>> make_policies(const Args& a) {
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> names, split_list(a.policies, "--policies"));
  std::vector<int32_t> anchors;
  if (!a.anchors.empty()) {
    KC_ASSIGN_OR_RETURN(anchors, parse_int_list(a.anchors, "--anchors"));
  }
  std::vector<eval::EvalPolicy> policies;
  for (const std::string& name : names) {
    eval::EvalPolicy p;
    p.name = name;
    p.attention.policy = name;
    p.attention.topk_fraction = a.budget.topk_fraction;
    p.attention.k_min = a.budget.k_min;
    p.attention.tile_size = a.budget.tile;
    if (policy::policy_uses_schedule(name)) {
      p.attention.calibration_file = a.calibration;
      p.attention.num_anchors = a.num_anchors;
      p.attention.anchors = anchors;
      runtime::use_default_calibration_file(p.attention, a.runtime.model);
    }
    policies.push_back(std::move(p));
  }
  return policies;
}

// Which anchors the kascade variants of the plan use ("anchors 0,2,5 from FILE", ...), "" when none is one.
Result<std::string> schedule_note_of(const Runtime& runtime, const std::vector<eval::EvalPolicy>& policies) {
  for (const eval::EvalPolicy& p : policies) {
    if (!policy::policy_uses_schedule(p.attention.policy)) continue;
    KC_ASSIGN_OR_RETURN(const runtime::PolicySetup setup, runtime::build_policy_config(runtime.config(), p.attention));
    return setup.schedule_note;
  }
  return std::string();
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

Status run(const Args& a) {
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> tasks, eval::parse_task_list(a.tasks));
  KC_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, eval::parse_lengths(a.lengths));
  KC_ASSIGN_OR_RETURN(const eval::Split split, eval::parse_split(a.split));
  KC_ASSIGN_OR_RETURN(const uint64_t effective, eval::effective_seed(split, a.seed));
  (void)effective;  // validates the seed before any work
  KC_ASSIGN_OR_RETURN(const std::vector<eval::EvalPolicy> policies, make_policies(a));

  const fs::path model_dir = model_dir_of(a.runtime.model);
  const std::string tokenizer_path = a.tokenizer.empty() ? (model_dir / "tokenizer.json").string() : a.tokenizer;
  auto tokenizer = Tokenizer::from_file(tokenizer_path);
  if (!tokenizer.ok()) {
    Status s = tokenizer.status();
    return s.with_context("the task suite needs the model's tokenizer");
  }
  const auto shared_tokenizer = std::make_shared<const Tokenizer>(std::move(tokenizer).value());

  KC_ASSIGN_OR_RETURN(RuntimeOptions o, to_runtime_options(a.runtime, &a.budget));
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::create(o));
  const std::string runtime_description = runtime->describe();
  std::fprintf(stderr, "%s\n", runtime_description.c_str());

  eval::EvalPlan plan;
  plan.tasks = tasks;
  plan.lengths = lengths;
  plan.samples = a.samples;
  plan.policies = policies;
  KC_RETURN_IF_ERROR(eval::check_eval_plan(*runtime, plan));
  KC_ASSIGN_OR_RETURN(const std::string schedule_note, schedule_note_of(*runtime, policies));
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) return io_error("cannot create the output directory '", a.out, "': ", ec.message());

  const eval::TextCodec codec = eval::tokenizer_codec(shared_tokenizer);
  const eval::SampleSource source = eval::suite_sample_source(split, a.seed, codec.count);
  std::fprintf(stderr, "eval: %zu tasks x %zu lengths x %zu policies x %lld samples (%s split, seed %llu)%s%s\n",
               tasks.size(), lengths.size(), policies.size(), static_cast<long long>(a.samples), a.split.c_str(),
               static_cast<unsigned long long>(a.seed),
               schedule_note.empty() ? "" : "; kascade: ", schedule_note.c_str());
  StatusLine line(!a.no_progress);
  KC_ASSIGN_OR_RETURN(
      const eval::EvalResult result, eval::run_eval(*runtime, plan, codec, source, [&](const eval::EvalProgress& p) {
        char text[240];
        std::snprintf(text, sizeof(text), "eval: %lld/%lld samples | %.2f samples/s | ETA %s | last: %s %lld %s %.0f%%",
                      static_cast<long long>(p.done), static_cast<long long>(p.total), p.samples_per_s(),
                      format_duration(p.eta_s()).c_str(), p.last->task.c_str(), static_cast<long long>(p.last->length),
                      p.last->policy.c_str(), 100.0 * p.last->score);
        line.update(text, p.elapsed_s, p.done == p.total);
      }));

  const std::map<std::string, std::string> meta = {{"model", model_dir.lexically_normal().filename().string()},
                                                   {"runtime", runtime_description},
                                                   {"command", a.command_line},
                                                   {"date", now_utc()},
                                                   {"split", a.split},
                                                   {"seed", std::to_string(a.seed)},
                                                   {"samples_per_cell", std::to_string(a.samples)},
                                                   {"topk_fraction", std::to_string(a.budget.topk_fraction)},
                                                   {"k_min", std::to_string(a.budget.k_min)},
                                                   {"tile", std::to_string(a.budget.tile)},
                                                   {"device", a.runtime.device},
                                                   {"kascade_schedule", schedule_note},
                                                   {"keys_attended", "prefill + decode, all layers and heads"}};
  const std::string json_path = (fs::path(a.out) / "results.json").string();
  const std::string md_path = (fs::path(a.out) / "results.md").string();
  const std::string samples_path = (fs::path(a.out) / "samples.jsonl").string();
  const std::string png_path = (fs::path(a.out) / "accuracy.png").string();
  KC_RETURN_IF_ERROR(eval::write_text_file(json_path, result.table.to_json(meta)));
  const std::string markdown = result.table.to_markdown();
  KC_RETURN_IF_ERROR(eval::write_text_file(md_path, markdown));
  std::string lines;
  for (const eval::SampleOutcome& s : result.samples) lines += eval::sample_outcome_json(s) + "\n";
  KC_RETURN_IF_ERROR(eval::write_text_file(samples_path, lines));
  std::printf("%s", markdown.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "eval: wrote %s, %s, %s\n", json_path.c_str(), md_path.c_str(), samples_path.c_str());
  if (!a.no_plot) plot_with_script("kascade eval", "plot_eval.py", {json_path, png_path}, "the accuracy plot");
  return ok_status();
}

}  // namespace

int run_eval(int argc, char** argv) {
  CLI::App app{
      "Evaluate attention policies on the long-context task suite: accuracy and fraction of keys attended "
      "per task, length and policy"};
  app.name("kascade eval");
  Args a;
  for (int i = 0; i < argc; ++i) a.command_line += (i ? " " : "kascade ") + std::string(argv[i]);
  add_runtime_flags(app, a.runtime);
  add_budget_flags(app, a.budget);
  app.add_option("--tokenizer", a.tokenizer, "tokenizer.json (default: the model directory's)");
  app.add_option("--tasks", a.tasks, "comma-separated task names, or all / retrieval / multi-hop / aggregation");
  app.add_option("--lengths", a.lengths, "target lengths in tokens, e.g. 4k,8k,16k,32k");
  app.add_option("--policies", a.policies,
                 "comma-separated: dense, kascade, kascade-pooled, kascade-noremap, kascade-decode, oracle, "
                 "streaming, quest, omnikv, lessismore");
  app.add_option("--samples", a.samples, "samples per task and length")->check(CLI::PositiveNumber);
  app.add_option("--seed", a.seed, "user seed of the split");
  app.add_option("--split", a.split,
                 "task suite split: eval (held-out wordings, the default and the only one for reported accuracy), "
                 "dev (calibration) or train (the training wordings: to tell a model that cannot do a task from "
                 "one that does not transfer to unseen wordings)")
      ->check(CLI::IsMember({"train", "dev", "eval"}));
  app.add_option("--calibration", a.calibration,
                 "calibration file for the kascade policies (default: <model dir>/kascade_calibration.json)");
  app.add_option("--num-anchors", a.num_anchors, "anchor count to use from the calibration file (default: its own)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--anchors", a.anchors, "anchor layers for the kascade policies, e.g. 0,2,8 (identity head map)");
  app.add_option("-o,--out", a.out, "output directory (results.json, results.md, samples.jsonl, accuracy.png)");
  app.add_flag("--no-plot", a.no_plot, "do not draw accuracy.png");
  app.add_flag("--no-progress", a.no_progress, "no progress line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const Status s = run(a);
  if (!s.ok()) {
    std::fprintf(stderr, "kascade eval: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kascade::tools
