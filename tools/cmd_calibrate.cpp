// tools/cmd_calibrate.cpp — `kascade calibrate` (DESIGN.md §2.5): runs a dev set through the model
// with the recording policy (src/calibrate/collector.h, driven by src/runtime/calibration_collector.h),
// picks anchors by DP for each anchor count, builds the head maps and writes the calibration file.
//
//   kascade calibrate --model models/kascade-tiny --dev-set tasks:all --lengths 2k,4k --num-prompts 32
//       --out models/kascade-tiny/kascade_calibration.json --plots calib-plots
//   kascade calibrate --model DIR --dev-set prompts.jsonl ...          # lines {"prompt": "..."}
//   kascade calibrate --model DIR --device cuda --dev-set tasks:all ...  # forward on the GPU
//   kascade calibrate --model DIR ... --refine agreement --refine-prompts 4       # + local search
//   kascade calibrate --from-stats calib.json --anchors 3,6 --out calib36.json    # no model run
//   kascade calibrate --model DIR --import-npy llama_heads.npy --import-anchors 0,2,8,13,14
//       --model-name meta-llama/Llama-3.1-8B-Instruct --out calib.json            # published map
//
// Dev sets: "tasks:LIST" takes samples of the task suite's dev split (seed --seed; its templates,
// vocabularies and haystack text are disjoint from the eval split's), round-robin over the tasks and
// --lengths, filled with the model's tokenizer; a path reads a JSONL file of {"prompt": ...} objects.
// Prompts are encoded with the tokenizer's special tokens (BOS), as `kascade tasks` counts them.
// Output: a progress line (prompts, tokens/s, ETA), the units collected, the importance per layer,
// the chosen anchors and DP objective for each anchor count, the file, and with --plots the PNGs of
// scripts/plot_calibration.py (missing matplotlib is reported and the command still succeeds).
// --refine agreement (an extension, docs/spec-notes.md; default none: the DP sets only): after the DP,
// for each count of --refine-anchors (default: the file's default count) a hill climb from the DP set
// over the sets that swap one anchor other than layer 0 for a non-anchor layer, scored by the agreement
// of the kascade policy (this command's --topk-fraction / --k-min / --tile, the defaults of `kascade
// eval`) with dense attention on the first --refine-prompts dev prompts: --refine-tokens teacher-forced
// positions of the dense greedy continuation per prompt, argmax matches first, then mean KL(dense ||
// kascade); at most --refine-rounds moves (src/runtime/anchor_refinement.h). It prints a progress line
// and a table per count; the file's set of that count becomes the refined set and records the DP set
// under refinement.dp_anchors. --from-stats carries a saved refinement over when the re-derived DP set
// is the one it started from (the scores are the saved run's), else drops it; either way with a note.
// Exit codes: 0, 1 on an error ("kascade calibrate: error: ..."), 2 on bad usage.
// The library pieces are tested in tests/unit/calibrate and tests/unit/runtime; this file parses,
// builds the dev set and prints.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "kascade/calibration.h"
#include "kascade/runtime.h"
#include "kascade/tasks.h"
#include "kascade/tokenizer.h"
#include "python_script.h"
#include "runtime/anchor_refinement.h"
#include "runtime/calibration_collector.h"
#include "runtime_flags.h"
#include "status_line.h"

namespace kascade::tools {
namespace {

namespace fs = std::filesystem;

struct Args {
  std::string model;
  std::string model_name;
  std::string tokenizer;
  std::string dev_set = "tasks:all";
  std::string lengths = "4k";
  uint64_t seed = 0;
  int64_t num_prompts = 16;
  bool num_prompts_given = false;
  std::string anchors = "2..8";
  int32_t default_anchors = 0;
  int64_t k_cal = 32;
  int32_t decode_steps = 32;
  bool ignore_eos = false;
  double topk_fraction = 0.10;
  int64_t k_min = 128;
  int32_t tile = 32;
  std::string stats_forward = "dense";
  int32_t chunk = 512;
  int64_t max_context = 0;
  bool dummy_weights = false;
  std::string dummy_dtype = "bf16";
  uint64_t dummy_seed = 0;
  std::string device = "cpu";
  int32_t cuda_device = 0;
  std::string cuda_dtype = "bf16";
  std::string out;
  std::string plots;
  std::string from_stats;
  std::string import_npy;
  std::string import_anchors;
  std::string refine = "none";
  std::string refine_anchors;
  int32_t refine_tokens = 32;
  int64_t refine_prompts = 0;  // 0: every dev prompt
  int32_t refine_rounds = 3;
  bool refine_options_given = false;  // any of --refine-anchors / -tokens / -prompts / -rounds
  bool no_progress = false;
};

Result<int32_t> parse_int(const std::string& text, const char* what) {
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used != text.size() || value < INT32_MIN || value > INT32_MAX) throw std::invalid_argument(text);
    return static_cast<int32_t>(value);
  } catch (const std::exception&) {
    return invalid_argument(what, ": '", text, "' is not an integer");
  }
}

