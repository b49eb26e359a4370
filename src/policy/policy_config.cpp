// src/policy/policy_config.cpp — policy names, config validation, relative-depth layer sets of
// the baselines, and the names of modes and roles (kascade/policy.h).
// Tested by tests/unit/policy/test_policy_config.cpp (every refusal names its problem).
#include <algorithm>
#include <sstream>

#include "kascade/policy.h"
#include "policy/policy_program.h"

namespace kascade {

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"dense",     "kascade", "kascade-noremap", "kascade-pooled",
                                                 "kascade-decode", "oracle",  "streaming",       "quest",
                                                 "omnikv",    "lessismore"};
  return names;
}

const char* forward_mode_name(ForwardMode mode) { return mode == ForwardMode::kDecode ? "decode" : "prefill"; }

const char* layer_role_name(LayerRole role) {
  switch (role) {
    case LayerRole::kDense: return "dense";
    case LayerRole::kDenseAnchor: return "dense-anchor";
    case LayerRole::kAnchor: return "anchor";
    case LayerRole::kReuse: return "reuse";
  }
  return "unknown";
}

std::vector<int32_t> relative_depth_layers(int32_t num_layers, const std::vector<int32_t>& of_32) {
  std::vector<int32_t> layers;
  for (int32_t x : of_32) {
    // round(N·x/32) half up, in integers: floor((2·N·x + 32) / 64).
    const int64_t layer = (2 * static_cast<int64_t>(num_layers) * x + 32) / 64;
    if (layer >= 0 && layer < num_layers) layers.push_back(static_cast<int32_t>(layer));
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return layers;
}

Status validate_policy_config(const PolicyConfig& config) {
  const auto& names = policy_names();
  if (std::find(names.begin(), names.end(), config.name) == names.end()) {
    std::ostringstream list;
    for (size_t i = 0; i < names.size(); ++i) list << (i ? ", " : "") << names[i];
    return invalid_argument("unknown attention policy '", config.name, "'; expected one of ", list.str());
  }
  const std::string& name = config.name;
  KC_CHECK_ARG(config.num_layers >= 1, "policy '", name, "': num_layers is ", config.num_layers, "; expected >= 1");
  KC_CHECK_ARG(config.num_heads >= 1, "policy '", name, "': num_heads is ", config.num_heads, "; expected >= 1");
  KC_CHECK_ARG(config.num_kv_heads >= 1, "policy '", name, "': num_kv_heads is ", config.num_kv_heads,
               "; expected >= 1");
  KC_CHECK_ARG(config.num_heads % config.num_kv_heads == 0, "policy '", name, "': num_heads ", config.num_heads,
               " is not a multiple of num_kv_heads ", config.num_kv_heads);
  KC_CHECK_ARG(config.head_dim >= 1, "policy '", name, "': head_dim is ", config.head_dim, "; expected >= 1");
  {
    Status budget = validate_budget(config.budget);
    if (!budget.ok()) return budget.with_context("policy '" + name + "'");
  }
  KC_CHECK_ARG(config.tile_size >= 1, "policy '", name, "': tile_size is ", config.tile_size, "; expected >= 1");
  KC_CHECK_ARG(config.quest_page_size >= 1, "policy '", name, "': quest_page_size is ", config.quest_page_size,
               "; expected >= 1");
  KC_CHECK_ARG(config.streaming_sinks >= 0, "policy '", name, "': streaming_sinks is ", config.streaming_sinks,
               "; expected >= 0");
  KC_CHECK_ARG(config.lessismore_sinks >= 0, "policy '", name, "': lessismore_sinks is ", config.lessismore_sinks,
               "; expected >= 0");
  if (policy::policy_uses_schedule(name)) {
    if (config.schedule.empty()) {
      return invalid_argument("policy '", name,
                              "' needs a calibration file (kascade calibrate ...) or --anchors for an identity "
                              "head map");
    }
    // Variants that ignore the head map accept anchors alone.
    const bool map_optional = !policy::policy_reads_head_map(name) && config.schedule.head_map.empty();
    Status schedule = map_optional ? identity_schedule(config.schedule.anchors, config.num_layers,
                                                       config.num_kv_heads).status()
                                   : validate_schedule(config.schedule, config.num_layers, config.num_kv_heads);
    if (!schedule.ok()) return schedule.with_context("policy '" + name + "'");
  }
  return ok_status();
}

}  // namespace kascade
