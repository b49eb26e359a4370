// test_anchor_selection.cpp — layer scores, the anchor DP, the brute-force enumerator, head maps and
// derive_anchor_sets (src/calibrate/{calibration_stats,anchor_selection,anchor_brute_force,head_map,
// anchor_sets}.cpp):
//   - DP objective == brute-force objective on random W (<= 12 layers, <= 5 anchors, many seeds),
//     with NaN below the diagonal (never read);
//   - ties: on W with dyadic values (exact sums) the DP picks the same set as the brute force,
//     which keeps the lexicographically first maximum; crafted ties with known answers;
//   - anchor_objective against a hand sum; layer_scores against a direct evaluation;
//   - head map == argmax over anchor heads (ties: lowest), identity on anchors;
//   - derive_anchor_sets == DP + head map per count; refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kascade/calibration.h"
#include "testing/harness.h"

namespace kascade::calib {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// W: [N, N], a <= b from `draw`, a > b NaN (the DP must never read them).
template <typename Draw>
std::vector<double> make_W(int32_t N, Draw&& draw) {
  std::vector<double> W(static_cast<size_t>(N) * N, kNaN);
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = a; b < N; ++b) W[static_cast<size_t>(a) * N + b] = draw();
  }
  return W;
}

TEST(AnchorSelection, DynamicProgramMatchesBruteForceOnRandomScores) {
  int compared = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    auto rng = testing::rng_for_test(seed);
    const int32_t N = std::uniform_int_distribution<int32_t>(1, 12)(rng);
    const int32_t K = std::uniform_int_distribution<int32_t>(1, std::min(5, N))(rng);
    // Half the cases with W >= 0 (as from w · sim), half with signed values.
    const bool signed_values = seed % 2 == 1;
    std::uniform_real_distribution<double> u(signed_values ? -1.0 : 0.0, 1.0);
    const std::vector<double> W = make_W(N, [&] { return u(rng); });
    auto dp = select_anchors(W, N, K);
    auto bf = select_anchors_brute_force(W, N, K);
    ASSERT_TRUE(dp.ok()) << dp.status().to_string();
    ASSERT_TRUE(bf.ok()) << bf.status().to_string();
    ASSERT_EQ(dp->anchors.size(), static_cast<size_t>(K));
    ASSERT_TRUE(validate_anchors(dp->anchors, N).ok());
    auto recomputed = anchor_objective(W, N, dp->anchors);
    ASSERT_TRUE(recomputed.ok());
    EXPECT_EQ(*recomputed, dp->objective);
    EXPECT_NEAR(dp->objective, bf->objective, 1e-12) << "seed " << seed << " N " << N << " K " << K;
    ++compared;
  }
  EXPECT_EQ(compared, 300);
}

TEST(AnchorSelection, TiesGoToTheLowestLayersLikeTheBruteForce) {
  // Values in {0, 0.25, 0.5, 1}: every sum is exact, so equal objectives compare equal in both
  // implementations and the DP must return the brute force's lexicographically first set.
  int with_ties = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    auto rng = testing::rng_for_test(seed);
    const int32_t N = std::uniform_int_distribution<int32_t>(2, 10)(rng);
    const int32_t K = std::uniform_int_distribution<int32_t>(2, std::min(5, N))(rng);
    const double levels[] = {0.0, 0.25, 0.5, 1.0};
    std::uniform_int_distribution<int> pick(0, 3);
    const std::vector<double> W = make_W(N, [&] { return levels[pick(rng)]; });
    auto dp = select_anchors(W, N, K);
    auto bf = select_anchors_brute_force(W, N, K);
    ASSERT_TRUE(dp.ok() && bf.ok());
    EXPECT_EQ(dp->anchors, bf->anchors) << "seed " << seed << " N " << N << " K " << K;
    EXPECT_EQ(dp->objective, bf->objective);
    // Count the cases where another set reaches the same optimum (the tie rule is exercised).
    std::vector<int32_t> shifted = dp->anchors;
    for (size_t m = 1; m < shifted.size(); ++m) {
      const bool room = shifted[m] + 1 < N && (m + 1 == shifted.size() || shifted[m] + 1 < shifted[m + 1]);
      if (!room) continue;
      ++shifted[m];
      auto other = anchor_objective(W, N, shifted);
      ASSERT_TRUE(other.ok());
      if (*other == dp->objective) ++with_ties;
      --shifted[m];
    }
  }
  EXPECT_GT(with_ties, 20) << "the dyadic cases should contain many ties";
}

