// calibration_validate.cpp — validate_calibration(): the semantic checks of a calibration file
// (model identity, sections required by the source, statistics, anchor sets, head maps, default
// count, refined sets), each error naming the field; plus the names of the file's enums.
// Tested by tests/unit/calibrate/test_calibration_file.cpp (one case per malformed field).
#include <algorithm>
#include <cmath>

#include "kascade/calibration.h"

namespace kascade::calib {

const char* calibration_source_name(CalibrationSource source) {
  return source == CalibrationSource::kImported ? "imported" : "collected";
}

Result<CalibrationSource> parse_calibration_source(std::string_view name) {
  if (name == "collected") return CalibrationSource::kCollected;
  if (name == "imported") return CalibrationSource::kImported;
  return invalid_argument("source is '", name, "'; expected \"collected\" or \"imported\"");
}

const char* stats_forward_name(StatsForward forward) {
  return forward == StatsForward::kSparse ? "sparse" : "dense";
}

Result<StatsForward> parse_stats_forward(std::string_view name) {
  if (name == "dense") return StatsForward::kDense;
  if (name == "sparse") return StatsForward::kSparse;
  return invalid_argument("forward is '", name, "'; expected \"dense\" or \"sparse\"");
}

namespace {

Status validate_model(const ModelIdentity& m) {
  KC_CHECK_ARG(!m.name.empty() || !m.path.empty(), "model: name and path are both empty; one must identify the model");
  KC_CHECK_ARG(m.num_layers >= 1, "model.num_layers is ", m.num_layers, "; expected >= 1");
  KC_CHECK_ARG(m.num_kv_heads >= 1, "model.num_kv_heads is ", m.num_kv_heads, "; expected >= 1");
  KC_CHECK_ARG(m.num_heads >= 1 && m.num_heads % m.num_kv_heads == 0, "model.num_heads is ", m.num_heads,
               "; expected a positive multiple of model.num_kv_heads (", m.num_kv_heads, ")");
  KC_CHECK_ARG(m.head_dim >= 1, "model.head_dim is ", m.head_dim, "; expected >= 1");
  return ok_status();
}

Status validate_collection(const CollectionSettings& c) {
  KC_CHECK_ARG(c.rho_ppm > 0 && c.rho_ppm <= 1000000, "collection.rho_ppm is ", c.rho_ppm,
               "; expected 1..1000000");
  KC_CHECK_ARG(c.k_min >= 0, "collection.k_min is ", c.k_min, "; expected >= 0");
  KC_CHECK_ARG(c.tile_size >= 1, "collection.tile_size is ", c.tile_size, "; expected >= 1");
  KC_CHECK_ARG(c.k_cal >= 1, "collection.k_cal is ", c.k_cal, "; expected >= 1");
  KC_CHECK_ARG(c.forward == StatsForward::kDense || c.forward == StatsForward::kSparse,
               "collection.forward is not dense or sparse");
  return ok_status();
}

bool is_probability(double v) { return std::isfinite(v) && v >= 0.0 && v <= 1.0; }
bool is_divergence(double v) { return std::isfinite(v) && v >= 0.0; }

// A refined set (the extension of docs/spec-notes.md): the DP set it started from, both scores,
// the settings, and that the refined set is not worse than the DP set, nor above it in objective.
Status validate_refinement(const AnchorSet& set, const std::string& field, int32_t num_layers) {
  const AnchorRefinement& r = *set.refinement;
  const std::string f = field + ".refinement";
  Status s = validate_anchors(r.dp_anchors, num_layers);
  if (!s.ok()) return s.with_context(f + ".dp_anchors");
  KC_CHECK_ARG(r.dp_anchors.size() == set.anchors.size(), f, ".dp_anchors has ", r.dp_anchors.size(),
               " anchors but the set has ", set.anchors.size(), "; a refinement keeps the anchor count");
  KC_CHECK_ARG(std::isfinite(r.dp_objective), f, ".dp_objective is ", r.dp_objective, "; expected a finite value");
  KC_CHECK_ARG(is_probability(r.agreement), f, ".agreement is ", r.agreement, "; expected a fraction in [0, 1]");
  KC_CHECK_ARG(is_probability(r.dp_agreement), f, ".dp_agreement is ", r.dp_agreement,
               "; expected a fraction in [0, 1]");
  KC_CHECK_ARG(is_divergence(r.kl), f, ".kl is ", r.kl, "; expected a finite value >= 0");
  KC_CHECK_ARG(is_divergence(r.dp_kl), f, ".dp_kl is ", r.dp_kl, "; expected a finite value >= 0");
  KC_CHECK_ARG(r.tokens >= 1, f, ".tokens is ", r.tokens, "; expected >= 1");
  KC_CHECK_ARG(r.prompts >= 1, f, ".prompts is ", r.prompts, "; expected >= 1");
  KC_CHECK_ARG(r.steps >= r.prompts && (r.steps - 1) / r.tokens < r.prompts /* steps <= tokens x prompts */, f,
               ".steps is ", r.steps, "; expected between prompts (", r.prompts, ") and tokens x prompts (",
               r.tokens, " x ", r.prompts, ")");
  KC_CHECK_ARG(r.max_rounds >= 0, f, ".max_rounds is ", r.max_rounds, "; expected >= 0");
  KC_CHECK_ARG(r.rounds >= 0 && r.rounds <= r.max_rounds, f, ".rounds is ", r.rounds, "; expected 0..max_rounds (",
               r.max_rounds, ")");
  KC_CHECK_ARG(r.sets_scored >= 1, f, ".sets_scored is ", r.sets_scored, "; expected >= 1 (the DP set)");
  KC_CHECK_ARG(r.agreement > r.dp_agreement || (r.agreement == r.dp_agreement && r.kl <= r.dp_kl), f,
               ": the refined set (agreement ", r.agreement, ", KL ", r.kl, ") scores below the DP set (agreement ",
               r.dp_agreement, ", KL ", r.dp_kl, "); the climb only moves to better sets");
  if (set.anchors == r.dp_anchors) {
    KC_CHECK_ARG(r.agreement == r.dp_agreement && r.kl == r.dp_kl, f,
                 ": the refined set is the DP set but their scores differ");
  }
  if (set.objective) {
    // The DP maximises the objective over all sets of this count (up to the order of its fp64 sums).
    const double slack = 1e-9 * std::max(1.0, std::fabs(r.dp_objective));
    KC_CHECK_ARG(*set.objective <= r.dp_objective + slack, f, ".dp_objective is ", r.dp_objective,
                 ", below the objective ", *set.objective, " of the refined set; the DP set maximises the objective");
  }
  return ok_status();
}

}  // namespace

Status validate_calibration(const CalibrationFile& file) {
  KC_RETURN_IF_ERROR(validate_model(file.model));
  const ModelIdentity& m = file.model;
  const bool imported = file.source == CalibrationSource::kImported;
  KC_CHECK_ARG(imported || file.source == CalibrationSource::kCollected, "source is neither collected nor imported");
  if (imported) {
    KC_CHECK_ARG(!file.dev_set && !file.collection && !file.stats,
                 "source is \"imported\" but the file holds dev_set, collection or statistics; "
                 "an imported head map has none of them");
    KC_CHECK_ARG(!file.imported_from.empty(), "imported_from is empty; an imported file names its source");
  } else {
    KC_CHECK_ARG(file.dev_set.has_value(), "dev_set is missing; a collected file describes its dev set");
    KC_CHECK_ARG(file.collection.has_value(), "collection is missing; a collected file records its settings");
    KC_CHECK_ARG(file.stats.has_value(), "statistics is missing; a collected file holds its statistics "
                                         "(only files with source \"imported\" may omit them)");
    KC_CHECK_ARG(file.imported_from.empty(), "imported_from is set on a collected file");
    KC_CHECK_ARG(file.dev_set->decode_steps_per_prompt >= 0, "dev_set.decode_steps_per_prompt is ",
                 file.dev_set->decode_steps_per_prompt, "; expected >= 0");
    KC_RETURN_IF_ERROR(validate_collection(*file.collection));
    KC_RETURN_IF_ERROR(validate_stats(*file.stats));
    KC_CHECK_ARG(file.stats->num_layers == m.num_layers && file.stats->num_kv_heads == m.num_kv_heads,
                 "statistics cover ", file.stats->num_layers, " layers x ", file.stats->num_kv_heads,
                 " KV heads but model has ", m.num_layers, " x ", m.num_kv_heads);
  }

  KC_CHECK_ARG(!file.anchor_sets.empty(), "anchor_sets is empty");
  for (size_t i = 0; i < file.anchor_sets.size(); ++i) {
    const AnchorSet& set = file.anchor_sets[i];
    const std::string field = detail::concat("anchor_sets[", i, "]");
    Status s = validate_anchors(set.anchors, m.num_layers);
    if (!s.ok()) return s.with_context(field + ".anchors");
    if (i > 0) {
      KC_CHECK_ARG(set.anchors.size() > file.anchor_sets[i - 1].anchors.size(), field, ".num_anchors is ",
                   set.anchors.size(), " after ", file.anchor_sets[i - 1].anchors.size(),
                   "; anchor sets must have distinct counts in ascending order");
    }
    s = validate_head_map(set.head_map, m.num_layers, m.num_kv_heads, set.anchors);
    if (!s.ok()) return s.with_context(field);
    if (imported) {
      KC_CHECK_ARG(!set.objective.has_value(), field, ".objective is set on an imported file (no statistics)");
    } else {
      KC_CHECK_ARG(set.objective.has_value(), field, ".objective is missing");
      KC_CHECK_ARG(std::isfinite(*set.objective), field, ".objective is ", *set.objective,
                   "; expected a finite value");
    }
    if (set.refinement) {
      KC_CHECK_ARG(!imported, field, ".refinement is set on an imported file (no statistics to build head maps from)");
      KC_RETURN_IF_ERROR(validate_refinement(set, field, m.num_layers));
    }
  }
  KC_CHECK_ARG(file.find_anchor_set(file.default_num_anchors) != nullptr, "default_num_anchors is ",
               file.default_num_anchors, "; no anchor set has that many anchors");
  return ok_status();
}

}  // namespace kascade::calib
