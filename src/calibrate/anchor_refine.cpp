// anchor_refine.cpp — the local search of the anchor refinement (an extension of DESIGN.md §2.5,
// docs/spec-notes.md): the swap neighbourhood of an anchor set (replace one anchor other than layer 0
// by one non-anchor layer, K fixed), the score order (agreement, then KL) and the best-improvement
// hill climb over any scorer. The scorer that runs the model is src/runtime/anchor_agreement.h.
// Tested by tests/unit/calibrate/test_anchor_refine.cpp (neighbourhood against a filter over every
// K-set, climbs with synthetic scorers against brute force, local optima, round limit, memoisation).
#include <algorithm>
#include <map>

#include "kascade/calibration.h"

namespace kascade::calib {

std::string format_anchors(std::span<const int32_t> anchors) {
  std::string out;
  for (size_t i = 0; i < anchors.size(); ++i) out += detail::concat(i ? "," : "", anchors[i]);
  return out;
}

bool better_agreement(const AgreementScore& a, const AgreementScore& b) {
  // Equal fractions give equal doubles (division is correctly rounded); distinct fractions with
  // denominators below 2^26 never round to the same double.
  if (a.agreement() != b.agreement()) return a.agreement() > b.agreement();
  return a.mean_kl < b.mean_kl;
}

const char* refine_method_name(RefineMethod method) {
  return method == RefineMethod::kAgreement ? "agreement" : "none";
}

Result<RefineMethod> parse_refine_method(std::string_view name) {
  if (name == "none") return RefineMethod::kNone;
  if (name == "agreement") return RefineMethod::kAgreement;
  return invalid_argument("refinement method '", name, "'; expected none or agreement");
}

Result<std::vector<std::vector<int32_t>>> anchor_swap_neighbours(std::span<const int32_t> anchors,
                                                                 int32_t num_layers) {
  KC_RETURN_IF_ERROR(validate_anchors(anchors, num_layers));
  std::vector<bool> is_anchor(static_cast<size_t>(num_layers), false);
  for (const int32_t a : anchors) is_anchor[static_cast<size_t>(a)] = true;
  std::vector<std::vector<int32_t>> out;
  for (size_t m = 1; m < anchors.size(); ++m) {
    for (int32_t layer = 1; layer < num_layers; ++layer) {
      if (is_anchor[static_cast<size_t>(layer)]) continue;
      std::vector<int32_t> set(anchors.begin(), anchors.end());
      set[m] = layer;
      std::sort(set.begin(), set.end());
      out.push_back(std::move(set));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<HillClimbResult> hill_climb_anchors(std::span<const int32_t> start, int32_t num_layers, int32_t max_rounds,
                                           const AnchorScorer& scorer, const HillClimbProgressFn& progress) {
  KC_RETURN_IF_ERROR(validate_anchors(start, num_layers));
  KC_CHECK_ARG(max_rounds >= 0, "hill climb: max_rounds is ", max_rounds, "; expected >= 0");
  KC_CHECK_ARG(static_cast<bool>(scorer), "hill climb: no scorer");
  std::map<std::vector<int32_t>, AgreementScore> scored;
  HillClimbResult result;
  const auto score = [&](const std::vector<int32_t>& set) -> Result<AgreementScore> {
    Result<AgreementScore> s = scorer(set);
    if (!s.ok()) {
      Status e = s.status();
      return e.with_context("scoring anchors " + format_anchors(set));
    }
    scored.emplace(set, *s);
    result.sets_scored += 1;
    return s;
  };

  result.start.anchors.assign(start.begin(), start.end());
  KC_ASSIGN_OR_RETURN(result.start.score, score(result.start.anchors));
  result.best = result.start;
  for (int32_t round = 1; round <= max_rounds; ++round) {
    KC_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> neighbours,
                        anchor_swap_neighbours(result.best.anchors, num_layers));
    if (neighbours.empty()) {
      result.local_optimum = true;
      break;
    }
    HillClimbProgress state;
    state.round = round;
    state.max_rounds = max_rounds;
    for (const auto& set : neighbours) state.to_score_in_round += scored.count(set) == 0 ? 1 : 0;
    state.sets_scored = result.sets_scored;
    if (progress) progress(state);

    ClimbRound r;
    r.from = result.best.anchors;
    for (auto& set : neighbours) {
      const auto known = scored.find(set);
      AgreementScore s;
      if (known != scored.end()) {
        s = known->second;
      } else {
        KC_ASSIGN_OR_RETURN(s, score(set));
        state.scored_in_round += 1;
        state.sets_scored = result.sets_scored;
        if (progress) progress(state);
      }
      r.candidates.push_back({std::move(set), s});
    }
    for (size_t i = 1; i < r.candidates.size(); ++i) {
      if (better_agreement(r.candidates[i].score, r.candidates[r.best].score)) r.best = i;
    }
    r.moved = better_agreement(r.candidates[r.best].score, result.best.score);
    if (r.moved) result.best = r.candidates[r.best];
    const bool moved = r.moved;
    result.rounds.push_back(std::move(r));
    if (!moved) {
      result.local_optimum = true;
      break;
    }
  }
  return result;
}

}  // namespace kascade::calib