// "0,2,8" -> {0, 2, 8}.
Result<std::vector<int32_t>> parse_int_list(const std::string& text, const char* what) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    KC_ASSIGN_OR_RETURN(const int32_t v, parse_int(item, what));
    out.push_back(v);
  }
  KC_CHECK_ARG(!out.empty(), what, " is empty");
  return out;
}

// Anchor counts: "2..8" (a range) or "3,5,6" (a list).
Result<std::vector<int32_t>> parse_anchor_counts(const std::string& text) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos) return parse_int_list(text, "--anchors");
  KC_ASSIGN_OR_RETURN(const int32_t lo, parse_int(text.substr(0, dots), "--anchors"));
  KC_ASSIGN_OR_RETURN(const int32_t hi, parse_int(text.substr(dots + 2), "--anchors"));
  KC_CHECK_ARG(lo >= 1 && lo <= hi, "--anchors ", text, ": expected A..B with 1 <= A <= B");
  std::vector<int32_t> out;
  for (int32_t k = lo; k <= hi; ++k) out.push_back(k);
  return out;
}

// The anchor counts that fit the model (counts above the layer count are dropped with a note).
Result<std::vector<int32_t>> fit_counts(const std::vector<int32_t>& counts, int32_t num_layers) {
  std::vector<int32_t> kept;
  for (int32_t k : counts) {
    KC_CHECK_ARG(k >= 1, "--anchors: anchor count ", k, " must be >= 1");
    if (k <= num_layers) {
      kept.push_back(k);
    } else {
      std::fprintf(stderr, "kascade calibrate: note: %d anchors skipped (the model has %d layers)\n", k, num_layers);
    }
  }
  KC_CHECK_ARG(!kept.empty(), "--anchors: no anchor count fits a model of ", num_layers, " layers");
  return kept;
}

std::string default_model_name(const std::string& model) {
  fs::path dir = model_dir_of(model);
  std::string name = dir.lexically_normal().filename().string();
  if (name.empty()) name = dir.lexically_normal().parent_path().filename().string();
  return name.empty() ? model : name;
}

// ---- dev set ----

struct DevSet {
  std::vector<runtime::CalibrationPrompt> prompts;
  std::string description;
};

Result<DevSet> suite_dev_set(const Args& a, const std::string& task_list, const Tokenizer& tokenizer) {
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> tasks, eval::parse_task_list(task_list));
  KC_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, eval::parse_lengths(a.lengths));
  KC_ASSIGN_OR_RETURN(const uint64_t effective, eval::effective_seed(eval::Split::kDev, a.seed));
  (void)effective;  // validates the seed before any work
  const eval::TokenCounter counter = [&tokenizer](std::string_view text) -> int64_t {
    auto ids = tokenizer.encode(text, /*add_special_tokens=*/true);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
  };
  const int64_t n = a.num_prompts;
  const int64_t nt = static_cast<int64_t>(tasks.size());
  const int64_t nl = static_cast<int64_t>(lengths.size());
  DevSet dev;
  dev.prompts.resize(static_cast<size_t>(n));
  std::vector<Status> errors(static_cast<size_t>(n));
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) {
    eval::SampleRequest r;
    r.task = tasks[static_cast<size_t>(i % nt)];
    r.split = eval::Split::kDev;
    r.target_length = lengths[static_cast<size_t>((i / nt) % nl)];
    r.seed = a.seed;
    r.index = i / (nt * nl);
    auto sample = eval::generate_sample(r, counter);
    auto ids = sample.ok() ? tokenizer.encode(sample->prompt, /*add_special_tokens=*/true)
                           : Result<std::vector<int32_t>>(sample.status());
    if (!ids.ok()) {
      errors[static_cast<size_t>(i)] = ids.status();
      continue;
    }
    dev.prompts[static_cast<size_t>(i)] = {detail::concat("dev:", r.task, "/", r.target_length, "/", r.index),
                                           std::move(ids).value()};
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!errors[static_cast<size_t>(i)].ok()) {
      Status e = errors[static_cast<size_t>(i)];
      return e.with_context(detail::concat("dev prompt ", i));
    }
  }
  std::ostringstream os;
  os << "kascade task suite, dev split, seed " << a.seed << ": tasks ";
  for (size_t t = 0; t < tasks.size(); ++t) os << (t ? "," : "") << tasks[t];
  os << "; lengths ";
  for (size_t l = 0; l < lengths.size(); ++l) os << (l ? "," : "") << lengths[l];
  os << "; " << n << " prompts round-robin over task x length";
  dev.description = os.str();
  return dev;
}

