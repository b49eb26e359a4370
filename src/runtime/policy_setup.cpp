// src/runtime/policy_setup.cpp — attention options → PolicyConfig (src/runtime/policy_setup.h).
// Tested by tests/unit/runtime/test_policy_setup.cpp.
#include "runtime/policy_setup.h"

#include <algorithm>
#include <sstream>

#include "kascade/calibration.h"
#include "policy/policy_program.h"

namespace kascade::runtime {

std::filesystem::path model_dir_of(const std::string& model) {
  namespace fs = std::filesystem;
  return fs::is_directory(model) ? fs::path(model) : fs::path(model).parent_path();
}

std::string default_calibration_file(const std::string& model) {
  const std::filesystem::path file = model_dir_of(model) / "kascade_calibration.json";
  return std::filesystem::exists(file) ? file.string() : std::string();
}

void use_default_calibration_file(AttentionOptions& options, const std::string& model) {
  if (options.calibration_file.empty() && options.anchors.empty() && policy::policy_uses_schedule(options.policy))
    options.calibration_file = default_calibration_file(model);
}

Result<Schedule> schedule_from_calibration(const std::string& path, int32_t num_anchors, const ScheduleShape& shape,
                                           std::string* note) {
  auto file = calib::read_calibration_file(path);
  if (!file.ok()) {
    Status s = file.status();
    return s.with_context("calibration file " + path);
  }
  const calib::ModelIdentity& id = file->model;
  if (id.num_layers != shape.num_layers || id.num_kv_heads != shape.num_kv_heads || id.num_heads != shape.num_heads ||
      id.head_dim != shape.head_dim)
    return invalid_argument("calibration file ", path, " describes a model with ", id.num_layers, " layers, ",
                            id.num_heads, " heads, ", id.num_kv_heads, " KV heads of dim ", id.head_dim, " ('", id.name,
                            "'); this model has ", shape.num_layers, " layers, ", shape.num_heads, " heads, ",
                            shape.num_kv_heads, " KV heads of dim ", shape.head_dim);
  const int32_t wanted = num_anchors > 0 ? num_anchors : file->default_num_anchors;
  const calib::AnchorSet* set = file->find_anchor_set(wanted);
  if (set == nullptr) {
    std::vector<int32_t> available;
    for (const auto& s : file->anchor_sets) available.push_back(static_cast<int32_t>(s.anchors.size()));
    return invalid_argument("calibration file ", path, " has no anchor set with ", wanted, " anchors; it has ",
                            available.empty() ? std::string("none") : calib::format_anchors(available));
  }
  if (note != nullptr) *note = "anchors " + calib::format_anchors(set->anchors) + " from " + path;
  return Schedule{set->anchors, set->head_map};
}

Result<Schedule> choose_schedule(const std::string& policy, const ScheduleShape& shape, const ScheduleRequest& request,
                                 std::string* note) {
  const ScheduleRequest& r = request;
  const bool has_file = !r.calibration_file.empty();
  const bool has_anchors = !r.anchors.empty();
  KC_CHECK_ARG(!(has_file && (has_anchors || !r.head_map.empty())), "give either a calibration file (", r.file_option,
               ") or ", r.anchors_option, ", not both");
  KC_CHECK_ARG(r.num_anchors >= 0, "the anchor count ", r.num_anchors, " (", r.num_anchors_option, ") is negative");
  KC_CHECK_ARG(r.num_anchors == 0 || has_file, "an anchor count (", r.num_anchors_option, " ", r.num_anchors,
               ") picks an anchor set of a calibration file (", r.file_option, "); it does not apply to ",
               r.anchors_option);
  KC_CHECK_ARG(r.head_map.empty() || has_anchors, "a head map needs its anchors (", r.anchors_option, ")");
  if (note != nullptr) note->clear();
  if (!policy::policy_uses_schedule(policy)) {
    KC_CHECK_ARG(!has_file && !has_anchors, "attention policy '", policy, "' uses no anchors: ", r.file_option,
                 " and ", r.anchors_option, " apply to the kascade policies only");
    return Schedule{};
  }
  if (has_file) return schedule_from_calibration(r.calibration_file, r.num_anchors, shape, note);
  KC_CHECK_ARG(has_anchors, "attention policy '", policy, "' needs anchor layers: pass a calibration file made by ",
               "`kascade calibrate` (", r.file_option, "), or ", r.anchors_option,
               " (0, L1, L2, ...) for an identity head map");
  if (r.head_map.empty()) {
    if (note != nullptr) *note = "anchors " + calib::format_anchors(r.anchors) + " (identity head map)";
    return identity_schedule(r.anchors, static_cast<int32_t>(shape.num_layers), static_cast<int32_t>(shape.num_kv_heads));
  }
  if (note != nullptr) *note = "anchors " + calib::format_anchors(r.anchors) + " (given head map)";
  return Schedule{r.anchors, r.head_map};
}

Result<PolicySetup> build_policy_config(const ModelConfig& model, const AttentionOptions& options) {
  const auto& names = policy_names();
  if (std::find(names.begin(), names.end(), options.policy) == names.end()) {
    std::ostringstream os;
    for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
    return invalid_argument("unknown attention policy '", options.policy, "'; expected one of ", os.str());
  }
  PolicySetup setup;
  PolicyConfig& c = setup.config;
  c.name = options.policy;
  c.num_layers = static_cast<int32_t>(model.num_hidden_layers);
  c.num_heads = static_cast<int32_t>(model.num_attention_heads);
  c.num_kv_heads = static_cast<int32_t>(model.num_key_value_heads);
  c.head_dim = static_cast<int32_t>(model.head_dim);
  auto ppm = fraction_to_ppm(options.topk_fraction);
  if (!ppm.ok()) {
    Status s = ppm.status();
    return s.with_context("--topk-fraction");
  }
  c.budget.rho_ppm = *ppm;
  c.budget.k_min = options.k_min;
  c.tile_size = options.tile_size;
  c.rolling = options.rolling;

  ScheduleRequest request;
  request.calibration_file = options.calibration_file;
  request.num_anchors = options.num_anchors;
  request.anchors = options.anchors;
  KC_ASSIGN_OR_RETURN(c.schedule,
                      choose_schedule(options.policy,
                                      {model.num_hidden_layers, model.num_attention_heads, model.num_key_value_heads,
                                       model.head_dim},
                                      request, &setup.schedule_note));
  KC_RETURN_IF_ERROR(validate_policy_config(c));
  return setup;
}

}  // namespace kascade::runtime
