// anchor_selection.cpp — the anchor DP of DESIGN.md §2.5: layer 0 plus K−1 layers maximising
// Σ_m Σ_{j=a_m}^{a_{m+1}−1} W(a_m, j) (a_{K+1} = N), in O(K·N²), ties to the lowest layer index;
// plus the checks of layer scores and anchor lists and the objective of a given set.
// Tested by tests/unit/calibrate/test_anchor_selection.cpp (against select_anchors_brute_force on
// random W over many seeds, and crafted ties).
#include <cmath>
#include <limits>

#include "kascade/calibration.h"

namespace kascade::calib {

Status validate_layer_scores(std::span<const double> W, int32_t num_layers) {
  KC_CHECK_ARG(num_layers >= 1, "layer scores: num_layers is ", num_layers, "; expected >= 1");
  const size_t N = static_cast<size_t>(num_layers);
  KC_CHECK_ARG(W.size() == N * N, "layer scores have ", W.size(), " values; expected [", N, ", ", N, "]");
  for (size_t a = 0; a < N; ++a) {
    for (size_t b = a; b < N; ++b) {
      KC_CHECK_ARG(std::isfinite(W[a * N + b]), "layer scores W(", a, ", ", b, ") is ", W[a * N + b],
                   "; expected a finite value");
    }
  }
  return ok_status();
}

Status validate_anchors(std::span<const int32_t> anchors, int32_t num_layers) {
  KC_CHECK_ARG(!anchors.empty(), "anchors: the list is empty; layer 0 is always an anchor");
  KC_CHECK_ARG(anchors[0] == 0, "anchors: the first anchor is ", anchors[0], "; it must be layer 0");
  for (size_t m = 0; m < anchors.size(); ++m) {
    KC_CHECK_ARG(anchors[m] >= 0 && anchors[m] < num_layers, "anchors[", m, "] = ", anchors[m],
                 " is out of range [0, ", num_layers, ")");
    if (m > 0) {
      KC_CHECK_ARG(anchors[m] > anchors[m - 1], "anchors[", m, "] = ", anchors[m], " is not greater than anchors[",
                   m - 1, "] = ", anchors[m - 1], "; anchors must be strictly ascending");
    }
  }
  return ok_status();
}

Result<double> anchor_objective(std::span<const double> W, int32_t num_layers, std::span<const int32_t> anchors) {
  KC_RETURN_IF_ERROR(validate_layer_scores(W, num_layers));
  KC_RETURN_IF_ERROR(validate_anchors(anchors, num_layers));
  const size_t N = static_cast<size_t>(num_layers);
  double objective = 0.0;
  for (size_t m = 0; m < anchors.size(); ++m) {
    const size_t a = static_cast<size_t>(anchors[m]);
    const size_t end = m + 1 < anchors.size() ? static_cast<size_t>(anchors[m + 1]) : N;
    for (size_t j = a; j < end; ++j) objective += W[a * N + j];
  }
  return objective;
}

Result<AnchorChoice> select_anchors(std::span<const double> W, int32_t num_layers, int32_t num_anchors) {
  KC_RETURN_IF_ERROR(validate_layer_scores(W, num_layers));
  KC_CHECK_ARG(num_anchors >= 1 && num_anchors <= num_layers, "anchors: num_anchors is ", num_anchors,
               "; expected 1..", num_layers, " (the number of layers)");
  const int32_t N = num_layers;
  const int32_t K = num_anchors;

  // segment[a][e] = Σ_{j=a}^{e−1} W(a, j) for a <= e <= N: the score of anchor a covering [a, e).
  std::vector<double> segment(static_cast<size_t>(N) * (N + 1), 0.0);  // [N, N + 1]
  auto seg = [&](int32_t a, int32_t e) -> double& { return segment[static_cast<size_t>(a) * (N + 1) + e]; };
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t e = a; e < N; ++e) seg(a, e + 1) = seg(a, e) + W[static_cast<size_t>(a) * N + e];
  }

  // best[r][a]: the best score of layers [a, N) given an anchor at a followed by r more anchors;
  // next[r][a]: the lowest next anchor that attains it. Defined for a <= N − 1 − r.
  const double kUnset = -std::numeric_limits<double>::infinity();
  std::vector<double> best(static_cast<size_t>(K) * N, kUnset);  // [K, N]
  std::vector<int32_t> next(static_cast<size_t>(K) * N, -1);      // [K, N]
  for (int32_t a = 0; a < N; ++a) best[a] = seg(a, N);
  for (int32_t r = 1; r < K; ++r) {
    for (int32_t a = 0; a <= N - 1 - r; ++a) {
      double top = kUnset;
      int32_t arg = -1;
      for (int32_t next_anchor = a + 1; next_anchor <= N - r; ++next_anchor) {
        const double value = seg(a, next_anchor) + best[static_cast<size_t>(r - 1) * N + next_anchor];
        if (arg < 0 || value > top) {  // strict: the lowest next anchor wins ties
          top = value;
          arg = next_anchor;
        }
      }
      best[static_cast<size_t>(r) * N + a] = top;
      next[static_cast<size_t>(r) * N + a] = arg;
    }
  }

  AnchorChoice choice;
  choice.anchors.push_back(0);
  int32_t a = 0;
  for (int32_t r = K - 1; r >= 1; --r) {
    a = next[static_cast<size_t>(r) * N + a];
    if (a < 0) return internal_error("anchors: the DP left no successor for ", r, " remaining anchors");
    choice.anchors.push_back(a);
  }
  KC_ASSIGN_OR_RETURN(choice.objective, anchor_objective(W, num_layers, choice.anchors));
  return choice;
}

}  // namespace kascade::calib