Result<DevSet> jsonl_dev_set(const Args& a, const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open dev set '", path, "' (expected tasks:LIST or a JSONL file)");
  DevSet dev;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (a.num_prompts_given && static_cast<int64_t>(dev.prompts.size()) >= a.num_prompts) break;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument(path, ":", line_no, ": not JSON (", e.what(), ")");
    }
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      return invalid_argument(path, ":", line_no, ": expected an object with a string \"prompt\"");
    KC_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        tokenizer.encode(j["prompt"].get<std::string>(), /*add_special_tokens=*/true));
    dev.prompts.push_back({detail::concat(fs::path(path).filename().string(), ":", line_no), std::move(ids)});
  }
  KC_CHECK_ARG(!dev.prompts.empty(), "dev set '", path, "' holds no prompt");
  if (a.num_prompts_given && static_cast<int64_t>(dev.prompts.size()) < a.num_prompts)
    std::fprintf(stderr, "kascade calibrate: note: %s holds %zu prompts (fewer than --num-prompts %lld)\n",
                 path.c_str(), dev.prompts.size(), static_cast<long long>(a.num_prompts));
  dev.description = detail::concat("JSONL prompts ", path, ", ", dev.prompts.size(), " prompts");
  return dev;
}

Result<DevSet> build_dev_set(const Args& a, const Tokenizer& tokenizer) {
  const std::string prefix = "tasks:";
  if (a.dev_set.rfind(prefix, 0) == 0) return suite_dev_set(a, a.dev_set.substr(prefix.size()), tokenizer);
  return jsonl_dev_set(a, a.dev_set, tokenizer);
}

// ---- output ----

double importance_sum(const calib::CalibrationStats& stats) {
  double total = 0.0;
  for (double w : stats.importance) total += w;
  return total;
}

void print_anchor_sets(const calib::CalibrationFile& file) {
  std::printf("anchor sets");
  if (file.stats) {
    std::printf(" (DP objective = sum over layers b of w_b * sim(anchor(b), b); at most sum w = %.6f)",
                importance_sum(*file.stats));
  }
  std::printf(":\n");
  for (const calib::AnchorSet& s : file.anchor_sets) {
    const bool is_default = s.anchors.size() == static_cast<size_t>(file.default_num_anchors);
    std::printf("  %s%2zu anchors: %-28s", is_default ? "*" : " ", s.anchors.size(), calib::format_anchors(s.anchors).c_str());
    if (s.objective) std::printf(" objective %.6f", *s.objective);
    if (s.refinement) {
      std::printf(" refined from the DP set %s (objective %.6f): agreement %.4f vs %.4f", calib::format_anchors(s.refinement->dp_anchors).c_str(),
                  s.refinement->dp_objective, s.refinement->agreement, s.refinement->dp_agreement);
    }
    std::printf("\n");
  }
  std::printf("  (* = default anchor count of the file)\n");
}

