// tools/cmd_tasks.cpp — `kascade tasks`: dumps generated samples of the long-context task suite
// (kascade/tasks.h) as JSONL, one object per line:
//   {"task", "length", "seed", "prompt", "answers": [...], "metadata": {"split", "index",
//    "answer_prefix", "completion", "scorer", "max_new_tokens", "token_budget", "prompt_tokens",
//    "template_id", "haystack_units", "rng_seed", "needles": [{"text", "depth", "requested_depth",
//    "char_offset", "queried"}], "params": {...}}}
// The training script of kascade-tiny reads its task data from here, so training and evaluation
// share one generator. Lengths are counted with the model's tokenizer (--tokenizer: a
// tokenizer.json or a model directory holding one; encode with special tokens, i.e. with the BOS
// the runtime feeds) or with the whitespace stand-in (--tokenizer whitespace).
//   kascade tasks --split train --tasks all --lengths 2k,4k --samples 100 --seed 0
//                 --tokenizer models/kascade-tiny --out train.jsonl
//   kascade tasks --split train --tasks copy_strings,hop_drill --lengths 512,1k,2k --samples 8 ...
//   kascade tasks --list        # columns task, category, scorer, max_new, splits (all | train), description
// The train-only tasks (copy_strings, hop_drill, vt_lookup: the copy curriculum) are named on their own, never by
// "all" or a group, and only with --split train.
// Samples are generated in parallel (OpenMP) and written in a fixed order: for each task, for
// each length, indices 0..N-1. Tested through tests/unit/eval (the generator) and by running it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kascade/tasks.h"
#include "kascade/tokenizer.h"

namespace kascade::tools {
namespace {

nlohmann::ordered_json sample_to_json(const eval::Sample& s) {
  nlohmann::ordered_json needles = nlohmann::ordered_json::array();
  for (const auto& n : s.needles) {
    needles.push_back({{"text", n.text},
                       {"depth", n.depth},
                       {"requested_depth", n.requested_depth},
                       {"char_offset", n.char_offset},
                       {"queried", n.queried}});
  }
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  for (const auto& [k, v] : s.params) params[k] = v;
  nlohmann::ordered_json meta = {{"split", eval::split_name(s.split)},
                                 {"index", s.index},
                                 {"answer_prefix", s.answer_prefix},
                                 {"completion", s.completion},
                                 {"scorer", eval::scorer_name(s.scorer)},
                                 {"max_new_tokens", s.max_new_tokens},
                                 {"token_budget", s.token_budget},
                                 {"prompt_tokens", s.prompt_tokens},
                                 {"template_id", s.template_id},
                                 {"haystack_units", s.haystack_units},
                                 {"rng_seed", s.rng_seed},
                                 {"needles", std::move(needles)},
                                 {"params", std::move(params)}};
  return {{"task", s.task}, {"length", s.target_length}, {"seed", s.seed}, {"prompt", s.prompt},
          {"answers", s.answers}, {"metadata", std::move(meta)}};
}

// One row a task: the evaluation suite, then the train-only tasks (splits column "train").
void print_catalog() {
  std::printf("%-16s %-12s %-18s %8s %-6s  %s\n", "task", "category", "scorer", "max_new", "splits", "description");
  for (const auto* catalog : {&eval::task_catalog(), &eval::train_only_task_catalog()}) {
    for (const auto& t : *catalog) {
      std::printf("%-16.*s %-12.*s %-18s %8d %-6s  %.*s\n", static_cast<int>(t.name.size()), t.name.data(),
                  static_cast<int>(t.category.size()), t.category.data(), eval::scorer_name(t.scorer),
                  t.max_new_tokens, t.train_only ? "train" : "all", static_cast<int>(t.description.size()),
                  t.description.data());
    }
  }
}

// The token counter: the whitespace stand-in or a tokenizer.json (file or model directory).
Result<eval::TokenCounter> make_counter(const std::string& spec, std::shared_ptr<Tokenizer>& holder) {
  if (spec == "whitespace") return eval::TokenCounter(eval::count_whitespace_tokens);
  std::string path = spec;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "tokenizer.json").string();
  KC_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file(path));
  holder = std::make_shared<Tokenizer>(std::move(tok));
  const Tokenizer* t = holder.get();
  return eval::TokenCounter([t](std::string_view text) -> int64_t {
    auto ids = t->encode(text, /*add_special_tokens=*/true);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
  });
}

