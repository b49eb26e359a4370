// refined_sets.cpp — refined anchor sets in a calibration file (the extension of docs/spec-notes.md):
// apply_refinement() puts a hill climb's result (src/calibrate/anchor_refine.cpp) in place of the
// DP's set and records the DP set beside it; carry_refinements() decides, for --from-stats, which
// saved refinements still describe the re-derived file.
// Tested by tests/unit/calibrate/test_calibration_file.cpp (CalibrationFileRefinement.*: applied sets,
// refusals, round trip, malformed fields, carry-over and drops) and tests/scripts/test_calibrate_refine.sh.
#include <string>

#include "kascade/calibration.h"

namespace kascade::calib {
namespace {

AnchorSet* find_set(CalibrationFile& file, size_t num_anchors) {
  for (AnchorSet& set : file.anchor_sets) {
    if (set.anchors.size() == num_anchors) return &set;
  }
  return nullptr;
}

}  // namespace

Status apply_refinement(CalibrationFile& file, const HillClimbResult& climb, const RefineSettings& settings) {
  KC_CHECK_ARG(file.source == CalibrationSource::kCollected && file.stats.has_value(),
               "refinement: the file holds no statistics (an imported head map); only collected files are refined");
  const size_t k = climb.start.anchors.size();
  AnchorSet* set = find_set(file, k);
  KC_CHECK_ARG(set != nullptr, "refinement: the file has no anchor set with ", k, " anchors");
  KC_CHECK_ARG(!set->refinement.has_value(), "refinement: the ", k, "-anchor set is refined already");
  KC_CHECK_ARG(set->anchors == climb.start.anchors, "refinement: the climb started from ", format_anchors(climb.start.anchors),
               " but the file's ", k, "-anchor set (the DP set) is ", format_anchors(set->anchors));
  KC_CHECK_ARG(climb.best.anchors.size() == k, "refinement: the climb ended at ", format_anchors(climb.best.anchors), ", not ",
               k, " anchors");
  KC_CHECK_ARG(!better_agreement(climb.start.score, climb.best.score), "refinement: the climb ended at ",
               format_anchors(climb.best.anchors), ", which scores below its start ", format_anchors(climb.start.anchors));
  KC_CHECK_ARG(climb.best.score.steps == climb.start.score.steps && climb.start.score.steps >= 1,
               "refinement: both sets must be scored over the same positions (", climb.start.score.steps, " and ",
               climb.best.score.steps, ")");
  KC_ASSIGN_OR_RETURN(const std::vector<double> W, layer_scores(*file.stats));
  AnchorRefinement r;
  r.dp_anchors = set->anchors;
  KC_ASSIGN_OR_RETURN(r.dp_objective, anchor_objective(W, file.stats->num_layers, set->anchors));
  r.agreement = climb.best.score.agreement();
  r.kl = climb.best.score.mean_kl;
  r.dp_agreement = climb.start.score.agreement();
  r.dp_kl = climb.start.score.mean_kl;
  r.tokens = settings.tokens;
  r.prompts = settings.prompts;
  r.steps = climb.start.score.steps;
  r.max_rounds = settings.max_rounds;
  r.rounds = static_cast<int32_t>(climb.rounds.size());
  r.local_optimum = climb.local_optimum;
  r.sets_scored = climb.sets_scored;

  AnchorSet refined;
  refined.anchors = climb.best.anchors;
  KC_ASSIGN_OR_RETURN(refined.head_map, build_head_map(*file.stats, refined.anchors));
  KC_ASSIGN_OR_RETURN(const double objective, anchor_objective(W, file.stats->num_layers, refined.anchors));
  refined.objective = objective;
  refined.refinement = std::move(r);
  const AnchorSet previous = *set;
  *set = std::move(refined);
  Status s = validate_calibration(file);
  if (!s.ok()) {
    *set = previous;
    return s.with_context("refinement");
  }
  return ok_status();
}

Result<std::vector<std::string>> carry_refinements(const CalibrationFile& saved, CalibrationFile& derived) {
  std::vector<std::string> notes;
  for (const AnchorSet& s : saved.anchor_sets) {
    if (!s.refinement) continue;
    const size_t k = s.anchors.size();
    AnchorSet* target = find_set(derived, k);
    if (target == nullptr) {
      notes.push_back(detail::concat("the refined ", k, "-anchor set ", format_anchors(s.anchors),
                                     " is dropped: no ", k, "-anchor set is derived now"));
      continue;
    }
    if (target->anchors != s.refinement->dp_anchors) {
      notes.push_back(detail::concat("the refined ", k, "-anchor set ", format_anchors(s.anchors), " is dropped: it was climbed from ",
                                     format_anchors(s.refinement->dp_anchors), " but the DP now gives ", format_anchors(target->anchors),
                                     " (kept: the DP set)"));
      continue;
    }
    *target = s;
    notes.push_back(detail::concat("the refined ", k, "-anchor set ", format_anchors(s.anchors), " (from the DP set ",
                                   format_anchors(s.refinement->dp_anchors), ", agreement ", s.refinement->agreement, " vs ",
                                   s.refinement->dp_agreement, ") is carried over as saved: the DP set is the same, ",
                                   "the scores are the saved run's (not re-scored without the model)"));
  }
  KC_RETURN_IF_ERROR(validate_calibration(derived));
  return notes;
}

}  // namespace kascade::calib
