// test_policy_setup.cpp — attention options → PolicyConfig (src/runtime/policy_setup.h): the
// budget from --topk-fraction, identity schedules from --anchors, schedules read back from a
// calibration file written through the calibration API (with a non-identity head map), and every
// refusal (unknown policy, kascade without anchors, anchors for a policy that reads none, both a
// file and anchors, a file for another model shape, a missing anchor count), and the model directory's default
// calibration file (use_default_calibration_file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kascade/calibration.h"
#include "runtime/policy_setup.h"
#include "testing/harness.h"

namespace kascade::runtime {
namespace {

ModelConfig small_model() {
  ModelConfig c;
  c.architecture = ModelArchitecture::kLlama;
  c.vocab_size = 100;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 1024;
  return c;
}

std::string temp_path(const std::string& name) { return testing::test_temp_path(name).string(); }

TEST(PolicySetup, DenseWithBudgetOptions) {
  AttentionOptions o;
  o.policy = "dense";
  o.topk_fraction = 0.25;
  o.k_min = 7;
  o.tile_size = 16;
  auto s = build_policy_config(small_model(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config.budget.rho_ppm, 250000);
  EXPECT_EQ(s->config.budget.k_min, 7);
  EXPECT_EQ(s->config.tile_size, 16);
  EXPECT_EQ(s->config.num_layers, 4);
  EXPECT_EQ(s->config.num_heads, 4);
  EXPECT_EQ(s->config.num_kv_heads, 2);
  EXPECT_EQ(s->config.head_dim, 16);
  EXPECT_TRUE(s->config.schedule.empty());
}

TEST(PolicySetup, AnchorsGiveTheIdentityHeadMap) {
  AttentionOptions o;
  o.policy = "kascade";
  o.anchors = {0, 2};
  auto s = build_policy_config(small_model(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config.schedule.anchors, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(s->config.schedule.head_map, (std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(s->schedule_note, "anchors 0,2 (identity head map)");
}

TEST(PolicySetup, CalibrationFileSuppliesAnchorsAndHeadMap) {
  // Layers 1 and 3 (reuse) swap the KV heads: map [[0,1],[1,0],[0,1],[1,0]].
  calib::NpyIntMatrix map{4, 2, {0, 1, 1, 0, 0, 1, 1, 0}};
  const std::vector<int32_t> anchors = {0, 2};
  calib::ModelIdentity id{"tiny", "", 4, 2, 4, 16};
  auto file = calib::import_head_map(map, anchors, id, "test");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const std::string path = temp_path("calib.json");
  ASSERT_TRUE(calib::write_calibration_file(*file, path).ok());
  AttentionOptions o;
  o.policy = "kascade";
  o.calibration_file = path;
  auto s = build_policy_config(small_model(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config.schedule.anchors, anchors);
  EXPECT_EQ(s->config.schedule.head_map, (std::vector<int32_t>{0, 1, 1, 0, 0, 1, 1, 0}));
  // An anchor count the file does not hold.
  o.num_anchors = 3;
  auto missing = build_policy_config(small_model(), o);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("no anchor set with 3 anchors; it has 2"), std::string::npos)
      << missing.status().message();
  // A model of another shape.
  ModelConfig other = small_model();
  other.num_hidden_layers = 6;
  o.num_anchors = 0;
  auto mismatch = build_policy_config(other, o);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("describes a model with 4 layers"), std::string::npos)
      << mismatch.status().message();
  std::filesystem::remove(path);
  // A missing file.
  auto gone = build_policy_config(small_model(), o);
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(path), std::string::npos) << gone.status().message();
}

// use_default_calibration_file: <model dir>/kascade_calibration.json for a kascade variant given neither a file
// nor anchors (the model given as its directory or its config.json); nothing for dense, for given anchors or a
// given file, and nothing when the directory has no such file.
TEST(PolicySetup, DefaultCalibrationFileIsTheModelDirectorysOwn) {
  namespace fs = std::filesystem;
  const fs::path dir = testing::test_temp_path("model_with_calibration");
  fs::create_directories(dir);
  const std::string model = dir.string();
  const std::string expected = (dir / "kascade_calibration.json").string();
  AttentionOptions o;
  o.policy = "kascade";
  use_default_calibration_file(o, model);
  EXPECT_EQ(o.calibration_file, "") << "no file in the directory yet";
  std::ofstream(expected) << "{}";
  use_default_calibration_file(o, model);
  EXPECT_EQ(o.calibration_file, expected);
  AttentionOptions via_config;
  via_config.policy = "kascade-decode";
  use_default_calibration_file(via_config, (dir / "config.json").string());
  EXPECT_EQ(via_config.calibration_file, expected);
  AttentionOptions given_file;
  given_file.policy = "kascade";
  given_file.calibration_file = "mine.json";
  use_default_calibration_file(given_file, model);
  EXPECT_EQ(given_file.calibration_file, "mine.json");
  AttentionOptions given_anchors;
  given_anchors.policy = "kascade";
  given_anchors.anchors = {0, 2};
  use_default_calibration_file(given_anchors, model);
  EXPECT_EQ(given_anchors.calibration_file, "") << "anchors were given";
  AttentionOptions dense;
  dense.policy = "dense";
  use_default_calibration_file(dense, model);
  EXPECT_EQ(dense.calibration_file, "") << "dense reads no schedule";
  fs::remove_all(dir);
}

TEST(PolicySetup, Refusals) {
  AttentionOptions o;
  o.policy = "sparse-magic";
  auto unknown = build_policy_config(small_model(), o);
  EXPECT_NE(unknown.status().message().find("unknown attention policy 'sparse-magic'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("lessismore"), std::string::npos);

  o.policy = "kascade";
  auto no_schedule = build_policy_config(small_model(), o);
  EXPECT_EQ(no_schedule.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_schedule.status().message().find("kascade calibrate"), std::string::npos);
  EXPECT_NE(no_schedule.status().message().find("--anchors"), std::string::npos);

  o.policy = "quest";
  o.anchors = {0, 2};
  EXPECT_NE(build_policy_config(small_model(), o).status().message().find("uses no anchors"), std::string::npos);

  o.policy = "kascade";
  o.calibration_file = "x.json";
  EXPECT_NE(build_policy_config(small_model(), o).status().message().find("not both"), std::string::npos);

  o.calibration_file.clear();
  o.anchors = {1, 2};  // layer 0 must be an anchor
  EXPECT_FALSE(build_policy_config(small_model(), o).ok());
  o.anchors = {0, 2};
  o.topk_fraction = 1.5;
  EXPECT_NE(build_policy_config(small_model(), o).status().message().find("--topk-fraction"), std::string::npos);
  o.topk_fraction = 0.1;
  o.tile_size = 0;
  EXPECT_FALSE(build_policy_config(small_model(), o).ok());
}

TEST(PolicySetup, EveryPolicyNameIsAccepted) {
  for (const std::string& name : policy_names()) {
    AttentionOptions o;
    o.policy = name;
    if (name.rfind("kascade", 0) == 0) o.anchors = {0, 2};
    auto s = build_policy_config(small_model(), o);
    EXPECT_TRUE(s.ok()) << name << ": " << s.status().to_string();
  }
}

// The schedule choice shared with the C interface: an explicit head map with its anchors, the names of the
// caller's options in the refusals, and nothing for a policy that reads no schedule.
TEST(PolicySetup, ChooseScheduleTakesAGivenHeadMapAndNamesTheCallersOptions) {
  const ScheduleShape shape{4, 8, 2, 64};
  ScheduleRequest r;
  r.file_option = "config.calibration_file";
  r.anchors_option = "config.anchors";
  r.anchors = {0, 2};
  r.head_map = {0, 1, 1, 0, 0, 1, 0, 1};
  std::string note;
  auto given = choose_schedule("kascade", shape, r, &note);
  ASSERT_TRUE(given.ok()) << given.status().to_string();
  EXPECT_EQ(given->anchors, r.anchors);
  EXPECT_EQ(given->head_map, r.head_map);
  EXPECT_EQ(note, "anchors 0,2 (given head map)");

  auto dense = choose_schedule("dense", shape, ScheduleRequest{}, &note);
  ASSERT_TRUE(dense.ok());
  EXPECT_TRUE(dense->anchors.empty() && dense->head_map.empty());
  EXPECT_EQ(note, "");

  ScheduleRequest map_only = r;
  map_only.anchors.clear();
  EXPECT_NE(choose_schedule("kascade", shape, map_only, nullptr).status().message().find("a head map needs its anchors "
                                                                                        "(config.anchors)"),
            std::string::npos);
  ScheduleRequest none;
  none.file_option = r.file_option;
  none.anchors_option = r.anchors_option;
  const std::string message = choose_schedule("kascade", shape, none, nullptr).status().message();
  EXPECT_NE(message.find("config.calibration_file"), std::string::npos) << message;
  EXPECT_NE(message.find("config.anchors"), std::string::npos) << message;
  ScheduleRequest count_only = none;
  count_only.num_anchors_option = "config.calibration_num_anchors";
  count_only.num_anchors = 3;
  const std::string count_message = choose_schedule("kascade", shape, count_only, nullptr).status().message();
  EXPECT_NE(count_message.find("an anchor count (config.calibration_num_anchors 3) picks an anchor set of a "
                               "calibration file (config.calibration_file)"),
            std::string::npos)
      << count_message;
}

}  // namespace
}  // namespace kascade::runtime