TEST(AnchorSelection, CraftedTies) {
  // All W equal: every set has objective N; the lowest layers win.
  for (int32_t N : {1, 4, 9}) {
    const std::vector<double> W = make_W(N, [] { return 1.0; });
    for (int32_t K = 1; K <= std::min(N, 5); ++K) {
      auto dp = select_anchors(W, N, K);
      ASSERT_TRUE(dp.ok());
      std::vector<int32_t> lowest(K);
      for (int32_t m = 0; m < K; ++m) lowest[m] = m;
      EXPECT_EQ(dp->anchors, lowest) << "N " << N << " K " << K;
      EXPECT_EQ(dp->objective, static_cast<double>(N));
    }
  }
  // N = 4, K = 2: objective({0, a}) = Σ_{j<a} W(0, j) + Σ_{j>=a} W(a, j).
  //   W(0, ·) = 1; W(1, ·) = 1; W(2, ·) = 0.5; W(3, 3) = 1.
  //   {0,1}: 1 + 3 = 4;  {0,2}: 2 + 1 = 3;  {0,3}: 3 + 1 = 4  → tie between 1 and 3, 1 wins.
  std::vector<double> W = {1, 1, 1, 1, kNaN, 1, 1, 1, kNaN, kNaN, 0.5, 0.5, kNaN, kNaN, kNaN, 1};
  auto dp = select_anchors(W, 4, 2);
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->anchors, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(dp->objective, 4.0);
  // Make layer 3 strictly better: it must win.
  W[15] = 1.5;
  dp = select_anchors(W, 4, 2);
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->anchors, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(dp->objective, 4.5);
}

TEST(AnchorSelection, ObjectiveIsTheSegmentSum) {
  // N = 5, anchors {0, 2, 3}: W(0,0) + W(0,1) + W(2,2) + W(3,3) + W(3,4).
  std::vector<double> W(25, kNaN);
  for (int a = 0; a < 5; ++a) {
    for (int b = a; b < 5; ++b) W[a * 5 + b] = std::ldexp(1.0, a * 5 + b);  // distinct powers of two
  }
  const std::vector<int32_t> anchors = {0, 2, 3};
  auto obj = anchor_objective(W, 5, anchors);
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(*obj, std::ldexp(1.0, 0) + std::ldexp(1.0, 1) + std::ldexp(1.0, 12) + std::ldexp(1.0, 18) +
                      std::ldexp(1.0, 19));
}

TEST(AnchorSelection, RefusesBadArguments) {
  const std::vector<double> W = make_W(4, [] { return 0.5; });
  EXPECT_FALSE(select_anchors(W, 4, 0).ok());
  EXPECT_FALSE(select_anchors(W, 4, 5).ok());
  EXPECT_FALSE(select_anchors(W, 5, 2).ok()) << "wrong size";
  EXPECT_FALSE(select_anchors_brute_force(W, 4, 5).ok());
  std::vector<double> bad = W;
  bad[1 * 4 + 2] = std::numeric_limits<double>::infinity();
  Status s = select_anchors(bad, 4, 2).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("W(1, 2)"), std::string::npos) << s.message();
  EXPECT_FALSE(select_anchors_brute_force(bad, 4, 2).ok());
  const std::vector<double> big = make_W(60, [] { return 1.0; });
  EXPECT_FALSE(select_anchors_brute_force(big, 60, 8).ok()) << "too many sets to enumerate";
  EXPECT_TRUE(select_anchors(big, 60, 8).ok());

  for (const std::vector<int32_t>& anchors :
       {std::vector<int32_t>{}, {1, 2}, {0, 2, 2}, {0, 3, 2}, {0, 4}, {0, -1}}) {
    EXPECT_FALSE(validate_anchors(anchors, 4).ok());
    EXPECT_FALSE(anchor_objective(W, 4, anchors).ok());
  }
}

