// src/policy/policy_program.cpp — the table from policy names to per-layer steps (DESIGN.md
// §2.2–2.4; see policy_program.h). Tested by tests/unit/policy/test_policy_config.cpp
// (PolicyRoles) and test_policy.cpp.
#include "policy/policy_program.h"

#include <algorithm>

namespace kascade::policy {

const char* selector_name(Selector selector) {
  switch (selector) {
    case Selector::kNone: return "none";
    case Selector::kGroupPooled: return "group-pooled";
    case Selector::kAllPooled: return "all-pooled";
    case Selector::kOracle: return "oracle";
    case Selector::kOmniKv: return "omnikv";
    case Selector::kQuest: return "quest";
    case Selector::kLessIsMore: return "lessismore";
    case Selector::kStreaming: return "streaming";
  }
  return "unknown";
}

int32_t selector_rows(Selector selector, int32_t num_heads, int32_t num_kv_heads) {
  switch (selector) {
    case Selector::kNone: return 0;
    case Selector::kGroupPooled: return num_kv_heads;
    case Selector::kOracle:
    case Selector::kQuest: return num_heads;
    case Selector::kAllPooled:
    case Selector::kOmniKv:
    case Selector::kLessIsMore:
    case Selector::kStreaming: return 1;
  }
  return 0;
}

IndexGranularity selector_granularity(Selector selector) {
  return (selector == Selector::kOracle || selector == Selector::kQuest) ? IndexGranularity::kPerQueryHead
                                                                         : IndexGranularity::kPerKvGroup;
}

ScorePooling selector_pooling(Selector selector, int32_t num_heads, int32_t num_kv_heads) {
  ScorePooling pooling;
  pooling.num_rows = selector_rows(selector, num_heads, num_kv_heads);
  pooling.reduce = selector == Selector::kOmniKv ? ScoreReduce::kMax : ScoreReduce::kSum;
  return pooling;
}

bool policy_uses_schedule(const std::string& name) {
  return name == "kascade" || name == "kascade-noremap" || name == "kascade-pooled" || name == "kascade-decode";
}

bool policy_reads_head_map(const std::string& name) { return name == "kascade" || name == "kascade-decode"; }

namespace {

ModeProgram all_dense(int32_t num_layers) {
  ModeProgram program;
  program.selector = Selector::kNone;
  program.layers.assign(static_cast<size_t>(num_layers), LayerStep{});
  return program;
}

// Kascade and its variants: layer 0 dense and selecting, anchors select and attend their own rows,
// reuse layers read anchor(l)'s rows through `reuse_map_row(l)`.
ModeProgram kascade_program(const PolicyConfig& config, Selector selector, bool remap) {
  const int32_t n = config.num_layers;
  const bool one_row = selector == Selector::kAllPooled;
  ModeProgram program;
  program.selector = selector;
  program.layers.resize(static_cast<size_t>(n));
  const auto& anchors = config.schedule.anchors;
  int32_t current_anchor = 0;
  for (int32_t l = 0; l < n; ++l) {
    LayerStep& step = program.layers[static_cast<size_t>(l)];
    const bool is_anchor = std::binary_search(anchors.begin(), anchors.end(), l);
    if (is_anchor) current_anchor = l;
    step.role = l == 0 ? LayerRole::kDenseAnchor : (is_anchor ? LayerRole::kAnchor : LayerRole::kReuse);
    step.source = current_anchor;
    if (one_row) {
      step.map_row = n;  // zero row: every KV group reads the single pooled row
    } else if (!is_anchor && remap) {
      step.map_row = l;
    } else {
      step.map_row = kIdentityMap;
    }
  }
  return program;
}

// OmniKV / LessIsMore (decode): selecting layers attend densely and select one row; later layers
// read the latest selecting layer's row, except those `forced_dense` says are dense.
template <typename ForcedDense>
ModeProgram selection_layers_program(int32_t num_layers, Selector selector, const std::vector<int32_t>& selecting,
                                     ForcedDense forced_dense) {
  ModeProgram program;
  program.selector = selector;
  program.layers.resize(static_cast<size_t>(num_layers));
  int32_t latest = -1;
  for (int32_t l = 0; l < num_layers; ++l) {
    LayerStep& step = program.layers[static_cast<size_t>(l)];
    step.map_row = num_layers;  // one row read by every KV group
    if (std::binary_search(selecting.begin(), selecting.end(), l)) {
      latest = l;
      step.role = LayerRole::kDenseAnchor;
      step.source = l;
    } else if (latest < 0 || forced_dense(l)) {
      step.role = LayerRole::kDense;
      step.source = l;
      step.map_row = kIdentityMap;
    } else {
      step.role = LayerRole::kReuse;
      step.source = latest;
    }
  }
  return program;
}

}  // namespace

Result<PolicyProgram> build_program(const PolicyConfig& config) {
  KC_RETURN_IF_ERROR(validate_policy_config(config));
  const int32_t n = config.num_layers;
  const int32_t g = config.num_kv_heads;
  const std::string& name = config.name;

  PolicyProgram program;
  program.map_table.assign(static_cast<size_t>(n + 1) * g, 0);
  const bool has_map = policy_reads_head_map(name);
  for (int32_t l = 0; l < n; ++l) {
    for (int32_t h = 0; h < g; ++h) {
      const size_t at = static_cast<size_t>(l) * g + h;
      program.map_table[at] = has_map ? config.schedule.head_map[at] : h;
    }
  }

  ModeProgram& prefill = program.modes[static_cast<int>(ForwardMode::kPrefill)];
  ModeProgram& decode = program.modes[static_cast<int>(ForwardMode::kDecode)];
  prefill = all_dense(n);
  decode = all_dense(n);

  if (name == "dense") {
    // all dense
  } else if (name == "kascade" || name == "kascade-noremap") {
    prefill = kascade_program(config, Selector::kGroupPooled, name == "kascade");
    decode = prefill;
  } else if (name == "kascade-pooled") {
    prefill = kascade_program(config, Selector::kAllPooled, false);
    decode = prefill;
  } else if (name == "kascade-decode") {
    decode = kascade_program(config, Selector::kGroupPooled, true);
  } else if (name == "oracle") {
    for (ModeProgram* mode : {&prefill, &decode}) {
      mode->selector = Selector::kOracle;
      for (int32_t l = 1; l < n; ++l) mode->layers[static_cast<size_t>(l)] = {LayerRole::kAnchor, l, kIdentityMap};
    }
  } else if (name == "streaming") {
    for (ModeProgram* mode : {&prefill, &decode}) {
      mode->selector = Selector::kStreaming;
      for (auto& step : mode->layers) step = {LayerRole::kReuse, kRowsFromBeginForward, n};
    }
  } else if (name == "quest") {
    decode.selector = Selector::kQuest;
    for (int32_t l = 2; l < n; ++l) decode.layers[static_cast<size_t>(l)] = {LayerRole::kAnchor, l, kIdentityMap};
  } else if (name == "omnikv") {
    const std::vector<int32_t> filters = relative_depth_layers(n, {2, 8, 18});
    decode = selection_layers_program(n, Selector::kOmniKv, filters, [&](int32_t l) {
      return l <= 1 || std::binary_search(filters.begin(), filters.end(), l - 1);
    });
  } else if (name == "lessismore") {
    decode = selection_layers_program(n, Selector::kLessIsMore, relative_depth_layers(n, {2, 13}),
                                      [](int32_t) { return false; });
  } else {
    return internal_error("build_program: policy '", name, "' passed validation but has no program");
  }
  for (ModeProgram* mode : {&prefill, &decode}) {
    for (int32_t l = 0; l < n; ++l) {
      LayerStep& step = mode->layers[static_cast<size_t>(l)];
      if (step.role == LayerRole::kDense) step.source = l;
    }
  }
  return program;
}

}  // namespace kascade::policy
