// src/policy/schedule.cpp — the anchor / reuse schedule of DESIGN.md §2.2 (kascade/policy.h):
// validation, the identity schedule of `--anchors`, and anchor(l) = the largest anchor <= l.
// Tested by tests/unit/policy/test_policy_config.cpp (valid and invalid schedules, anchor lookup).
#include <algorithm>

#include "kascade/policy.h"

namespace kascade {

Status validate_schedule(const Schedule& schedule, int32_t num_layers, int32_t num_kv_heads) {
  KC_CHECK_ARG(num_layers >= 1, "schedule: num_layers is ", num_layers, "; expected >= 1");
  KC_CHECK_ARG(num_kv_heads >= 1, "schedule: num_kv_heads is ", num_kv_heads, "; expected >= 1");
  const auto& anchors = schedule.anchors;
  KC_CHECK_ARG(!anchors.empty(), "schedule: no anchor layers; layer 0 must be an anchor");
  KC_CHECK_ARG(anchors[0] == 0, "schedule: the first anchor is layer ", anchors[0], "; layer 0 must be an anchor");
  for (size_t i = 0; i < anchors.size(); ++i) {
    KC_CHECK_ARG(anchors[i] >= 0 && anchors[i] < num_layers, "schedule: anchor ", anchors[i],
                 " is outside the model's layers 0..", num_layers - 1);
    if (i > 0) {
      KC_CHECK_ARG(anchors[i] > anchors[i - 1], "schedule: anchors must be strictly ascending; ", anchors[i],
                   " follows ", anchors[i - 1]);
    }
  }
  const int64_t expected = static_cast<int64_t>(num_layers) * num_kv_heads;
  KC_CHECK_ARG(static_cast<int64_t>(schedule.head_map.size()) == expected, "schedule: head map has ",
               schedule.head_map.size(), " entries; expected num_layers x num_kv_heads = ", num_layers, " x ",
               num_kv_heads, " = ", expected);
  for (int32_t l = 0; l < num_layers; ++l) {
    const bool is_anchor = std::binary_search(anchors.begin(), anchors.end(), l);
    for (int32_t g = 0; g < num_kv_heads; ++g) {
      const int32_t entry = schedule.head_map[static_cast<size_t>(l) * num_kv_heads + g];
      KC_CHECK_ARG(entry >= 0 && entry < num_kv_heads, "schedule: head map [layer ", l, "][kv head ", g, "] is ",
                   entry, "; expected a KV head in [0, ", num_kv_heads, ")");
      KC_CHECK_ARG(!is_anchor || entry == g, "schedule: anchor layer ", l, " must map every KV head to itself; [kv head ",
                   g, "] is ", entry);
    }
  }
  return ok_status();
}

Result<Schedule> identity_schedule(const std::vector<int32_t>& anchors, int32_t num_layers, int32_t num_kv_heads) {
  KC_CHECK_ARG(num_layers >= 1 && num_kv_heads >= 1, "identity_schedule: num_layers ", num_layers,
               " and num_kv_heads ", num_kv_heads, " must be >= 1");
  Schedule schedule;
  schedule.anchors = anchors;
  schedule.head_map.resize(static_cast<size_t>(num_layers) * num_kv_heads);
  for (int32_t l = 0; l < num_layers; ++l) {
    for (int32_t g = 0; g < num_kv_heads; ++g) schedule.head_map[static_cast<size_t>(l) * num_kv_heads + g] = g;
  }
  KC_RETURN_IF_ERROR(validate_schedule(schedule, num_layers, num_kv_heads));
  return schedule;
}

Result<int32_t> schedule_anchor(const Schedule& schedule, int32_t layer) {
  KC_CHECK_ARG(!schedule.anchors.empty() && schedule.anchors[0] == 0,
               "schedule_anchor: the schedule has no anchor at layer 0");
  KC_CHECK_ARG(layer >= 0, "schedule_anchor: layer is ", layer, "; expected >= 0");
  // The last anchor <= layer: upper_bound finds the first anchor > layer.
  const auto it = std::upper_bound(schedule.anchors.begin(), schedule.anchors.end(), layer);
  return *(it - 1);
}

}  // namespace kascade
