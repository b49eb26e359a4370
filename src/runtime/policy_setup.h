// src/runtime/policy_setup.h — turns the user's attention options (`--attention`, `--calibration`,
// `--anchors`, `--topk-fraction`, `--tile`, ...) into a validated PolicyConfig for a model:
//   - the budget: rho from --topk-fraction (parts per million), k_min;
//   - the schedule of the kascade variants: the anchor set of a calibration file (its default
//     anchor count unless num_anchors says otherwise; the file must describe a model of the same
//     layer count, head counts and head dim), or the given anchors with the identity head map;
//     a kascade variant with neither is refused with a message saying how to make one, a
//     schedule given to a policy that reads none is refused, and so is giving both (choose_schedule,
//     shared with the C interface, which may also give an explicit head map).
// Tested by tests/unit/runtime/test_policy_setup.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kascade/model_config.h"
#include "kascade/policy.h"
#include "kascade/runtime.h"

namespace kascade::runtime {

struct PolicySetup {
  PolicyConfig config;
  std::string schedule_note;  // "anchors 0,2,5 from calib.json (5 anchors)", "anchors 0,2 (identity head map)", ""
};

Result<PolicySetup> build_policy_config(const ModelConfig& model, const AttentionOptions& options);

// The directory of a model given as a directory or as its config.json.
std::filesystem::path model_dir_of(const std::string& model);
// The calibration file the kascade policies use when none is given: <model dir>/kascade_calibration.json
// if it exists, else "" (the policy then asks for one). Used by the CLI and the C interface.
std::string default_calibration_file(const std::string& model);
// Sets options.calibration_file to default_calibration_file(model) when the policy reads a schedule and the
// user gave neither a calibration file nor anchors (a missing default leaves it empty, and build_policy_config
// then refuses the policy saying how to make one). Used by `kascade generate`, `kascade eval` and the C interface.
void use_default_calibration_file(AttentionOptions& options, const std::string& model);

// The attention shape a calibration file must describe.
struct ScheduleShape {
  int64_t num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
};
// The schedule of the anchor set with `num_anchors` anchors (0: the file's default) of the calibration file
// at `path`, refused (naming both shapes) when the file describes another shape, or (naming the counts it
// has) when it has no such set; *note (may be null) says which anchors came from which file. Used by
// build_policy_config and by the C interface (src/capi).
Result<Schedule> schedule_from_calibration(const std::string& path, int32_t num_anchors, const ScheduleShape& shape,
                                           std::string* note);

// What a user gave for the schedule of a kascade variant, and how their interface names the two ways, for
// the messages ("--calibration" / "--anchors" on the command line, "config.calibration_file" / "config.anchors"
// in the C interface).
struct ScheduleRequest {
  std::string calibration_file;    // a file made by `kascade calibrate` (or --import-npy) ...
  int32_t num_anchors = 0;         // ... and its anchor set with this many anchors (0: the file's default)
  std::vector<int32_t> anchors;    // or these anchors ...
  std::vector<int32_t> head_map;   // ... with this head map [layers * KV heads] (empty: identity)
  std::string file_option = "--calibration";
  std::string anchors_option = "--anchors";
  std::string num_anchors_option = "--num-anchors";
};
// The schedule of `policy` for a model of `shape`: empty for a policy that reads none (then nothing may be
// given), a calibration file's set, or the given anchors; giving both, neither (for a kascade variant), a head
// map without anchors or an anchor count without a file is refused naming the options. *note (may be null):
// "anchors 0,2,5 from FILE", "anchors 0,2 (identity head map)", "anchors 0,2 (given head map)" or "".
// Used by build_policy_config and the C interface (src/capi).
Result<Schedule> choose_schedule(const std::string& policy, const ScheduleShape& shape, const ScheduleRequest& request,
                                 std::string* note);

}  // namespace kascade::runtime
