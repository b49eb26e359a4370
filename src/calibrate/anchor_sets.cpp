// anchor_sets.cpp — from statistics to anchor sets (DP anchors + head map + objective) for a list
// of anchor counts, and the assembly of a collected calibration file; no model run is needed, so
// `kascade calibrate --from-stats` re-derives sets for other counts from a file's statistics.
// Tested by tests/unit/calibrate/test_anchor_selection.cpp and test_calibration_file.cpp.
#include <algorithm>
#include <cstdlib>

#include "kascade/calibration.h"

namespace kascade::calib {

std::vector<int32_t> default_anchor_counts(int32_t num_layers) {
  std::vector<int32_t> counts;
  if (num_layers < 1) return counts;
  if (num_layers == 1) return {1};
  for (int32_t k = kMinDefaultAnchors; k <= std::min(kMaxDefaultAnchors, num_layers); ++k) counts.push_back(k);
  return counts;
}

Result<std::vector<AnchorSet>> derive_anchor_sets(const CalibrationStats& stats,
                                                  std::span<const int32_t> anchor_counts) {
  KC_RETURN_IF_ERROR(validate_stats(stats));
  KC_CHECK_ARG(!anchor_counts.empty(), "anchor sets: the list of anchor counts is empty");
  for (size_t i = 0; i < anchor_counts.size(); ++i) {
    KC_CHECK_ARG(anchor_counts[i] >= 1 && anchor_counts[i] <= stats.num_layers, "anchor sets: count ",
                 anchor_counts[i], " is out of range 1..", stats.num_layers, " (the number of layers)");
    for (size_t j = 0; j < i; ++j) {
      KC_CHECK_ARG(anchor_counts[j] != anchor_counts[i], "anchor sets: count ", anchor_counts[i], " is listed twice");
    }
  }
  KC_ASSIGN_OR_RETURN(const std::vector<double> W, layer_scores(stats));
  std::vector<AnchorSet> sets;
  for (const int32_t count : anchor_counts) {
    KC_ASSIGN_OR_RETURN(AnchorChoice choice, select_anchors(W, stats.num_layers, count));
    AnchorSet set;
    set.anchors = std::move(choice.anchors);
    set.objective = choice.objective;
    KC_ASSIGN_OR_RETURN(set.head_map, build_head_map(stats, set.anchors));
    sets.push_back(std::move(set));
  }
  return sets;
}

const AnchorSet* CalibrationFile::find_anchor_set(int32_t num_anchors) const {
  for (const AnchorSet& set : anchor_sets) {
    if (static_cast<int32_t>(set.anchors.size()) == num_anchors) return &set;
  }
  return nullptr;
}

Result<CalibrationFile> build_calibration_file(const ModelIdentity& model, const DevSetInfo& dev_set,
                                               const CollectionSettings& collection,
                                               const CalibrationStats& stats,
                                               std::span<const int32_t> anchor_counts,
                                               int32_t default_num_anchors) {
  std::vector<int32_t> counts(anchor_counts.begin(), anchor_counts.end());
  std::sort(counts.begin(), counts.end());
  CalibrationFile file;
  file.source = CalibrationSource::kCollected;
  file.model = model;
  file.dev_set = dev_set;
  file.collection = collection;
  file.stats = stats;
  KC_ASSIGN_OR_RETURN(file.anchor_sets, derive_anchor_sets(stats, counts));
  if (default_num_anchors > 0) {
    file.default_num_anchors = default_num_anchors;
  } else {
    // kDefaultNumAnchors, or the nearest count present (the lower one on a tie).
    file.default_num_anchors = counts.front();
    for (const int32_t c : counts) {
      if (std::abs(c - kDefaultNumAnchors) < std::abs(file.default_num_anchors - kDefaultNumAnchors)) {
        file.default_num_anchors = c;
      }
    }
  }
  KC_RETURN_IF_ERROR(validate_calibration(file));
  return file;
}

}  // namespace kascade::calib
