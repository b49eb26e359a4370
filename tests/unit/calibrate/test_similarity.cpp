// test_similarity.cpp — SimilarityAccumulator (src/calibrate/similarity_accumulator.cpp) against a
// direct recomputation that holds every S of every layer: its own Top-k by a full sort (score
// descending, index ascending), the ratio of DESIGN.md §2.5 in fp64, the min over units (skipping
// zero denominators) and the mean over prompts. Inputs are random synthetic pooled scores with
// many ties, prefill units (with local mass) and decode units (without), units with fewer
// candidates than k_cal, padded rows (NaN padding that must never be read), and units streamed in
// both layer-major and unit-major order. Also: sim(a→a; g, g) = 1 exactly, and every refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kascade/calibration.h"
#include "testing/harness.h"

namespace kascade::calib {
namespace {

// One unit of a synthetic prompt: S for every layer and group, LT (empty for decode).
struct SyntheticUnit {
  int64_t id = 0;
  int64_t n = 0;                  // candidates
  int64_t stride = 0;             // row stride used when feeding (>= n; padding is NaN)
  bool decode = false;
  std::vector<float> scores;      // [N, G, stride]
  std::vector<float> local;       // [N, G] (decode: empty)
  float s(int32_t l, int32_t g, int64_t j, int32_t G) const {
    return scores[(static_cast<size_t>(l) * G + g) * stride + j];
  }
};

struct SyntheticPrompt {
  std::string name;
  std::vector<SyntheticUnit> units;
};

// Scores on a grid of 1/8 so that ties are common; about a quarter of them exactly 0.
float grid_score(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> q(-4, 15);
  return static_cast<float>(std::max(q(rng), 0)) / 8.0f;
}

SyntheticPrompt make_prompt(std::mt19937_64& rng, const std::string& name, int32_t N, int32_t G,
                            const std::vector<int64_t>& prefill_candidates,
                            const std::vector<int64_t>& decode_candidates) {
  SyntheticPrompt p;
  p.name = name;
  int64_t id = 100;
  auto add_unit = [&](int64_t n, bool decode) {
    SyntheticUnit u;
    u.id = id;
    id += 7;  // ids are the collector's: not necessarily dense
    u.n = n;
    u.stride = n + static_cast<int64_t>(p.units.size() % 3);  // some rows padded
    u.decode = decode;
    u.scores.assign(static_cast<size_t>(N) * G * u.stride, std::numeric_limits<float>::quiet_NaN());
    for (int32_t l = 0; l < N; ++l) {
      for (int32_t g = 0; g < G; ++g) {
        for (int64_t j = 0; j < n; ++j) u.scores[(static_cast<size_t>(l) * G + g) * u.stride + j] = grid_score(rng);
      }
    }
    if (!decode) {
      u.local.resize(static_cast<size_t>(N) * G);
      for (float& v : u.local) v = grid_score(rng) + 0.125f;  // prefill local mass > 0
    }
    p.units.push_back(std::move(u));
  };
  for (int64_t n : prefill_candidates) add_unit(n, false);
  for (int64_t n : decode_candidates) add_unit(n, true);
  return p;
}

// Top-k of a row by a full sort (score descending, index ascending), returned ascending.
std::vector<int64_t> reference_topk(const SyntheticUnit& u, int32_t l, int32_t g, int32_t G, int64_t k) {
  std::vector<int64_t> order(u.n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    const float sx = u.s(l, g, x, G), sy = u.s(l, g, y, G);
    return sx != sy ? sx > sy : x < y;
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

// mean over prompts of min over units of the ratio: [N, N, G, G], a > b zero.
std::vector<double> reference_similarity(const std::vector<SyntheticPrompt>& prompts, int32_t N, int32_t G,
                                         int64_t k_cal) {
  const size_t size = static_cast<size_t>(N) * N * G * G;
  std::vector<double> mean(size, 0.0);
  for (const SyntheticPrompt& p : prompts) {
    std::vector<double> mins(size, std::numeric_limits<double>::infinity());
    for (const SyntheticUnit& u : p.units) {
      const int64_t k = std::min(k_cal, u.n);
      for (int32_t b = 0; b < N; ++b) {
        for (int32_t gb = 0; gb < G; ++gb) {
          const double lt = u.decode ? 0.0 : u.local[static_cast<size_t>(b) * G + gb];
          auto mass = [&](const std::vector<int64_t>& set) {
            double m = 0.0;
            for (int64_t j : set) m += u.s(b, gb, j, G);
            return m + lt;
          };
          const double den = mass(reference_topk(u, b, gb, G, k));
          if (den == 0.0) continue;
          for (int32_t a = 0; a <= b; ++a) {
            for (int32_t ga = 0; ga < G; ++ga) {
              double& slot = mins[((static_cast<size_t>(a) * N + b) * G + ga) * G + gb];
              slot = std::min(slot, mass(reference_topk(u, a, ga, G, k)) / den);
            }
          }
        }
      }
    }
    for (int32_t a = 0; a < N; ++a) {
      for (int32_t b = a; b < N; ++b) {
        for (int32_t ga = 0; ga < G; ++ga) {
          for (int32_t gb = 0; gb < G; ++gb) {
            const size_t i = ((static_cast<size_t>(a) * N + b) * G + ga) * G + gb;
            EXPECT_TRUE(std::isfinite(mins[i])) << "the synthetic prompt must leave every entry usable";
            mean[i] += mins[i];
          }
        }
      }
    }
  }
  for (double& v : mean) v /= static_cast<double>(prompts.size());
  return mean;
}

UnitScores view_of(const SyntheticUnit& u, int32_t layer, int32_t G) {
  UnitScores v;
  v.scores = u.scores.data() + static_cast<size_t>(layer) * G * u.stride;
  v.num_candidates = u.n;
  v.row_stride = u.stride;
  v.local_mass = u.decode ? nullptr : u.local.data() + static_cast<size_t>(layer) * G;
  return v;
}

// Prefill units layer-major (as one-shot prefill produces them), then decode units unit-major.
Status feed_prompt(SimilarityAccumulator& acc, const SyntheticPrompt& p, int32_t N, int32_t G) {
  KC_RETURN_IF_ERROR(acc.begin_prompt(p.name));
  for (int32_t l = 0; l < N; ++l) {
    for (const SyntheticUnit& u : p.units) {
      if (!u.decode) KC_RETURN_IF_ERROR(acc.add(u.id, l, view_of(u, l, G)));
    }
  }
  for (const SyntheticUnit& u : p.units) {
    if (!u.decode) continue;
    for (int32_t l = 0; l < N; ++l) KC_RETURN_IF_ERROR(acc.add(u.id, l, view_of(u, l, G)));
  }
  return acc.end_prompt();
}

void expect_matches_reference(const std::vector<double>& got, const std::vector<double>& ref, int32_t N, int32_t G) {
  ASSERT_EQ(got.size(), ref.size());
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = 0; b < N; ++b) {
      for (int32_t ga = 0; ga < G; ++ga) {
        for (int32_t gb = 0; gb < G; ++gb) {
          const size_t i = ((static_cast<size_t>(a) * N + b) * G + ga) * G + gb;
          if (a > b) {
            ASSERT_EQ(got[i], 0.0) << "a=" << a << " b=" << b;
          } else {
            ASSERT_NEAR(got[i], ref[i], 1e-12) << "sim[" << a << "][" << b << "][" << ga << "][" << gb << "]";
          }
        }
      }
    }
  }
}

TEST(SimilarityAccumulator, MatchesDirectRecomputationOverPromptsUnitsLayersGroups) {
  for (int num_prompts : {1, 3}) {
    auto rng = testing::rng_for_test(static_cast<uint64_t>(num_prompts));
    const int32_t N = 5, G = 3;
    const int64_t k_cal = 4;
    std::vector<SyntheticPrompt> prompts;
    for (int p = 0; p < num_prompts; ++p) {
      // Prefill tiles of T = 4 (s_t = 4t) plus a short one below k_cal; three decode steps.
      prompts.push_back(make_prompt(rng, detail::concat("prompt-", p), N, G, {2, 4, 8, 12, 16},
                                    {17 + p, 18 + p, 19 + p}));
    }
    auto acc = SimilarityAccumulator::create(N, G, k_cal);
    ASSERT_TRUE(acc.ok()) << acc.status().to_string();
    for (const SyntheticPrompt& p : prompts) {
      Status s = feed_prompt(*acc, p, N, G);
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
    EXPECT_EQ(acc->num_prompts(), num_prompts);
    auto got = acc->mean_similarity();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_matches_reference(*got, reference_similarity(prompts, N, G, k_cal), N, G);
  }
}

TEST(SimilarityAccumulator, SkipsUnitsWithZeroDenominator) {
  auto rng = testing::rng_for_test();
  const int32_t N = 3, G = 2;
  const int64_t k_cal = 3;
  SyntheticPrompt p = make_prompt(rng, "zeros", N, G, {6, 9}, {10, 11});
  // Decode unit 2 has no mass at all in group 1 of layer 1, decode unit 3 none in any group of layer 2:
  // those (b, gb) are skipped for them; the prefill units (LT > 0) keep every entry usable.
  SyntheticUnit& d0 = p.units[2];
  for (int64_t j = 0; j < d0.n; ++j) d0.scores[(static_cast<size_t>(1) * G + 1) * d0.stride + j] = 0.0f;
  SyntheticUnit& d1 = p.units[3];
  for (int32_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < d1.n; ++j) d1.scores[(static_cast<size_t>(2) * G + g) * d1.stride + j] = 0.0f;
  }
  auto acc = SimilarityAccumulator::create(N, G, k_cal);
  ASSERT_TRUE(acc.ok());
  Status s = feed_prompt(*acc, p, N, G);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto got = acc->mean_similarity();
  ASSERT_TRUE(got.ok());
  expect_matches_reference(*got, reference_similarity({p}, N, G, k_cal), N, G);
}

TEST(SimilarityAccumulator, SelfSimilarityIsExactlyOne) {
  auto rng = testing::rng_for_test();
  const int32_t N = 4, G = 4;
  auto acc = SimilarityAccumulator::create(N, G, 5);
  ASSERT_TRUE(acc.ok());
  for (int p = 0; p < 2; ++p) {
    Status s = feed_prompt(*acc, make_prompt(rng, detail::concat("p", p), N, G, {3, 8, 20}, {21, 22}), N, G);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  auto sim = acc->mean_similarity();
  ASSERT_TRUE(sim.ok());
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t g = 0; g < G; ++g) {
      EXPECT_EQ((*sim)[((static_cast<size_t>(a) * N + a) * G + g) * G + g], 1.0) << "layer " << a << " head " << g;
    }
  }
}

TEST(SimilarityAccumulator, UnitsWithAtMostKCalCandidatesGiveOne) {
  // With n <= k_cal every index set holds all candidates, so every ratio is 1.
  auto rng = testing::rng_for_test();
  const int32_t N = 3, G = 2;
  auto acc = SimilarityAccumulator::create(N, G, 8);
  ASSERT_TRUE(acc.ok());
  Status s = feed_prompt(*acc, make_prompt(rng, "short", N, G, {1, 4, 8}, {8}), N, G);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto sim = acc->mean_similarity();
  ASSERT_TRUE(sim.ok());
  for (int32_t a = 0; a < N; ++a) {
    for (int32_t b = a; b < N; ++b) {
      for (int32_t ga = 0; ga < G; ++ga) {
        for (int32_t gb = 0; gb < G; ++gb) {
          EXPECT_DOUBLE_EQ((*sim)[((static_cast<size_t>(a) * N + b) * G + ga) * G + gb], 1.0);
        }
      }
    }
  }
}

TEST(SimilarityAccumulator, HandComputedRatioAndMinAndMean) {
  // N = 2 layers, G = 1, k_cal = 1. Two prompts of two units each.
  auto acc = SimilarityAccumulator::create(2, 1, 1);
  ASSERT_TRUE(acc.ok());
  // Prompt A, unit 0 (prefill, LT = 1): layer 0 S = [0.2, 0.8] → I = {1}; layer 1 S = [0.5, 0.25] → I = {0}.
  //   sim(0→1) = (S1[1] + 1) / (S1[0] + 1) = 1.25 / 1.5 = 5/6.
  // Prompt A, unit 1 (decode): layer 0 S = [0.6, 0.4, 0] → I = {0}; layer 1 S = [0.1, 0.9, 0] → I = {1}.
  //   sim(0→1) = 0.1 / 0.9 = 1/9.  min → 1/9.
  // Prompt B, unit 0 (decode): layer 0 S = [1, 1] → I = {0} (tie: lower index); layer 1 S = [0.5, 0.5] → I = {0}.
  //   sim(0→1) = 1.  mean over prompts: (1/9 + 1) / 2 = 5/9.
  const float a0l0[] = {0.2f, 0.8f}, a0l1[] = {0.5f, 0.25f}, lt[] = {1.0f};
  const float a1l0[] = {0.6f, 0.4f, 0.0f}, a1l1[] = {0.1f, 0.9f, 0.0f};
  const float b0l0[] = {1.0f, 1.0f}, b0l1[] = {0.5f, 0.5f};
  ASSERT_TRUE(acc->begin_prompt("A").ok());
  ASSERT_TRUE(acc->add(0, 0, UnitScores{a0l0, 2, 0, lt}).ok());
  ASSERT_TRUE(acc->add(1, 0, UnitScores{a1l0, 3, 0, nullptr}).ok());
  ASSERT_TRUE(acc->add(1, 1, UnitScores{a1l1, 3, 0, nullptr}).ok());
  ASSERT_TRUE(acc->add(0, 1, UnitScores{a0l1, 2, 0, lt}).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  auto after_a = acc->mean_similarity();
  ASSERT_TRUE(after_a.ok());
  EXPECT_NEAR((*after_a)[1], (0.1f / static_cast<double>(0.9f)), 1e-15);  // [a=0][b=1]
  EXPECT_EQ((*after_a)[2], 0.0);                                          // [a=1][b=0]
  ASSERT_TRUE(acc->begin_prompt("B").ok());
  ASSERT_TRUE(acc->add(0, 0, UnitScores{b0l0, 2, 0, nullptr}).ok());
  ASSERT_TRUE(acc->add(0, 1, UnitScores{b0l1, 2, 0, nullptr}).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  auto sim = acc->mean_similarity();
  ASSERT_TRUE(sim.ok());
  EXPECT_NEAR((*sim)[1], (0.1f / static_cast<double>(0.9f) + 1.0) / 2.0, 1e-15);
  EXPECT_NEAR((*sim)[1], 5.0 / 9.0, 1e-7);
  EXPECT_EQ((*sim)[0], 1.0);
  EXPECT_EQ((*sim)[3], 1.0);
}

TEST(SimilarityAccumulator, PromptWithoutUsableUnitIsAnErrorNamingIt) {
  auto acc = SimilarityAccumulator::create(2, 2, 2);
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->begin_prompt("empty-prompt").ok());
  Status s = acc->end_prompt();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("empty-prompt"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no usable unit"), std::string::npos) << s.message();

  // Decode units only, with no mass in KV head 1 of layer 1 anywhere.
  const float good[] = {0.5f, 0.25f, 0.25f, 0.5f, 0.25f, 0.25f};  // [G = 2, n = 3]
  const float dead[] = {0.5f, 0.25f, 0.25f, 0.0f, 0.0f, 0.0f};
  ASSERT_TRUE(acc->begin_prompt("dead-head").ok());
  for (int64_t u = 0; u < 2; ++u) {
    ASSERT_TRUE(acc->add(u, 0, UnitScores{good, 3, 0, nullptr}).ok());
    ASSERT_TRUE(acc->add(u, 1, UnitScores{dead, 3, 0, nullptr}).ok());
  }
  s = acc->end_prompt();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dead-head"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("layer 1, KV head 1"), std::string::npos) << s.message();
  EXPECT_FALSE(acc->in_prompt());
  EXPECT_EQ(acc->num_prompts(), 0);
  EXPECT_FALSE(acc->mean_similarity().ok());

  // The failed prompts left nothing behind: a good prompt alone gives exactly 1 (identical layers).
  ASSERT_TRUE(acc->begin_prompt("fine").ok());
  ASSERT_TRUE(acc->add(0, 0, UnitScores{good, 3, 0, nullptr}).ok());
  ASSERT_TRUE(acc->add(0, 1, UnitScores{good, 3, 0, nullptr}).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  auto sim = acc->mean_similarity();
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(acc->num_prompts(), 1);
  EXPECT_EQ((*sim)[((0 * 2 + 1) * 2 + 0) * 2 + 0], 1.0);
}

TEST(SimilarityAccumulator, RefusesBadCallsAndStaysUnchanged) {
  auto rng = testing::rng_for_test();
  const int32_t N = 3, G = 2;
  const int64_t k_cal = 2;
  EXPECT_FALSE(SimilarityAccumulator::create(0, 2, 2).ok());
  EXPECT_FALSE(SimilarityAccumulator::create(2, 0, 2).ok());
  EXPECT_FALSE(SimilarityAccumulator::create(2, 2, 0).ok());

  SyntheticPrompt p = make_prompt(rng, "bad-calls", N, G, {4, 5}, {6});
  auto acc = SimilarityAccumulator::create(N, G, k_cal);
  ASSERT_TRUE(acc.ok());
  const SyntheticUnit& u = p.units[0];
  EXPECT_FALSE(acc->add(u.id, 0, view_of(u, 0, G)).ok()) << "add outside a prompt";
  EXPECT_FALSE(acc->end_prompt().ok()) << "end_prompt outside a prompt";
  ASSERT_TRUE(acc->begin_prompt(p.name).ok());
  EXPECT_FALSE(acc->begin_prompt("again").ok()) << "nested prompt";

  auto expect_refused = [&](int64_t id, int32_t layer, UnitScores v, const char* needle) {
    Status s = acc->add(id, layer, v);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("bad-calls"), std::string::npos) << s.message();
  };
  expect_refused(u.id, 1, view_of(u, 1, G), "first layer of a unit must be 0");
  expect_refused(u.id, N, view_of(u, 0, G), "out of range");
  UnitScores null_scores = view_of(u, 0, G);
  null_scores.scores = nullptr;
  expect_refused(u.id, 0, null_scores, "null");
  UnitScores no_candidates = view_of(u, 0, G);
  no_candidates.num_candidates = 0;
  expect_refused(u.id, 0, no_candidates, "num_candidates");
  UnitScores short_stride = view_of(u, 0, G);
  short_stride.row_stride = u.n - 1;
  expect_refused(u.id, 0, short_stride, "row_stride");
  std::vector<float> negative(u.scores.begin(), u.scores.begin() + G * u.stride);
  negative[1] = -0.5f;
  expect_refused(u.id, 0, UnitScores{negative.data(), u.n, u.stride, u.local.data()}, "scores[0][1]");
  std::vector<float> nan_scores(u.scores.begin(), u.scores.begin() + G * u.stride);
  nan_scores[u.stride + 2] = std::numeric_limits<float>::quiet_NaN();
  expect_refused(u.id, 0, UnitScores{nan_scores.data(), u.n, u.stride, u.local.data()}, "scores[1][2]");
  const float bad_local[] = {0.5f, std::numeric_limits<float>::infinity()};
  expect_refused(u.id, 0, UnitScores{u.scores.data(), u.n, u.stride, bad_local}, "local_mass[1]");

  ASSERT_TRUE(acc->add(u.id, 0, view_of(u, 0, G)).ok());
  expect_refused(u.id, 2, view_of(u, 2, G), "expected layer 1");
  UnitScores other_n = view_of(u, 1, G);
  other_n.num_candidates = u.n - 1;
  expect_refused(u.id, 1, other_n, "layer 0 of this unit had");

  // After all those refusals the prompt still gives the reference result.
  for (int32_t l = 1; l < N; ++l) ASSERT_TRUE(acc->add(u.id, l, view_of(u, l, G)).ok());
  expect_refused(u.id, 0, view_of(u, 0, G), "already has all");
  for (size_t i = 1; i < p.units.size(); ++i) {
    for (int32_t l = 0; l < N; ++l) ASSERT_TRUE(acc->add(p.units[i].id, l, view_of(p.units[i], l, G)).ok());
  }
  ASSERT_TRUE(acc->end_prompt().ok());
  auto sim = acc->mean_similarity();
  ASSERT_TRUE(sim.ok());
  expect_matches_reference(*sim, reference_similarity({p}, N, G, k_cal), N, G);
}

TEST(SimilarityAccumulator, IncompleteUnitFailsThePromptAndDiscardDropsIt) {
  const float row[] = {0.5f, 0.5f, 0.25f, 0.75f};  // [G = 2, n = 2]
  auto acc = SimilarityAccumulator::create(2, 2, 1);
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->begin_prompt("half-done").ok());
  ASSERT_TRUE(acc->add(9, 0, UnitScores{row, 2, 0, nullptr}).ok());
  Status s = acc->end_prompt();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("half-done"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unit 9 has 1 of 2 layers"), std::string::npos) << s.message();

  ASSERT_TRUE(acc->begin_prompt("dropped").ok());
  ASSERT_TRUE(acc->add(1, 0, UnitScores{row, 2, 0, nullptr}).ok());
  acc->discard_prompt();
  EXPECT_FALSE(acc->in_prompt());
  EXPECT_EQ(acc->num_prompts(), 0);
  ASSERT_TRUE(acc->begin_prompt("kept").ok());  // the discarded prompt's unit 1 is gone
  ASSERT_TRUE(acc->add(1, 0, UnitScores{row, 2, 0, nullptr}).ok());
  ASSERT_TRUE(acc->add(1, 1, UnitScores{row, 2, 0, nullptr}).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  EXPECT_EQ(acc->num_prompts(), 1);
}

}  // namespace
}  // namespace kascade::calib
