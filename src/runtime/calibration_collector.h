// src/runtime/calibration_collector.h — runs a dev set through the CPU runtime with the recording
// policy of src/calibrate/collector.h and returns the calibration statistics (DESIGN.md §2.5):
// per prompt, the prompt is prefilled (chunks of the runtime's chunk size, which must be a multiple
// of the tile size) and up to `decode_tokens` greedy tokens are generated after it (the paper's code
// generates 32; a token is a decode unit once it is fed back, so D tokens give D − 1 decode steps,
// fewer when the model stops at an end-of-sequence token). Every layer's pooled scores stream into
// the similarity accumulator unit by unit; the layer observer feeds the importance accumulator.
//
// Lives in src/runtime (not src/calibrate) because it drives a Runtime, and the runtime module
// already depends on the calibrate module (calibration files): this keeps the library graph acyclic.
// The runtime's policy is replaced by the recording policy (it stays installed afterwards) and its
// layer observer is cleared when the run ends.
// Tested by tests/unit/runtime/test_calibration_collector.cpp (statistics against a recomputation
// from the q/K/x/attn the run saw, per-prompt minimum, decode steps, refusals).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "calibrate/collector.h"
#include "kascade/calibration.h"
#include "kascade/runtime.h"

namespace kascade::runtime {

struct CalibrationPrompt {
  std::string name;             // for messages ("tasks:vt/4096/3", "dev.jsonl:12")
  std::vector<int32_t> tokens;  // >= 1 token ids, as the model reads them (BOS included)
};

// Hooks that see what the collector sees (tests recompute the statistics from them; tracing).
struct CalibrationTaps {
  // Wraps the recording policy before it is installed (the wrapper must forward every call).
  std::function<std::unique_ptr<AttentionPolicy>(std::unique_ptr<AttentionPolicy>)> wrap_policy;
  // Called with every observation before the collector takes it.
  LayerObserver observe;
};

struct CalibrationRunOptions {
  int64_t k_cal = 32;
  calib::StatsForward forward = calib::StatsForward::kDense;
  int32_t decode_tokens = 32;  // greedy tokens generated after each prompt (>= 0)
  bool stop_at_eos = true;     // stop a prompt's generation at the model's end-of-sequence tokens
  CalibrationTaps taps;
};

struct CalibrationProgress {
  int64_t prompts_done = 0;
  int64_t prompts_total = 0;
  int64_t tokens_done = 0;     // prompt + decode tokens fed so far
  int64_t tokens_planned = 0;  // prompt tokens + decode_tokens per prompt (an upper bound)
  double elapsed_s = 0.0;
  double tokens_per_s() const { return elapsed_s > 0 ? static_cast<double>(tokens_done) / elapsed_s : 0.0; }
  // Seconds left at the current rate (0 when unknown or done).
  double eta_s() const {
    const double rate = tokens_per_s();
    return rate > 0 && tokens_planned > tokens_done ? static_cast<double>(tokens_planned - tokens_done) / rate : 0.0;
  }
};

struct CalibrationRunResult {
  calib::CalibrationStats stats;
  int64_t prefill_units = 0;  // prefill tiles t >= 1, over all prompts
  int64_t decode_units = 0;   // decode steps, over all prompts
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double seconds = 0.0;
  std::vector<std::vector<int32_t>> generated;  // [prompt] the greedy tokens generated after it
};

using CalibrationProgressFn = std::function<void(const CalibrationProgress&)>;

// The collector configuration for `runtime`'s model and tile size.
Result<calib::CollectorConfig> collector_config_for(const Runtime& runtime, const CalibrationRunOptions& options);

// Runs every prompt (one at a time) and returns the statistics; `progress` is called after each
// prompt. Refuses: no prompts, a chunk size that is not a multiple of the tile size, a prompt that
// does not fit the context, a prompt without any unit (shorter than T + 1 tokens and no decode
// step) — each error names the prompt.
Result<CalibrationRunResult> collect_calibration_stats(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                                       const CalibrationRunOptions& options,
                                                       const CalibrationProgressFn& progress = {});

}  // namespace kascade::runtime
