// test_anchor_refinement.cpp — `kascade calibrate --refine agreement` as a library call
// (src/runtime/anchor_refinement.h), end to end on the tiny random Llama of tests/data/hf/llama_tiny
// (4 layers: the DP set's neighbourhood holds every other set of its count, so the climb must end at
// the best of all of them):
//   - statistics collected, the DP file built, the default count refined: the refined set scores at
//     least the DP set, no set of that count scores better (each scored by score_agreement), the file
//     holds the refined set with the DP set under refinement.dp_anchors, the other counts are the DP
//     file's, and a runtime made from the written file (`--calibration FILE`) reproduces the recorded
//     agreement and KL through an independent recomputation;
//   - max_sets_scored bounds synthetic climbs and is reached by one that moves every round;
//   - refusals: an imported file, a count without a set or listed twice, negative rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "kascade/calibration.h"
#include "runtime/anchor_refinement.h"
#include "testing/harness.h"
#include "unit/runtime/agreement_fixture.h"

namespace kascade::runtime {
namespace {

using namespace testing_agreement;

calib::CalibrationFile dp_file(Runtime& rt, const std::vector<CalibrationPrompt>& prompts) {
  CalibrationRunOptions run;
  run.k_cal = 8;
  run.decode_tokens = 4;
  run.stop_at_eos = false;
  auto collected = collect_calibration_stats(rt, prompts, run);
  EXPECT_TRUE(collected.ok()) << collected.status().to_string();
  calib::ModelIdentity id{"llama_tiny", llama_dir(), 4, 2, 4, 32};
  calib::CollectionSettings settings;
  settings.k_min = kSmallKMin;
  settings.tile_size = kTile;
  settings.k_cal = 8;
  auto file = calib::build_calibration_file(id, calib::DevSetInfo{"tiny prompts", 4}, settings, collected->stats,
                                            std::vector<int32_t>{2, 3}, 2);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

TEST(AnchorRefinement, RefinedSetIsTheBestOfItsCountAndTheFileReproducesIt) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  const auto prompts = tiny_prompts();
  const calib::CalibrationFile before = dp_file(*rt, prompts);
  calib::CalibrationFile file = before;
  RefinementOptions options;
  options.anchor_counts = {2};
  options.tokens = 8;
  options.max_rounds = 3;
  options.stop_at_eos = false;
  std::vector<RefinementProgress> progress;
  auto result = refine_anchor_sets(*rt, prompts, file, options, [&](const RefinementProgress& p) { progress.push_back(p); });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->counts.size(), 1u);
  EXPECT_EQ(result->prompts, 3);
  EXPECT_EQ(result->steps, 24);
  const calib::HillClimbResult& climb = result->counts[0].climb;
  EXPECT_EQ(climb.start.anchors, before.find_anchor_set(2)->anchors);
  EXPECT_FALSE(calib::better_agreement(climb.start.score, climb.best.score)) << "refined >= DP";
  EXPECT_TRUE(climb.local_optimum);
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(progress.front().reference);
  EXPECT_EQ(progress.back().runs_done, climb.sets_scored * 3);

  // Every 2-anchor set, scored on its own: none beats the refined set.
  auto ref = build_dense_reference(*rt, prompts, {8, false});
  ASSERT_TRUE(ref.ok());
  for (const std::vector<int32_t>& set : {std::vector<int32_t>{0, 1}, {0, 2}, {0, 3}}) {
    auto map = calib::build_head_map(*file.stats, set);
    ASSERT_TRUE(map.ok());
    auto s = score_agreement(*rt, *ref, Schedule{set, *map});
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE(calib::better_agreement(*s, climb.best.score)) << calib::format_anchors(set);
    if (set == climb.best.anchors) {
      EXPECT_EQ(*s, climb.best.score);
    }
  }

  // The file: the refined set in use, the DP set recorded, the other count untouched.
  const calib::AnchorSet& refined = *file.find_anchor_set(2);
  EXPECT_EQ(refined.anchors, climb.best.anchors);
  ASSERT_TRUE(refined.refinement.has_value());
  EXPECT_EQ(refined.refinement->dp_anchors, before.find_anchor_set(2)->anchors);
  EXPECT_EQ(refined.refinement->dp_objective, *before.find_anchor_set(2)->objective);
  EXPECT_GE(refined.refinement->agreement, refined.refinement->dp_agreement);
  EXPECT_EQ(refined.refinement->prompts, 3);
  EXPECT_EQ(refined.refinement->tokens, 8);
  EXPECT_EQ(refined.refinement->sets_scored, climb.sets_scored);
  EXPECT_EQ(*file.find_anchor_set(3), *before.find_anchor_set(3));

