// test_statistics.cpp — the fraction of keys attended (kascade/policy.h, src/policy/
// attended_count.cpp) on hand-computed cases: dense, Kascade prefill with tiles (rows + local
// keys), Kascade decode over two sequences, the prefill oracle, aggregation by role, accumulation
// over calls and reset; and, for Quest / LessIsMore whose row lengths come back from the backend,
// against the lengths of the rows the policy exposes.
#include <gtest/gtest.h>

#include <cmath>

#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "policy_fixture.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

std::unique_ptr<AttentionPolicy> make(const PolicyConfig& config) {
  auto policy = make_policy(config, make_cpu_backend());
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return policy.ok() ? std::move(policy).value() : nullptr;
}

ProblemShape four_layers() {
  ProblemShape shape;
  shape.num_layers = 4;
  return shape;
}

PolicyConfig kascade_config(const Problem& problem) {
  PolicyConfig config = config_for(problem, "kascade");  // rho 10 %, k_min 8, T = 32
  config.schedule = *identity_schedule({0, 2}, 4, 2);
  return config;
}

TEST(AttendedStatistics, DenseAttendsTheWholeCausalRange) {
  auto rng = rng_for_test();
  const Problem problem(rng, four_layers(), {70});
  auto policy = make(config_for(problem, "dense"));
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, problem.prefill_all(), false, &run));
  for (int32_t l = 0; l < 4; ++l) {
    const AttendedCount c = policy->statistics().layer(ForwardMode::kPrefill, l);
    EXPECT_EQ(c.causal, 8 * 70 * 71 / 2);  // H · Σ_{p<70} (p + 1)
    EXPECT_EQ(c.attended, c.causal);
    EXPECT_DOUBLE_EQ(c.fraction(), 1.0);
  }
  EXPECT_TRUE(std::isnan(policy->statistics().total(ForwardMode::kDecode).fraction()));
}

TEST(AttendedStatistics, KascadePrefillCountsRowsPlusLocalKeys) {
  auto rng = rng_for_test();
  const Problem problem(rng, four_layers(), {70});
  auto policy = make(kascade_config(problem));
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, problem.prefill_all(), false, &run));
  // Per head: tile 0 (k 0): Σ_{p=0}^{31} (p+1) = 528; tile 1 (s 32, k(32) = 8): 32·8 + 528 = 784;
  // tile 2 (s 64, k(64) = max(8, ceil(6.4)) = 8): 6·8 + (1+…+6) = 69. Total 1381 of 2485.
  const AttendedStatistics& stats = policy->statistics();
  EXPECT_EQ(stats.layer(ForwardMode::kPrefill, 0).attended, 8 * 2485);  // layer 0: dense
  for (int32_t l = 1; l < 4; ++l) {
    EXPECT_EQ(stats.layer(ForwardMode::kPrefill, l).attended, 8 * 1381) << "layer " << l;
    EXPECT_EQ(stats.layer(ForwardMode::kPrefill, l).causal, 8 * 2485) << "layer " << l;
  }
  EXPECT_DOUBLE_EQ(stats.by_role(ForwardMode::kPrefill, LayerRole::kAnchor).fraction(), 1381.0 / 2485.0);
  EXPECT_EQ(stats.by_role(ForwardMode::kPrefill, LayerRole::kReuse).attended, 2 * 8 * 1381);
  EXPECT_DOUBLE_EQ(stats.by_role(ForwardMode::kPrefill, LayerRole::kDenseAnchor).fraction(), 1.0);
  EXPECT_DOUBLE_EQ(stats.total(ForwardMode::kPrefill).fraction(), (2485.0 + 3 * 1381.0) / (4 * 2485.0));
}

TEST(AttendedStatistics, KascadeDecodeAccumulatesOverCallsAndResets) {
  auto rng = rng_for_test();
  const Problem problem(rng, four_layers(), {300, 50});
  auto policy = make(kascade_config(problem));
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, problem.decode_last(), false, &run));
  // k(300) = 30, k(50) = max(8, 5) = 8: 38 of 350 keys per head.
  const AttendedStatistics& stats = policy->statistics();
  EXPECT_EQ(stats.layer(ForwardMode::kDecode, 0).attended, 8 * 350);
  EXPECT_EQ(stats.layer(ForwardMode::kDecode, 3).attended, 8 * 38);
  EXPECT_DOUBLE_EQ(stats.by_role(ForwardMode::kDecode, LayerRole::kReuse).fraction(), 38.0 / 350.0);
  ASSERT_TRUE(run_policy(*policy, problem, problem.decode_last(), false, &run));
  EXPECT_EQ(stats.layer(ForwardMode::kDecode, 3).attended, 2 * 8 * 38);
  EXPECT_EQ(stats.layer(ForwardMode::kDecode, 3).causal, 2 * 8 * 350);
  policy->reset_statistics();
  EXPECT_EQ(stats.layer(ForwardMode::kDecode, 3).causal, 0);
  EXPECT_EQ(stats.roles[static_cast<int>(ForwardMode::kDecode)][1], LayerRole::kReuse);
}

TEST(AttendedStatistics, PrefillOracleCountsItsOwnTopKPerQuery) {
  auto rng = rng_for_test();
  ProblemShape shape = four_layers();
  shape.num_layers = 2;
  const Problem problem(rng, shape, {10});
  PolicyConfig config = config_for(problem, "oracle");
  config.budget.k_min = 2;
  auto policy = make(config);
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, problem.prefill_all(), false, &run));
  // k(p+1) = 1 at p = 0, then max(2, ceil(0.1·(p+1))) = 2 for p = 1..9: 19 of 55 keys per head.
  EXPECT_EQ(policy->statistics().layer(ForwardMode::kPrefill, 1).attended, 8 * 19);
  EXPECT_EQ(policy->statistics().layer(ForwardMode::kPrefill, 1).causal, 8 * 55);
}

TEST(AttendedStatistics, QuestAndLessIsMoreCountTheRowsTheyReturned) {
  auto rng = rng_for_test();
  const Problem problem(rng, four_layers(), {129, 40, 7});
  for (const std::string name : {"quest", "lessismore"}) {
    SCOPED_TRACE(name);
    PolicyConfig config = config_for(problem, name);
    config.quest_page_size = 16;
    auto policy = make(config);
    const Call call = problem.decode_last();
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
    for (int32_t l = 0; l < 4; ++l) {
      const LayerRole role = *policy->role(l, ForwardMode::kDecode);
      int64_t expected = 0;
      if (role == LayerRole::kDense || role == LayerRole::kDenseAnchor) {
        expected = 8 * (129 + 40 + 7);
      } else {
        const IndexSnapshot& snap = run.rows[static_cast<size_t>(l)];
        for (int32_t b = 0; b < 3; ++b) {
          for (int32_t h = 0; h < 8; ++h) {
            expected += static_cast<int64_t>(decode_row(snap, b, name == "quest" ? h : 0).size());
          }
        }
      }
      EXPECT_EQ(policy->statistics().layer(ForwardMode::kDecode, l).attended, expected) << "layer " << l;
    }
  }
}

}  // namespace
}  // namespace kascade::testing
