// anchor_brute_force.cpp — select_anchors_brute_force(): evaluates anchor_objective() for every
// set {0} ∪ (K−1 layers of 1..N−1) in lexicographic order and keeps the first maximum. The
// independent check of the DP in anchor_selection.cpp; tested there against it.
#include "kascade/calibration.h"

namespace kascade::calib {

Result<AnchorChoice> select_anchors_brute_force(std::span<const double> W, int32_t num_layers,
                                                int32_t num_anchors) {
  KC_RETURN_IF_ERROR(validate_layer_scores(W, num_layers));
  KC_CHECK_ARG(num_anchors >= 1 && num_anchors <= num_layers, "anchors: num_anchors is ", num_anchors,
               "; expected 1..", num_layers, " (the number of layers)");
  // C(N − 1, K − 1) sets; refuse more than 10^7.
  constexpr double kMaxSets = 1e7;
  double sets = 1.0;
  for (int32_t i = 0; i < num_anchors - 1; ++i) sets = sets * (num_layers - 1 - i) / (i + 1);
  KC_CHECK_ARG(sets <= kMaxSets, "anchors: brute force over ", num_layers, " layers and ", num_anchors,
               " anchors would enumerate ", sets, " sets (limit 1e7)");

  const int32_t K = num_anchors;
  std::vector<int32_t> anchors(K);  // [K]: 0, then the lexicographically first combination 1..K−1
  for (int32_t m = 0; m < K; ++m) anchors[m] = m;
  AnchorChoice best;
  bool have_best = false;
  while (true) {
    KC_ASSIGN_OR_RETURN(const double objective, anchor_objective(W, num_layers, anchors));
    if (!have_best || objective > best.objective) {
      best.anchors = anchors;
      best.objective = objective;
      have_best = true;
    }
    // Next combination of positions 1..K−1 over the values 1..N−1, in lexicographic order.
    int32_t m = K - 1;
    while (m >= 1 && anchors[m] == num_layers - K + m) --m;
    if (m < 1) break;
    ++anchors[m];
    for (int32_t i = m + 1; i < K; ++i) anchors[i] = anchors[i - 1] + 1;
  }
  return best;
}

}  // namespace kascade::calib