// One count's climb: each round's candidates, best first, and the outcome.
void print_refinement(const runtime::RefinedCount& refined, const runtime::RefinementResult& result) {
  const calib::HillClimbResult& c = refined.climb;
  const auto score_text = [](const calib::AgreementScore& s) {
    char text[96];
    std::snprintf(text, sizeof(text), "%.4f (%lld/%lld)  %.6f", s.agreement(), static_cast<long long>(s.matches),
                  static_cast<long long>(s.steps), s.mean_kl);
    return std::string(text);
  };
  std::printf("refinement of the %d-anchor set: agreement with dense over %lld prompts (%lld scored positions), "
              "then mean KL(dense || kascade) in nats\n",
              refined.num_anchors, static_cast<long long>(result.prompts), static_cast<long long>(result.steps));
  std::printf("  start (DP set) %-24s %s\n", calib::format_anchors(c.start.anchors).c_str(), score_text(c.start.score).c_str());
  for (size_t r = 0; r < c.rounds.size(); ++r) {
    const calib::ClimbRound& round = c.rounds[r];
    std::printf("  round %zu, neighbours of %s:\n", r + 1, calib::format_anchors(round.from).c_str());
    std::printf("      %-24s %-22s %s\n", "anchors", "agreement (matches)", "KL");
    std::vector<size_t> order(round.candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return calib::better_agreement(round.candidates[x].score, round.candidates[y].score);
    });
    for (const size_t i : order) {
      const bool best = i == round.best;
      std::printf("    %s %-24s %s%s\n", best ? "*" : " ", calib::format_anchors(round.candidates[i].anchors).c_str(),
                  score_text(round.candidates[i].score).c_str(),
                  best ? (round.moved ? "   best: moved here" : "   best: not better, stop") : "");
    }
  }
  std::printf("  result: %s %s (%s; %zu round%s, %lld sets scored)\n", calib::format_anchors(c.best.anchors).c_str(),
              score_text(c.best.score).c_str(),
              c.local_optimum ? "a local optimum" : "the round limit stopped the climb", c.rounds.size(),
              c.rounds.size() == 1 ? "" : "s", static_cast<long long>(c.sets_scored));
}

void print_statistics(const calib::CalibrationStats& stats) {
  std::printf("layer importance w_l = 1 - cos(x_l, x_l + attn_l):\n ");
  for (size_t l = 0; l < stats.importance.size(); ++l) std::printf(" %zu:%.4f", l, stats.importance[l]);
  std::printf("\n");
}

Status write_and_report(const Args& a, const calib::CalibrationFile& file) {
  print_anchor_sets(file);
  KC_RETURN_IF_ERROR(calib::write_calibration_file(file, a.out));
  std::printf("wrote %s\n", a.out.c_str());
  std::fflush(stdout);
  if (!a.plots.empty()) {
    if (!file.stats) {
      std::fprintf(stderr, "kascade calibrate: note: an imported head map has no statistics to plot\n");
    } else {
      std::error_code ec;
      fs::create_directories(a.plots, ec);
      if (ec) return io_error("cannot create the plot directory '", a.plots, "': ", ec.message());
      plot_with_script("kascade calibrate", "plot_calibration.py", {a.out, a.plots}, "calibration plots");
    }
  }
  return ok_status();
}

// ---- refinement ----

// --refine-anchors: counts among those derived; empty when not given (then the file's default count).
Result<std::vector<int32_t>> refine_anchor_counts(const Args& a, const std::vector<int32_t>& counts) {
  if (a.refine_anchors.empty()) return std::vector<int32_t>{};
  KC_ASSIGN_OR_RETURN(std::vector<int32_t> wanted, parse_int_list(a.refine_anchors, "--refine-anchors"));
  for (size_t i = 0; i < wanted.size(); ++i) {
    KC_CHECK_ARG(std::find(counts.begin(), counts.end(), wanted[i]) != counts.end(), "--refine-anchors: ", wanted[i],
                 " is not among the anchor counts derived (--anchors ", a.anchors, " gives ", calib::format_anchors(counts), ")");
    for (size_t j = 0; j < i; ++j)
      KC_CHECK_ARG(wanted[j] != wanted[i], "--refine-anchors: ", wanted[i], " is listed twice");
  }
  return wanted;
}

