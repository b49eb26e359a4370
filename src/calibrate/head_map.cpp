// head_map.cpp — head remapping (DESIGN.md §2.5): map[b][gb] = argmax_ga sim[anchor(b)][b][ga][gb]
// (ties: lowest ga), anchor(b) = the largest anchor <= b, identity on anchor rows; and the check of
// a head map read from a file or imported.
// Tested by tests/unit/calibrate/test_anchor_selection.cpp (against a direct argmax, with ties) and
// test_calibration_file.cpp / test_npy_import.cpp (validation).
#include "kascade/calibration.h"

namespace kascade::calib {

Result<std::vector<int32_t>> build_head_map(const CalibrationStats& stats, std::span<const int32_t> anchors) {
  KC_RETURN_IF_ERROR(validate_stats(stats));
  KC_RETURN_IF_ERROR(validate_anchors(anchors, stats.num_layers));
  const int32_t N = stats.num_layers;
  const int32_t G = stats.num_kv_heads;
  std::vector<int32_t> map(static_cast<size_t>(N) * G);  // [N, G]
  size_t next_anchor = 0;
  int32_t anchor = 0;
  for (int32_t b = 0; b < N; ++b) {
    const bool is_anchor = next_anchor < anchors.size() && anchors[next_anchor] == b;
    if (is_anchor) anchor = anchors[next_anchor++];
    for (int32_t gb = 0; gb < G; ++gb) {
      int32_t arg = gb;
      if (!is_anchor) {
        arg = 0;
        for (int32_t ga = 1; ga < G; ++ga) {
          if (stats.sim(anchor, b, ga, gb) > stats.sim(anchor, b, arg, gb)) arg = ga;
        }
      }
      map[static_cast<size_t>(b) * G + gb] = arg;
    }
  }
  return map;
}

Status validate_head_map(std::span<const int32_t> head_map, int32_t num_layers, int32_t num_kv_heads,
                         std::span<const int32_t> anchors) {
  KC_RETURN_IF_ERROR(validate_anchors(anchors, num_layers));
  const size_t N = static_cast<size_t>(num_layers);
  const size_t G = static_cast<size_t>(num_kv_heads);
  KC_CHECK_ARG(head_map.size() == N * G, "head_map has ", head_map.size(), " entries; expected [", N, ", ", G, "]");
  for (size_t b = 0; b < N; ++b) {
    for (size_t g = 0; g < G; ++g) {
      const int32_t v = head_map[b * G + g];
      KC_CHECK_ARG(v >= 0 && static_cast<size_t>(v) < G, "head_map[", b, "][", g, "] = ", v, " is out of range [0, ",
                   G, ")");
    }
  }
  for (const int32_t a : anchors) {
    for (size_t g = 0; g < G; ++g) {
      const int32_t v = head_map[static_cast<size_t>(a) * G + g];
      KC_CHECK_ARG(static_cast<size_t>(v) == g, "head_map[", a, "][", g, "] = ", v, "; layer ", a,
                   " is an anchor, so its row must be the identity");
    }
  }
  return ok_status();
}

}  // namespace kascade::calib
