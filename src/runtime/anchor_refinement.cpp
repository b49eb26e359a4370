// src/runtime/anchor_refinement.cpp — the refinement driver (anchor_refinement.h): the dense reference
// once, then per anchor count a hill climb whose scorer runs the candidate's kascade policy, the
// progress estimates, and the refined sets written into the file.
// Tested by tests/unit/runtime/test_anchor_refinement.cpp.
#include "runtime/anchor_refinement.h"

#include <algorithm>
#include <chrono>

namespace kascade::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int64_t max_sets_scored(int32_t num_anchors, int32_t num_layers, int32_t max_rounds) {
  const int64_t k = num_anchors, n = num_layers;
  if (max_rounds <= 0 || k < 2 || k >= n) return 1;
  return 1 + (k - 1) * (n - k) + static_cast<int64_t>(max_rounds - 1) * (k - 2) * (n - k - 1);
}

Result<RefinementResult> refine_anchor_sets(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                            calib::CalibrationFile& file, const RefinementOptions& options,
                                            const RefinementProgressFn& progress) {
  KC_CHECK_ARG(file.source == calib::CalibrationSource::kCollected && file.stats.has_value(),
               "refinement needs a collected calibration file (its statistics build the head maps)");
  KC_CHECK_ARG(!options.anchor_counts.empty(), "refinement: no anchor count to refine");
  KC_CHECK_ARG(options.max_rounds >= 0, "refinement: rounds is ", options.max_rounds, "; expected >= 0");
  for (size_t i = 0; i < options.anchor_counts.size(); ++i) {
    const int32_t k = options.anchor_counts[i];
    KC_CHECK_ARG(file.find_anchor_set(k) != nullptr, "refinement: the file has no ", k, "-anchor set to refine");
    for (size_t j = 0; j < i; ++j)
      KC_CHECK_ARG(options.anchor_counts[j] != k, "refinement: anchor count ", k, " is listed twice");
  }
  const calib::CalibrationStats& stats = *file.stats;
  const int32_t num_layers = stats.num_layers;
  const auto start = Clock::now();

  RefinementProgress state;
  state.prompts = static_cast<int64_t>(prompts.size());
  state.reference = true;
  if (progress) progress(state);
  AgreementOptions agreement;
  agreement.tokens = options.tokens;
  agreement.stop_at_eos = options.stop_at_eos;
  KC_ASSIGN_OR_RETURN(const DenseReference reference, build_dense_reference(runtime, prompts, agreement, [&] {
                        state.reference_done += 1;
                        state.elapsed_s = seconds_since(start);
                        if (progress) progress(state);
                      }));
  RefinementResult result;
  result.prompts = static_cast<int64_t>(reference.prompts.size());
  result.steps = reference.steps();
  result.reference_seconds = seconds_since(start);
  state.reference = false;

  // Sets left at most after the current count's climb (for the ETA).
  std::vector<int64_t> later_sets(options.anchor_counts.size(), 0);
  for (size_t i = options.anchor_counts.size(); i-- > 1;)
    later_sets[i - 1] = later_sets[i] + max_sets_scored(options.anchor_counts[i], num_layers, options.max_rounds);

  for (size_t i = 0; i < options.anchor_counts.size(); ++i) {
    const int32_t k = options.anchor_counts[i];
    state.num_anchors = k;
    state.climb = {};
    int64_t runs_in_set = 0;  // prompt runs of the set being scored
    const auto report = [&] {
      const double per_set = state.seconds_per_run * static_cast<double>(result.prompts);
      const int64_t left_round = std::max<int64_t>(0, state.climb.to_score_in_round - state.climb.scored_in_round);
      const int64_t left_count =
          std::max<int64_t>(0, max_sets_scored(k, num_layers, options.max_rounds) - state.climb.sets_scored);
      const double in_set = state.seconds_per_run * static_cast<double>(runs_in_set);
      state.eta_round_s = std::max(0.0, per_set * static_cast<double>(left_round) - in_set);
      state.eta_max_s = std::max(0.0, per_set * static_cast<double>(left_count + later_sets[i]) - in_set);
      state.elapsed_s = seconds_since(start);
      if (progress) progress(state);
    };
    const calib::AnchorScorer scorer = [&](std::span<const int32_t> anchors) -> Result<calib::AgreementScore> {
      Schedule schedule;
      schedule.anchors.assign(anchors.begin(), anchors.end());
      KC_ASSIGN_OR_RETURN(schedule.head_map, calib::build_head_map(stats, schedule.anchors));
      runs_in_set = 0;
      return score_agreement(runtime, reference, schedule, [&] {
        state.runs_done += 1;
        runs_in_set += 1;
        state.seconds_per_run =
            (seconds_since(start) - result.reference_seconds) / static_cast<double>(state.runs_done);
        report();
      });
    };
    const calib::AnchorSet* dp = file.find_anchor_set(k);
    KC_ASSIGN_OR_RETURN(calib::HillClimbResult climb,
                        calib::hill_climb_anchors(dp->anchors, num_layers, options.max_rounds, scorer,
                                                  [&](const calib::HillClimbProgress& p) {
                                                    state.climb = p;
                                                    runs_in_set = 0;
                                                    report();
                                                  }));
    calib::RefineSettings settings;
    settings.tokens = options.tokens;
    settings.prompts = result.prompts;
    settings.max_rounds = options.max_rounds;
    KC_RETURN_IF_ERROR(calib::apply_refinement(file, climb, settings));
    result.counts.push_back({k, std::move(climb)});
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace kascade::runtime