Status run_refinement(const Args& a, Runtime& runtime, const DevSet& dev, const std::vector<int32_t>& refine_counts,
                      calib::CalibrationFile& file) {
  const size_t num_prompts = a.refine_prompts > 0 ? static_cast<size_t>(a.refine_prompts) : dev.prompts.size();
  const std::vector<runtime::CalibrationPrompt> prompts(dev.prompts.begin(),
                                                        dev.prompts.begin() + static_cast<ptrdiff_t>(num_prompts));
  runtime::RefinementOptions options;
  options.anchor_counts = refine_counts;
  options.tokens = a.refine_tokens;
  options.max_rounds = a.refine_rounds;
  options.stop_at_eos = !a.ignore_eos;
  std::fflush(stdout);  // the collection's report first
  std::fprintf(stderr,
               "refining anchor sets %s by agreement with dense attention: %zu prompts, %d scored positions each "
               "(at most), at most %d rounds; kascade at Top-k fraction %g, k_min %lld, tile %d\n",
               calib::format_anchors(refine_counts).c_str(), num_prompts, a.refine_tokens, a.refine_rounds, a.topk_fraction,
               static_cast<long long>(a.k_min), a.tile);
  StatusLine line(!a.no_progress);
  KC_ASSIGN_OR_RETURN(
      const runtime::RefinementResult result,
      runtime::refine_anchor_sets(runtime, prompts, file, options, [&](const runtime::RefinementProgress& p) {
        char text[240];
        if (p.reference) {
          std::snprintf(text, sizeof(text), "refine: dense reference %lld/%lld prompts | %s",
                        static_cast<long long>(p.reference_done), static_cast<long long>(p.prompts),
                        format_duration(p.elapsed_s).c_str());
        } else {
          std::snprintf(text, sizeof(text),
                        "refine: %d anchors, round %d/%d, set %lld/%lld | %lld prompt runs, %.1f s/run | ETA round "
                        "%s, all <= %s",
                        p.num_anchors, p.climb.round, p.climb.max_rounds,
                        static_cast<long long>(p.climb.scored_in_round), static_cast<long long>(p.climb.to_score_in_round),
                        static_cast<long long>(p.runs_done), p.seconds_per_run, format_duration(p.eta_round_s).c_str(),
                        format_duration(p.eta_max_s).c_str());
        }
        line.update(text, p.elapsed_s, false);
      }));
  line.update(detail::concat("refine: done in ", format_duration(result.seconds), " (dense reference ",
                             format_duration(result.reference_seconds), ")"),
              result.seconds, true);
  for (const runtime::RefinedCount& refined : result.counts) print_refinement(refined, result);
  return ok_status();
}

// ---- modes ----

Status run_from_stats(const Args& a) {
  KC_ASSIGN_OR_RETURN(const calib::CalibrationFile saved, calib::read_calibration_file(a.from_stats));
  if (!saved.stats || !saved.dev_set || !saved.collection)
    return invalid_argument(a.from_stats, " holds no statistics (an imported head map): it cannot be re-derived");
  KC_ASSIGN_OR_RETURN(std::vector<int32_t> counts, parse_anchor_counts(a.anchors));
  KC_ASSIGN_OR_RETURN(counts, fit_counts(counts, saved.model.num_layers));
  std::printf("re-deriving anchors from the statistics of %s (%lld prompts, %s)\n", a.from_stats.c_str(),
              static_cast<long long>(saved.stats->num_prompts), saved.dev_set->description.c_str());
  KC_ASSIGN_OR_RETURN(calib::CalibrationFile file,
                      calib::build_calibration_file(saved.model, *saved.dev_set, *saved.collection, *saved.stats,
                                                    counts, a.default_anchors));
  KC_ASSIGN_OR_RETURN(const std::vector<std::string> notes, calib::carry_refinements(saved, file));
  for (const std::string& note : notes) std::fprintf(stderr, "kascade calibrate: note: %s\n", note.c_str());
  return write_and_report(a, file);
}

Status run_import(const Args& a) {
  KC_CHECK_ARG(!a.model.empty(), "--import-npy needs --model (a model directory or config.json: the shape to check)");
  KC_CHECK_ARG(!a.import_anchors.empty(), "--import-npy needs --import-anchors (e.g. 0,2,8,13,14)");
  KC_ASSIGN_OR_RETURN(const ModelConfig config, load_model_config(a.model));
  KC_ASSIGN_OR_RETURN(const std::vector<int32_t> anchors, parse_int_list(a.import_anchors, "--import-anchors"));
  calib::ModelIdentity id;
  id.name = a.model_name.empty() ? default_model_name(a.model) : a.model_name;
  id.path = a.model;
  id.num_layers = static_cast<int32_t>(config.num_hidden_layers);
  id.num_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
  id.num_heads = static_cast<int32_t>(config.num_attention_heads);
  id.head_dim = static_cast<int32_t>(config.head_dim);
  KC_ASSIGN_OR_RETURN(const calib::CalibrationFile file, calib::import_head_map_file(a.import_npy, anchors, id));
  std::printf("imported the head map of %s (%d layers x %d KV heads) for %s\n", a.import_npy.c_str(), id.num_layers,
              id.num_kv_heads, id.name.c_str());
  return write_and_report(a, file);
}

