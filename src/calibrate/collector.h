// src/calibrate/collector.h — the statistics collector of `kascade calibrate` (DESIGN.md §2.5) that
// runs inside the model forward: a recording AttentionPolicy plus the layer observer of the
// importance statistic, both feeding one SimilarityAccumulator and one ImportanceAccumulator.
//
//   auto collector = StatsCollector::create(config);          // shapes, k_cal, T, stats forward
//   runtime.set_policy((*collector)->make_policy());
//   runtime.set_layer_observer([c = *collector](int32_t l, const float* x, const float* a, int64_t n) {
//     return c->observe(l, x, a, n); });
//   for each prompt: begin_prompt(name); run the model (prefill + decode); end_prompt();
//   stats();                                                   // sim and w over the finished prompts
//
// What the recording policy does at every layer l of every forward call (one sequence per call):
//   - its output: dense causal attention (StatsForward::kDense, the default), or — kSparse, the
//     paper's "stats" forward — every layer, layer 0 included, attends its own top-min(k_cal, s_t)
//     pooled keys of each tile plus the tile's local keys (decode: top-min(k_cal, n) of all n keys),
//     per KV group, no reuse;
//   - its statistics, one unit at a time: for each prefill tile t >= 1 of the call, the pooled
//     scores S^l_{g,t}[j] (j < s_t, summed over the tile's queries in this call and the g query heads
//     of KV group g) and the local mass LT^l_{g,t} (src/ref/scores_ref.h), streamed into the
//     similarity accumulator as unit t; for a decode step at position n−1, S^l_g over all n keys as
//     unit −n. One unit's scores ([G, s_t] floats) live at a time: S is never held for all layers
//     or all tiles.
// Prefill calls must start on a tile boundary (chunks that are multiples of T), so each tile is one
// unit seen whole in one call; calls hold one sequence (the accumulators hold one prompt at a time).
// The policy reads host memory (the CPU runtime) and counts attended keys like every policy (dense
// layers: the full causal range).
//
// Tested by tests/unit/calibrate/test_collector.cpp (the policy driven directly on random q/K/V:
// statistics and outputs against an fp64 recomputation, refusals) and, inside the model, by
// tests/unit/runtime/test_calibration_collector.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "kascade/calibration.h"
#include "kascade/policy.h"
#include "kascade/status.h"

namespace kascade::calib {

struct CollectorConfig {
  int32_t num_layers = 0;    // N
  int32_t num_heads = 0;     // H
  int32_t num_kv_heads = 0;  // G (H % G == 0)
  int32_t head_dim = 0;      // d
  int64_t hidden_size = 0;   // rows of the importance observer
  int64_t k_cal = 32;        // Top-k of the similarity statistic (and of the sparse stats forward)
  int32_t tile_size = 32;    // prefill tile T
  StatsForward forward = StatsForward::kDense;
};

Status validate_collector_config(const CollectorConfig& config);

// What one prompt contributed.
struct PromptUnits {
  int64_t prefill_tiles = 0;   // units from prefill tiles t >= 1
  int64_t decode_steps = 0;    // units from decode steps
  int64_t prefill_tokens = 0;  // tokens of prefill calls
  int64_t decode_tokens = 0;   // tokens of decode calls
};

class StatsCollector : public std::enable_shared_from_this<StatsCollector> {
 public:
  static Result<std::shared_ptr<StatsCollector>> create(const CollectorConfig& config);

  const CollectorConfig& config() const { return config_; }

  // A recording policy over this collector (it shares ownership of the collector). Its config()
  // carries the model shape and the name "calibration-dense" / "calibration-sparse".
  std::unique_ptr<AttentionPolicy> make_policy();

  // The importance observer: x, attn: [tokens, hidden_size] fp32 (the residual stream entering
  // `layer` and the attention block output after o_proj).
  Status observe(int32_t layer, const float* x, const float* attn, int64_t tokens);

  // Prompts: forward calls and observations between begin_prompt and end_prompt belong to it.
  Status begin_prompt(std::string_view name);
  // Closes the prompt (its per-prompt minimum joins the mean); on failure the prompt is discarded.
  Result<PromptUnits> end_prompt();
  void discard_prompt();
  bool in_prompt() const { return similarity_.in_prompt(); }
  int64_t num_prompts() const { return similarity_.num_prompts(); }

  // sim and w over the finished prompts (fails when none finished).
  Result<CalibrationStats> stats() const;

  // For the recording policy: one unit's pooled scores at `layer` (see SimilarityAccumulator::add).
  Status record_unit(int64_t unit, int32_t layer, const UnitScores& scores, bool decode);
  // For the recording policy: tokens of a forward call (counted once per call, at layer 0).
  void record_call_tokens(ForwardMode mode, int64_t tokens);

 private:
  StatsCollector(const CollectorConfig& config, SimilarityAccumulator similarity, ImportanceAccumulator importance)
      : config_(config), similarity_(std::move(similarity)), importance_(std::move(importance)) {}

  CollectorConfig config_;
  SimilarityAccumulator similarity_;
  ImportanceAccumulator importance_;
  PromptUnits units_;
};

}  // namespace kascade::calib
