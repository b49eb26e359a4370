// calibration_stats.cpp — CalibrationStats: validation, assembly from the two accumulators, and
// the layer score W(a, b) = w_b · mean_gb max_ga sim[a][b][ga][gb] (DESIGN.md §2.5).
// Tested by tests/unit/calibrate/test_anchor_selection.cpp (layer scores against a direct
// evaluation) and test_calibration_file.cpp (validation).
#include <algorithm>
#include <cmath>

#include "kascade/calibration.h"

namespace kascade::calib {

Status validate_stats(const CalibrationStats& stats) {
  const int64_t N = stats.num_layers;
  const int64_t G = stats.num_kv_heads;
  KC_CHECK_ARG(N >= 1, "statistics: num_layers is ", N, "; expected >= 1");
  KC_CHECK_ARG(G >= 1, "statistics: num_kv_heads is ", G, "; expected >= 1");
  KC_CHECK_ARG(stats.num_prompts >= 1, "statistics.num_prompts is ", stats.num_prompts, "; expected >= 1");
  KC_CHECK_ARG(static_cast<int64_t>(stats.similarity.size()) == N * N * G * G, "statistics.similarity has ",
               stats.similarity.size(), " values; expected [", N, ", ", N, ", ", G, ", ", G, "] = ", N * N * G * G);
  KC_CHECK_ARG(static_cast<int64_t>(stats.importance.size()) == N, "statistics.importance has ",
               stats.importance.size(), " values; expected ", N);
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = 0; b < N; ++b) {
      for (int32_t ga = 0; ga < G; ++ga) {
        for (int32_t gb = 0; gb < G; ++gb) {
          const double v = stats.sim(a, b, ga, gb);
          if (a > b) {
            KC_CHECK_ARG(v == 0.0, "statistics.similarity[", a, "][", b, "][", ga, "][", gb, "] is ", v,
                         "; entries with anchor_layer > reuse_layer must be 0");
          } else {
            KC_CHECK_ARG(std::isfinite(v) && v >= 0.0, "statistics.similarity[", a, "][", b, "][", ga, "][", gb,
                         "] is ", v, "; expected a finite value >= 0");
          }
        }
      }
    }
  }
  for (int32_t l = 0; l < N; ++l) {
    KC_CHECK_ARG(std::isfinite(stats.importance[l]), "statistics.importance[", l, "] is ", stats.importance[l],
                 "; expected a finite value");
  }
  return ok_status();
}

Result<CalibrationStats> make_calibration_stats(const SimilarityAccumulator& similarity,
                                                const ImportanceAccumulator& importance) {
  KC_CHECK_ARG(similarity.num_layers() == importance.num_layers(), "statistics: the similarity accumulator has ",
               similarity.num_layers(), " layers, the importance accumulator ", importance.num_layers());
  KC_CHECK_ARG(similarity.num_prompts() == importance.num_prompts(), "statistics: the similarity accumulator has ",
               similarity.num_prompts(), " finished prompts, the importance accumulator ", importance.num_prompts());
  CalibrationStats stats;
  stats.num_layers = similarity.num_layers();
  stats.num_kv_heads = similarity.num_kv_heads();
  stats.num_prompts = similarity.num_prompts();
  KC_ASSIGN_OR_RETURN(stats.similarity, similarity.mean_similarity());
  KC_ASSIGN_OR_RETURN(stats.importance, importance.mean_importance());
  KC_RETURN_IF_ERROR(validate_stats(stats));
  return stats;
}

Result<std::vector<double>> layer_scores(const CalibrationStats& stats) {
  KC_RETURN_IF_ERROR(validate_stats(stats));
  const int32_t N = stats.num_layers;
  const int32_t G = stats.num_kv_heads;
  std::vector<double> W(static_cast<size_t>(N) * N, 0.0);  // [N, N]
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = a; b < N; ++b) {
      double sum_of_max = 0.0;
      for (int32_t gb = 0; gb < G; ++gb) {
        double best = stats.sim(a, b, 0, gb);
        for (int32_t ga = 1; ga < G; ++ga) best = std::max(best, stats.sim(a, b, ga, gb));
        sum_of_max += best;
      }
      W[static_cast<size_t>(a) * N + b] = stats.importance[b] * (sum_of_max / G);
    }
  }
  return W;
}

}  // namespace kascade::calib