Status run_collection(const Args& a) {
  KC_CHECK_ARG(!a.model.empty(), "--model is required (or --from-stats FILE to re-derive anchors without a model)");
  KC_CHECK_ARG(a.num_prompts >= 1, "--num-prompts is ", a.num_prompts, "; expected >= 1");
  KC_ASSIGN_OR_RETURN(const calib::StatsForward forward, calib::parse_stats_forward(a.stats_forward));
  KC_ASSIGN_OR_RETURN(const calib::RefineMethod refine, calib::parse_refine_method(a.refine));
  KC_ASSIGN_OR_RETURN(std::vector<int32_t> counts, parse_anchor_counts(a.anchors));

  const fs::path model_dir = model_dir_of(a.model);
  const std::string tokenizer_path = a.tokenizer.empty() ? (model_dir / "tokenizer.json").string() : a.tokenizer;
  auto tokenizer = Tokenizer::from_file(tokenizer_path);
  if (!tokenizer.ok()) {
    Status s = tokenizer.status();
    return s.with_context("the dev set needs the model's tokenizer");
  }

  // The dev set first: its errors (unknown task, bad file) come before the model loads.
  KC_ASSIGN_OR_RETURN(const DevSet dev, build_dev_set(a, *tokenizer));
  int64_t dev_tokens = 0;
  for (const auto& p : dev.prompts) dev_tokens += static_cast<int64_t>(p.tokens.size());

  KC_ASSIGN_OR_RETURN(const Device device, parse_device(a.device));
  RuntimeOptions o;
  // --device cuda: the forward pass runs on the GPU; the recording policy and the importance
  // observer run on the host over per-layer copies of q, the KV cache and the residual stream
  // (src/cuda/model/cuda_session.h), one prompt at a time.
  o.device = device;
  o.cuda_device = a.cuda_device;
  KC_ASSIGN_OR_RETURN(o.cuda_dtype, parse_dtype(a.cuda_dtype));
  o.max_batch = 1;
  o.model_path = a.model;
  o.dummy_weights = a.dummy_weights;
  KC_ASSIGN_OR_RETURN(o.dummy_dtype, parse_dtype(a.dummy_dtype));
  o.dummy_seed = a.dummy_seed;
  o.attention.tile_size = a.tile;
  o.attention.topk_fraction = a.topk_fraction;
  o.attention.k_min = a.k_min;
  o.max_context = a.max_context;
  // Prefill chunks must hold whole tiles: round the chunk up to a multiple of the tile size.
  o.chunk_size = (a.chunk + a.tile - 1) / a.tile * a.tile;
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::create(o));
  std::fprintf(stderr, "%s\n", runtime->describe().c_str());
  const ModelConfig& config = runtime->config();
  KC_ASSIGN_OR_RETURN(counts, fit_counts(counts, static_cast<int32_t>(config.num_hidden_layers)));
  // The refinement's settings are checked before the long collection.
  std::vector<int32_t> refine_counts;
  if (refine == calib::RefineMethod::kAgreement) {
    KC_ASSIGN_OR_RETURN(refine_counts, refine_anchor_counts(a, counts));
    KC_CHECK_ARG(a.refine_prompts <= static_cast<int64_t>(dev.prompts.size()), "--refine-prompts is ",
                 a.refine_prompts, " but the dev set has ", dev.prompts.size(), " prompts");
  }

  std::fprintf(stderr, "dev set: %s (%lld prompt tokens)\n", dev.description.c_str(),
               static_cast<long long>(dev_tokens));
  std::fprintf(stderr, "collecting: %s forward, k_cal %lld, tile %d, %d greedy tokens after each prompt%s\n",
               calib::stats_forward_name(forward), static_cast<long long>(a.k_cal), a.tile, a.decode_steps,
               a.ignore_eos ? "" : " (fewer if the model ends its answer)");

  runtime::CalibrationRunOptions run;
  run.k_cal = a.k_cal;
  run.forward = forward;
  run.decode_tokens = a.decode_steps;
  run.stop_at_eos = !a.ignore_eos;
  StatusLine line(!a.no_progress);
  KC_ASSIGN_OR_RETURN(
      const runtime::CalibrationRunResult result,
      runtime::collect_calibration_stats(*runtime, dev.prompts, run, [&](const runtime::CalibrationProgress& p) {
        char text[200];
        std::snprintf(text, sizeof(text), "calibrate: %lld/%lld prompts | %lld tokens, %.0f tok/s | ETA %s",
                      static_cast<long long>(p.prompts_done), static_cast<long long>(p.prompts_total),
                      static_cast<long long>(p.tokens_done), p.tokens_per_s(), format_duration(p.eta_s()).c_str());
        line.update(text, p.elapsed_s, p.prompts_done == p.prompts_total);
      }));
  std::printf(
      "collected %lld prompts in %.1f s: %lld prompt tokens, %lld generated tokens; units: %lld prefill "
      "tiles + %lld decode steps\n",
      static_cast<long long>(result.stats.num_prompts), result.seconds, static_cast<long long>(result.prompt_tokens),
      static_cast<long long>(result.generated_tokens), static_cast<long long>(result.prefill_units),
      static_cast<long long>(result.decode_units));
  print_statistics(result.stats);

  calib::ModelIdentity id;
  id.name = a.model_name.empty() ? default_model_name(a.model) : a.model_name;
  id.path = a.model;
  id.num_layers = static_cast<int32_t>(config.num_hidden_layers);
  id.num_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
  id.num_heads = static_cast<int32_t>(config.num_attention_heads);
  id.head_dim = static_cast<int32_t>(config.head_dim);
  calib::DevSetInfo dev_info;
  dev_info.description = dev.description + (a.ignore_eos ? "; exactly " : "; up to ") + std::to_string(a.decode_steps) +
                         " greedy tokens after each prompt" + (a.dummy_weights ? "; dummy weights" : "");
  dev_info.decode_steps_per_prompt = a.decode_steps;
  calib::CollectionSettings collection;
  KC_ASSIGN_OR_RETURN(collection.rho_ppm, fraction_to_ppm(a.topk_fraction));
  collection.k_min = a.k_min;
  collection.tile_size = a.tile;
  collection.k_cal = a.k_cal;
  collection.forward = forward;
  KC_ASSIGN_OR_RETURN(calib::CalibrationFile file,
                      calib::build_calibration_file(id, dev_info, collection, result.stats, counts, a.default_anchors));
  if (refine == calib::RefineMethod::kAgreement) {
    // No --refine-anchors: the file's default count (known once the file is built).
    if (refine_counts.empty()) refine_counts.push_back(file.default_num_anchors);
    KC_RETURN_IF_ERROR(run_refinement(a, *runtime, dev, refine_counts, file));
  }
  return write_and_report(a, file);
}

}  // namespace