  // Through the file, as `kascade eval --calibration FILE` reads it.
  const std::string path = testing::test_temp_path("refined.json").string();
  ASSERT_TRUE(calib::write_calibration_file(file, path).ok());
  AttentionOptions from_file = small_budget("kascade");
  from_file.calibration_file = path;
  auto kascade = tiny_runtime(from_file);
  auto dense = tiny_runtime(small_budget());
  ASSERT_NE(kascade, nullptr);
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(kascade->policy().config().schedule.anchors, climb.best.anchors);
  const Recomputed again = recompute(*dense, *kascade, *ref);
  EXPECT_DOUBLE_EQ(static_cast<double>(again.matches) / static_cast<double>(again.steps),
                   refined.refinement->agreement);
  EXPECT_NEAR(again.mean_kl, refined.refinement->kl, 1e-6 + 1e-4 * again.mean_kl);
}

TEST(AnchorRefinement, MaxSetsScoredBoundsClimbs) {
  EXPECT_EQ(max_sets_scored(5, 12, 3), 1 + 4 * 7 + 2 * 3 * 6);
  EXPECT_EQ(max_sets_scored(1, 12, 3), 1);
  EXPECT_EQ(max_sets_scored(12, 12, 3), 1);
  EXPECT_EQ(max_sets_scored(5, 12, 0), 1);
  // Overlap with a far target: every round moves, the bound is reached for two rounds.
  const int32_t N = 9, K = 4;
  const std::vector<int32_t> target = {0, 6, 7, 8};
  const calib::AnchorScorer overlap = [&](std::span<const int32_t> set) -> Result<calib::AgreementScore> {
    calib::AgreementScore s;
    s.steps = K;
    for (int32_t l : set) s.matches += std::count(target.begin(), target.end(), l);
    s.mean_kl = static_cast<double>(set[1] + set[2] + set[3]) * -1e-3 + 1.0;  // prefers high layers
    return s;
  };
  auto two = calib::hill_climb_anchors(std::vector<int32_t>{0, 1, 2, 3}, N, 2, overlap);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->sets_scored, max_sets_scored(K, N, 2));
  auto rng = ::kascade::testing::rng_for_test();
  for (int trial = 0; trial < 20; ++trial) {
    std::map<std::vector<int32_t>, calib::AgreementScore> table;
    const calib::AnchorScorer random = [&](std::span<const int32_t> set) -> Result<calib::AgreementScore> {
      const std::vector<int32_t> key(set.begin(), set.end());
      auto it = table.find(key);
      if (it == table.end()) {
        calib::AgreementScore s;
        s.steps = 10;
        s.matches = static_cast<int64_t>(rng() % 11);
        s.mean_kl = static_cast<double>(rng() % 1000) / 1000.0;
        it = table.emplace(key, s).first;
      }
      return it->second;
    };
    auto c = calib::hill_climb_anchors(std::vector<int32_t>{0, 1, 2, 3}, N, 4, random);
    ASSERT_TRUE(c.ok());
    EXPECT_LE(c->sets_scored, max_sets_scored(K, N, 4)) << "trial " << trial;
  }
}

TEST(AnchorRefinement, Refusals) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  const auto prompts = tiny_prompts();
  calib::CalibrationFile file = dp_file(*rt, prompts);
  RefinementOptions options;
  options.tokens = 2;
  options.anchor_counts = {4};
  auto missing = refine_anchor_sets(*rt, prompts, file, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no 4-anchor set"), std::string::npos) << missing.status().message();
  options.anchor_counts = {2, 2};
  EXPECT_FALSE(refine_anchor_sets(*rt, prompts, file, options).ok());
  options.anchor_counts = {};
  EXPECT_FALSE(refine_anchor_sets(*rt, prompts, file, options).ok());
  options.anchor_counts = {2};
  options.max_rounds = -1;
  EXPECT_FALSE(refine_anchor_sets(*rt, prompts, file, options).ok());
  options.max_rounds = 1;
  EXPECT_FALSE(refine_anchor_sets(*rt, {}, file, options).ok());
  calib::CalibrationFile imported;
  imported.source = calib::CalibrationSource::kImported;
  imported.model = file.model;
  imported.imported_from = "x.npy";
  imported.anchor_sets.push_back(*file.find_anchor_set(2));
  imported.anchor_sets.back().objective.reset();
  imported.default_num_anchors = 2;
  auto refused = refine_anchor_sets(*rt, prompts, imported, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("collected"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace kascade::runtime