// Random statistics with similarities on a coarse grid (many ties in the head argmax).
CalibrationStats random_stats(std::mt19937_64& rng, int32_t N, int32_t G, bool coarse) {
  CalibrationStats s;
  s.num_layers = N;
  s.num_kv_heads = G;
  s.num_prompts = 3;
  s.similarity.assign(static_cast<size_t>(N) * N * G * G, 0.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> grid(0, 4);
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = a; b < N; ++b) {
      for (int32_t ga = 0; ga < G; ++ga) {
        for (int32_t gb = 0; gb < G; ++gb) {
          s.similarity[((static_cast<size_t>(a) * N + b) * G + ga) * G + gb] = coarse ? grid(rng) / 4.0 : u(rng);
        }
      }
    }
  }
  s.importance.resize(N);
  for (double& w : s.importance) w = u(rng) * 0.5;
  return s;
}

TEST(AnchorSelection, LayerScoresAreImportanceTimesMeanOfMax) {
  auto rng = testing::rng_for_test();
  const int32_t N = 6, G = 3;
  const CalibrationStats s = random_stats(rng, N, G, false);
  auto W = layer_scores(s);
  ASSERT_TRUE(W.ok()) << W.status().to_string();
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = 0; b < N; ++b) {
      double expected = 0.0;
      if (a <= b) {
        for (int32_t gb = 0; gb < G; ++gb) {
          double best = -1.0;
          for (int32_t ga = 0; ga < G; ++ga) best = std::max(best, s.sim(a, b, ga, gb));
          expected += best / G;
        }
        expected *= s.importance[b];
      }
      EXPECT_NEAR((*W)[a * N + b], expected, 1e-15) << "W(" << a << ", " << b << ")";
    }
  }
}

TEST(HeadMap, IsTheArgmaxOverAnchorHeadsWithTiesToTheLowest) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto rng = testing::rng_for_test(seed);
    const int32_t N = 7, G = 4;
    const CalibrationStats s = random_stats(rng, N, G, /*coarse=*/seed % 2 == 0);
    // Anchors: 0 plus a random subset.
    std::vector<int32_t> anchors = {0};
    for (int32_t l = 1; l < N; ++l) {
      if (rng() % 3 == 0) anchors.push_back(l);
    }
    auto map = build_head_map(s, anchors);
    ASSERT_TRUE(map.ok()) << map.status().to_string();
    ASSERT_EQ(map->size(), static_cast<size_t>(N) * G);
    int32_t anchor = 0;
    for (int32_t b = 0; b < N; ++b) {
      const bool is_anchor = std::find(anchors.begin(), anchors.end(), b) != anchors.end();
      if (is_anchor) anchor = b;
      for (int32_t gb = 0; gb < G; ++gb) {
        int32_t expected = gb;
        if (!is_anchor) {
          // The first ga (in increasing order) whose similarity is >= every other one.
          for (int32_t ga = 0; ga < G; ++ga) {
            bool best = true;
            for (int32_t other = 0; other < G; ++other) best = best && s.sim(anchor, b, ga, gb) >= s.sim(anchor, b, other, gb);
            if (best) {
              expected = ga;
              break;
            }
          }
        }
        EXPECT_EQ((*map)[b * G + gb], expected) << "seed " << seed << " layer " << b << " head " << gb;
      }
    }
    EXPECT_TRUE(validate_head_map(*map, N, G, anchors).ok());
  }
}

TEST(HeadMap, AllTiedMapsToHeadZeroAndAnchorsToThemselves) {
  CalibrationStats s;
  s.num_layers = 4;
  s.num_kv_heads = 3;
  s.num_prompts = 1;
  s.similarity.assign(4 * 4 * 3 * 3, 0.0);
  for (int a = 0; a < 4; ++a) {
    for (int b = a; b < 4; ++b) {
      for (int i = 0; i < 9; ++i) s.similarity[(a * 4 + b) * 9 + i] = 0.75;
    }
  }
  s.importance = {0.1, 0.2, 0.3, 0.4};
  auto map = build_head_map(s, std::vector<int32_t>{0, 2});
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(*map, (std::vector<int32_t>{0, 1, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0}));
}

TEST(HeadMap, ValidationRefusesOutOfRangeAndNonIdentityAnchorRows) {
  const std::vector<int32_t> anchors = {0, 2};
  std::vector<int32_t> map = {0, 1, 1, 1, 0, 1};  // N = 3, G = 2
  EXPECT_TRUE(validate_head_map(map, 3, 2, anchors).ok());
  map[3] = 2;
  Status s = validate_head_map(map, 3, 2, anchors);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("head_map[1][1]"), std::string::npos) << s.message();
  map[3] = 1;
  map[5] = 0;
  s = validate_head_map(map, 3, 2, anchors);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("head_map[2][1]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("identity"), std::string::npos) << s.message();
  EXPECT_FALSE(validate_head_map(std::vector<int32_t>{0, 1, 1}, 3, 2, anchors).ok()) << "wrong size";
}