int run_calibrate(int argc, char** argv) {
  CLI::App app{
      "Calibrate Kascade for a model: collect cross-layer similarity and layer importance on a dev set, "
      "choose anchor layers by DP and head maps, write the calibration file"};
  app.name("kascade calibrate");
  Args a;
  app.add_option("-m,--model", a.model, "model directory (config.json, safetensors, tokenizer.json)");
  app.add_option("--model-name", a.model_name, "model name recorded in the file (default: the directory name)");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer.json (default: the model directory's)");
  app.add_option("--dev-set", a.dev_set,
                 "tasks:LIST (task suite dev split, e.g. tasks:all or tasks:niah_single_1,vt) or a JSONL file of "
                 "{\"prompt\": ...} lines");
  app.add_option("--lengths", a.lengths, "target lengths of tasks: dev sets, e.g. 2k,4k");
  app.add_option("--seed", a.seed, "user seed of the dev split");
  auto* np = app.add_option("--num-prompts", a.num_prompts,
                            "prompts to run (tasks: dev sets: default 16; a JSONL file: its first N, default all)")
                 ->check(CLI::PositiveNumber);
  app.add_option("--anchors", a.anchors, "anchor counts to derive: A..B or a list (default 2..8)");
  app.add_option("--default-anchors", a.default_anchors, "the file's default anchor count (default: nearest to 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--k-cal", a.k_cal, "Top-k of the similarity statistic")->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", a.decode_steps, "greedy tokens generated after each prompt")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--ignore-eos", a.ignore_eos, "generate all --decode-steps tokens even past end-of-sequence");
  app.add_option("--topk-fraction", a.topk_fraction, "Top-k fraction rho recorded for the runtime budget");
  app.add_option("--k-min", a.k_min, "minimum Top-k budget recorded for the runtime")->check(CLI::NonNegativeNumber);
  app.add_option("--tile", a.tile, "prefill tile size T")->check(CLI::PositiveNumber);
  app.add_option("--stats-forward", a.stats_forward,
                 "attention while collecting: dense (default) or sparse (the paper's: every layer attends its own "
                 "top-k_cal + local keys)")
      ->check(CLI::IsMember({"dense", "sparse"}));
  app.add_option("--chunk", a.chunk, "prefill chunk (rounded up to a multiple of the tile)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-context", a.max_context, "longest prompt + generation (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--dummy-weights", a.dummy_weights, "random weights of the config's shapes (mechanics only)");
  app.add_option("--dummy-dtype", a.dummy_dtype, "dtype of dummy weights: f32, f16, bf16");
  app.add_option("--dummy-seed", a.dummy_seed, "seed of the dummy weights");
  app.add_option("--device", a.device,
                 "where the model runs: cpu | cuda (the statistics are collected on the host either way)");
  app.add_option("--cuda-device", a.cuda_device, "CUDA device ordinal (--device cuda)")->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-dtype", a.cuda_dtype, "activation / weight / KV dtype on the GPU: bf16 | f16");
  app.add_option("-o,--out", a.out, "calibration file to write")->required();
  app.add_option("--plots", a.plots, "directory for similarity.png and importance.png");
  app.add_option("--from-stats", a.from_stats, "re-derive anchors from the statistics of this calibration file");
  app.add_option("--import-npy", a.import_npy, "import a published [layers, KV heads] int32 head map (.npy)");
  app.add_option("--import-anchors", a.import_anchors, "the anchors of the imported head map, e.g. 0,2,8,13,14");
  app.add_option("--refine", a.refine,
                 "after the DP: none (default) or agreement (hill-climb each refined count's set by agreement with "
                 "dense attention on the dev prompts; docs/spec-notes.md)")
      ->check(CLI::IsMember({"none", "agreement"}));
  std::vector<CLI::Option*> refine_options;
  refine_options.push_back(app.add_option("--refine-anchors", a.refine_anchors,
                                          "anchor counts to refine, among --anchors (default: the file's default count)"));
  refine_options.push_back(
      app.add_option("--refine-tokens", a.refine_tokens,
                     "positions scored per prompt: the prompt's last and the dense greedy continuation (default 32)")
          ->check(CLI::PositiveNumber));
  refine_options.push_back(app.add_option("--refine-prompts", a.refine_prompts,
                                          "score on the first N dev prompts (default: all)")
                               ->check(CLI::PositiveNumber));
  refine_options.push_back(app.add_option("--refine-rounds", a.refine_rounds,
                                          "most hill-climb moves per anchor count (default 3)")
                               ->check(CLI::NonNegativeNumber));
  app.add_flag("--no-progress", a.no_progress, "no progress line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  a.num_prompts_given = np->count() > 0;
  for (const CLI::Option* o : refine_options) a.refine_options_given = a.refine_options_given || o->count() > 0;
  if (a.refine != "none" && (!a.from_stats.empty() || !a.import_npy.empty())) {
    std::fprintf(stderr, "kascade calibrate: error: --refine %s runs the model on the dev prompts; it does not apply "
                         "to --from-stats or --import-npy (no model run)\n", a.refine.c_str());
    return 2;
  }
  if (a.refine == "none" && a.refine_options_given) {
    std::fprintf(stderr, "kascade calibrate: error: --refine-anchors, --refine-tokens, --refine-prompts and "
                         "--refine-rounds apply to --refine agreement only\n");
    return 2;
  }
  if (!a.from_stats.empty() && !a.import_npy.empty()) {
    std::fprintf(stderr, "kascade calibrate: error: give --from-stats or --import-npy, not both\n");
    return 2;
  }
  if (a.import_npy.empty() && !a.import_anchors.empty()) {
    std::fprintf(stderr, "kascade calibrate: error: --import-anchors applies to --import-npy only\n");
    return 2;
  }
  const Status s = !a.from_stats.empty()   ? run_from_stats(a)
                   : !a.import_npy.empty() ? run_import(a)
                                           : run_collection(a);
  if (!s.ok()) {
    std::fprintf(stderr, "kascade calibrate: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kascade::tools
