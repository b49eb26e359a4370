// src/runtime/anchor_refinement.h — `kascade calibrate --refine agreement` (docs/spec-notes.md): for
// each chosen anchor count K of a collected calibration file, start at the DP's set and hill-climb
// (src/calibrate/anchor_refine.cpp: swap one anchor other than layer 0 for one non-anchor layer, K
// fixed) on the agreement with dense attention (src/runtime/anchor_agreement.h), then put the
// refined set in the file in place of the DP set, which the set records as refinement.dp_anchors
// (calib::apply_refinement). The dense reference is built once for all counts; candidate head maps
// come from the file's statistics (calib::build_head_map, DESIGN.md §2.5's rule).
// Runs on the runtime's device; the runtime's policy is replaced.
// Tested by tests/unit/runtime/test_anchor_refinement.cpp (tiny random model: the climb's result is
// the best of every set the DP set's neighbourhood reaches, the file holds it, its recorded score is
// reproduced through a runtime made from the written file, other counts untouched, refusals).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kascade/calibration.h"
#include "kascade/runtime.h"
#include "runtime/anchor_agreement.h"
#include "runtime/calibration_collector.h"

namespace kascade::runtime {

struct RefinementOptions {
  std::vector<int32_t> anchor_counts;  // the counts to refine; each must have a set in the file
  int32_t tokens = 32;                 // rows scored per prompt (AgreementOptions::tokens)
  int32_t max_rounds = 3;              // neighbourhood scans per count
  bool stop_at_eos = true;             // AgreementOptions::stop_at_eos
};

struct RefinementProgress {
  bool reference = false;         // building the dense reference (else climbing)
  int64_t reference_done = 0;     // reference prompts done (of `prompts`)
  int64_t prompts = 0;
  int32_t num_anchors = 0;        // the count being refined
  calib::HillClimbProgress climb; // where its climb is
  int64_t runs_done = 0;          // candidate prompt runs done, all counts
  double seconds_per_run = 0.0;   // mean wall time of a candidate prompt run so far
  double eta_round_s = 0.0;       // left in this round at that rate
  double eta_max_s = 0.0;         // left at most (every later round scoring every new neighbour)
  double elapsed_s = 0.0;
};
using RefinementProgressFn = std::function<void(const RefinementProgress&)>;

struct RefinedCount {
  int32_t num_anchors = 0;
  calib::HillClimbResult climb;
};
struct RefinementResult {
  std::vector<RefinedCount> counts;  // in the order of options.anchor_counts
  int64_t steps = 0;                 // rows scored per candidate (all prompts)
  int64_t prompts = 0;
  double reference_seconds = 0.0;
  double seconds = 0.0;              // the whole refinement
};

// The largest number of distinct sets a climb from a K-set of N layers can score in `max_rounds`
// rounds: 1 + (K − 1)(N − K) + (max_rounds − 1)(K − 2)(N − K − 1) (after a move from A to A − x + y,
// N − 2 of the new neighbours are neighbours of A: A itself, the A − x + z, and the A − u + y).
int64_t max_sets_scored(int32_t num_anchors, int32_t num_layers, int32_t max_rounds);

// Refines `file` in place (see the top of this file). Refuses: an imported file, a count without a
// set or listed twice, tokens < 1, max_rounds < 0, no prompts.
Result<RefinementResult> refine_anchor_sets(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                            calib::CalibrationFile& file, const RefinementOptions& options,
                                            const RefinementProgressFn& progress = {});

}  // namespace kascade::runtime