Status run(const std::string& split_name, const std::string& tasks_spec, const std::string& lengths_spec,
           int64_t samples, uint64_t seed, const std::string& out_path, const std::string& tokenizer_spec,
           std::optional<double> depth, std::optional<int64_t> reserve) {
  KC_ASSIGN_OR_RETURN(const eval::Split split, eval::parse_split(split_name));
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> tasks, eval::parse_task_list(tasks_spec));
  KC_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, eval::parse_lengths(lengths_spec));
  KC_CHECK_ARG(samples > 0, "--samples is ", samples, "; it must be positive");
  KC_ASSIGN_OR_RETURN(const uint64_t effective, eval::effective_seed(split, seed));
  (void)effective;  // validated here so that a bad seed fails before any work
  std::shared_ptr<Tokenizer> tokenizer;
  KC_ASSIGN_OR_RETURN(const eval::TokenCounter counter, make_counter(tokenizer_spec, tokenizer));

  std::ofstream file;
  std::ostream* out = &std::cout;
  if (out_path != "-") {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) return io_error("cannot open '", out_path, "' for writing");
    out = &file;
  }
  int64_t written = 0;
  for (const auto& task : tasks) {
    for (const int64_t length : lengths) {
      std::vector<std::optional<eval::Sample>> batch(static_cast<size_t>(samples));
      std::vector<Status> errors(static_cast<size_t>(samples));
#pragma omp parallel for schedule(dynamic)
      for (int64_t i = 0; i < samples; ++i) {
        eval::SampleRequest r;
        r.task = task;
        r.split = split;
        r.target_length = length;
        r.seed = seed;
        r.index = i;
        r.depth = depth;
        r.generation_reserve = reserve;
        auto s = eval::generate_sample(r, counter);
        if (s.ok()) {
          batch[static_cast<size_t>(i)] = std::move(*s);
        } else {
          errors[static_cast<size_t>(i)] = s.status();
        }
      }
      int64_t tokens = 0;
      for (int64_t i = 0; i < samples; ++i) {
        if (!errors[static_cast<size_t>(i)].ok()) {
          Status e = errors[static_cast<size_t>(i)];
          return e.with_context("sample " + std::to_string(i));
        }
        const eval::Sample& s = *batch[static_cast<size_t>(i)];
        tokens += s.prompt_tokens;
        *out << sample_to_json(s).dump() << '\n';
        ++written;
      }
      if (!*out) return io_error("writing '", out_path, "' failed");
      std::fprintf(stderr, "kascade tasks: %-16s %7lld tokens: %lld samples, mean prompt %.0f tokens\n", task.c_str(),
                   static_cast<long long>(length), static_cast<long long>(samples),
                   static_cast<double>(tokens) / static_cast<double>(samples));
    }
  }
  out->flush();
  if (!*out) return io_error("writing '", out_path, "' failed");
  std::fprintf(stderr, "kascade tasks: wrote %lld samples (split %s, seed %llu) to %s\n",
               static_cast<long long>(written), split_name.c_str(), static_cast<unsigned long long>(seed),
               out_path == "-" ? "stdout" : out_path.c_str());
  return ok_status();
}

}  // namespace

int run_tasks(int argc, char** argv) {
  CLI::App app{"Generate samples of the long-context task suite as JSONL (RULER-style tasks, filled to a length "
               "in tokens)"};
  app.name("kascade tasks");
  std::string split = "eval", tasks = "all", lengths = "4k", out = "-", tokenizer;
  int64_t samples = 10;
  uint64_t seed = 0;
  double depth = -1.0;
  int64_t reserve = -1;
  bool list = false;
  app.add_flag("--list", list, "list the tasks and exit");
  app.add_option("--split", split, "train, dev or eval (disjoint seeds, templates and vocabularies)")
      ->check(CLI::IsMember({"train", "dev", "eval"}));
  app.add_option("--tasks", tasks,
                 "comma-separated task names, or all / retrieval / multi-hop / aggregation (the evaluation suite; "
                 "the train-only copy_strings, hop_drill and vt_lookup are named on their own, with --split train)");
  app.add_option("--lengths", lengths, "target lengths in tokens, e.g. 2k,4k,8192");
  app.add_option("--samples", samples, "samples per task and length")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "user seed, below 2^40");
  app.add_option("--out", out, "output JSONL file ('-' for stdout)");
  app.add_option("--tokenizer", tokenizer,
                 "tokenizer.json, or a model directory holding one, or 'whitespace' for the stand-in counter");
  app.add_option("--depth", depth, "place the queried needle at this depth in [0, 1] (default: uniform)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reserve", reserve, "tokens kept free for the answer (default: the task's max_new_tokens)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (list) {
    print_catalog();
    return 0;
  }
  if (tokenizer.empty()) {
    std::fprintf(stderr,
                 "kascade tasks: error: --tokenizer is required (e.g. --tokenizer models/kascade-tiny, or "
                 "--tokenizer whitespace for the stand-in counter)\n");
    return 2;
  }
  const Status s = run(split, tasks, lengths, samples, seed, out, tokenizer,
                       depth >= 0.0 ? std::optional<double>(depth) : std::nullopt,
                       reserve >= 0 ? std::optional<int64_t>(reserve) : std::nullopt);
  if (!s.ok()) {
    std::fprintf(stderr, "kascade tasks: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kascade::tools