TEST(DeriveAnchorSets, EqualsDynamicProgramAndHeadMapPerCount) {
  auto rng = testing::rng_for_test();
  const int32_t N = 9, G = 2;
  const CalibrationStats s = random_stats(rng, N, G, false);
  const std::vector<int32_t> counts = default_anchor_counts(N);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8}));
  auto sets = derive_anchor_sets(s, counts);
  ASSERT_TRUE(sets.ok()) << sets.status().to_string();
  ASSERT_EQ(sets->size(), counts.size());
  auto W = layer_scores(s);
  ASSERT_TRUE(W.ok());
  for (size_t i = 0; i < counts.size(); ++i) {
    auto bf = select_anchors_brute_force(*W, N, counts[i]);
    ASSERT_TRUE(bf.ok());
    EXPECT_EQ((*sets)[i].anchors.size(), static_cast<size_t>(counts[i]));
    ASSERT_TRUE((*sets)[i].objective.has_value());
    EXPECT_NEAR(*(*sets)[i].objective, bf->objective, 1e-12);
    auto map = build_head_map(s, (*sets)[i].anchors);
    ASSERT_TRUE(map.ok());
    EXPECT_EQ((*sets)[i].head_map, *map);
  }
  EXPECT_EQ(default_anchor_counts(1), std::vector<int32_t>{1});
  EXPECT_EQ(default_anchor_counts(3), (std::vector<int32_t>{2, 3}));
  EXPECT_FALSE(derive_anchor_sets(s, std::vector<int32_t>{}).ok());
  EXPECT_FALSE(derive_anchor_sets(s, std::vector<int32_t>{2, 2}).ok());
  EXPECT_FALSE(derive_anchor_sets(s, std::vector<int32_t>{N + 1}).ok());
  CalibrationStats bad = s;
  bad.importance[3] = kNaN;
  Status st = derive_anchor_sets(bad, counts).status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("statistics.importance[3]"), std::string::npos) << st.message();
}

TEST(DeriveAnchorSets, EndToEndFromAccumulators) {
  // Two layers that select the same keys and one that does not: with 2 anchors the DP must put the
  // second anchor on the odd layer out (layer 2), whose keys layer 0 does not recover.
  const int32_t N = 3, G = 1;
  auto sim = SimilarityAccumulator::create(N, G, 1);
  auto imp = ImportanceAccumulator::create(N, 2);
  ASSERT_TRUE(sim.ok() && imp.ok());
  const float same[] = {0.9f, 0.1f}, other[] = {0.1f, 0.9f};
  const float x[] = {1, 0}, attn[] = {0, 1};
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(sim->begin_prompt("p").ok());
    ASSERT_TRUE(imp->begin_prompt("p").ok());
    for (int32_t l = 0; l < N; ++l) {
      ASSERT_TRUE(sim->add(0, l, UnitScores{l == 2 ? other : same, 2, 0, nullptr}).ok());
      ASSERT_TRUE(imp->add(l, x, attn, 1, DType::kF32).ok());
    }
    ASSERT_TRUE(sim->end_prompt().ok());
    ASSERT_TRUE(imp->end_prompt().ok());
  }
  auto stats = make_calibration_stats(*sim, *imp);
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(stats->num_prompts, 2);
  EXPECT_EQ(stats->sim(0, 1, 0, 0), 1.0);
  EXPECT_NEAR(stats->sim(0, 2, 0, 0), 0.1f / static_cast<double>(0.9f), 1e-15);
  auto sets = derive_anchor_sets(*stats, std::vector<int32_t>{2});
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ((*sets)[0].anchors, (std::vector<int32_t>{0, 2}));

  auto imp_other = ImportanceAccumulator::create(N + 1, 2);
  ASSERT_TRUE(imp_other.ok());
  EXPECT_FALSE(make_calibration_stats(*sim, *imp_other).ok()) << "layer counts differ";
}

}  // namespace
}  // namespace kascade::calib
