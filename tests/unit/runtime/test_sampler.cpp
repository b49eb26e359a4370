// test_sampler.cpp — the sampler (src/runtime/sampler.h) on hand-computed distributions:
// temperature, top-k and top-p cuts with their renormalised probabilities, exact inverse-CDF
// picks at chosen uniforms, greedy ties, seeded reproducibility and stream independence, and a
// chi-square test of 20,000 draws against the hand-computed distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/sampler.h"

namespace kascade::runtime {
namespace {

// Probabilities 0.1, 0.4, 0.2, 0.3 for tokens 0..3.
std::vector<float> four_token_logits() {
  return {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
}

void expect_distribution(const std::vector<Candidate>& got, const std::vector<Candidate>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "rank " << i;
    EXPECT_NEAR(got[i].prob, want[i].prob, 1e-6) << "rank " << i;
  }
}

TEST(Sampler, PlainTemperatureOneKeepsEveryTokenInRankOrder) {
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 1.0f;
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 0.4}, {3, 0.3}, {2, 0.2}, {0, 0.1}});
}

TEST(Sampler, TemperatureSharpensAsHandComputed) {
  // T = 0.5 squares the probabilities: .01, .16, .04, .09 → / 0.30.
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 0.5f;
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 0.16 / 0.30}, {3, 0.09 / 0.30}, {2, 0.04 / 0.30}, {0, 0.01 / 0.30}});
}

TEST(Sampler, TopKRenormalisesOverTheKept) {
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 2;
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 0.4 / 0.7}, {3, 0.3 / 0.7}});
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_p = 0.75f;  // 0.4 + 0.3 = 0.7 < 0.75 → also token 2 (0.9)
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 0.4 / 0.9}, {3, 0.3 / 0.9}, {2, 0.2 / 0.9}});
  c.top_p = 0.3f;  // the first token alone reaches it
  d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 1.0}});
}

TEST(Sampler, TopKThenTopPOnTheRenormalisedSet) {
  // top-k 3 → .4/.9, .3/.9, .2/.9 = .444, .333, .222; top-p .7 → .444 + .333 = .777 >= .7.
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 3;
  c.top_p = 0.7f;
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 0.4 / 0.7}, {3, 0.3 / 0.7}});
}

TEST(Sampler, TiesRankTheLowerTokenFirst) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f};
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 1;
  auto d = sampling_distribution(logits.data(), 4, c);
  ASSERT_TRUE(d.ok());
  expect_distribution(*d, {{1, 1.0}});
  Sampler greedy(SamplerConfig{}, 0);
  auto t = greedy.sample(logits.data(), 4);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1);
}

TEST(Sampler, InverseCdfPicksAtChosenUniforms) {
  const std::vector<Candidate> d = {{1, 0.4}, {3, 0.3}, {2, 0.2}, {0, 0.1}};
  EXPECT_EQ(pick_candidate(d, 0.0), 1);
  EXPECT_EQ(pick_candidate(d, 0.3999), 1);
  EXPECT_EQ(pick_candidate(d, 0.4001), 3);
  EXPECT_EQ(pick_candidate(d, 0.6999), 3);
  EXPECT_EQ(pick_candidate(d, 0.85), 2);
  EXPECT_EQ(pick_candidate(d, 0.95), 0);
  EXPECT_EQ(pick_candidate(d, 0.99999999999), 0);
}

TEST(Sampler, SeededStreamsAreReproducibleAndDistinct) {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.seed = 42;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto draw = [&](uint64_t stream) {
    Sampler s(c, stream);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(*s.sample(logits.data(), 50));
    return out;
  };
  EXPECT_EQ(draw(0), draw(0));
  EXPECT_NE(draw(0), draw(1));
  c.seed = 43;
  Sampler other(c, 0);
  std::vector<int32_t> out;
  for (int i = 0; i < 64; ++i) out.push_back(*other.sample(logits.data(), 50));
  c.seed = 42;
  EXPECT_NE(out, draw(0));
}

TEST(Sampler, EmpiricalFrequenciesFollowTheDistribution) {
  // 20,000 draws with top-k 3 at T = 1: expected .4/.9, .3/.9, .2/.9. Chi-square with 2 degrees of
  // freedom: P(chi2 > 13.8) = 0.001; the seed is fixed, so this is deterministic.
  const auto logits = four_token_logits();
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 3;
  c.seed = 7;
  Sampler s(c, 3);
  std::vector<int> counts(4, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[*s.sample(logits.data(), 4)];
  EXPECT_EQ(counts[0], 0);
  const double expected[4] = {0.0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9};
  double chi2 = 0;
  for (int t = 1; t < 4; ++t) {
    const double e = expected[t] * n;
    chi2 += (counts[t] - e) * (counts[t] - e) / e;
  }
  EXPECT_LT(chi2, 13.8) << counts[1] << " " << counts[2] << " " << counts[3];
}

TEST(Sampler, UniformsAreInUnitIntervalWithMeanHalf) {
  Sampler s(SamplerConfig{1.0f, 0, 1.0f, 5}, 0);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = s.next_uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.015);  // std of the mean = 0.0029
}

TEST(Sampler, RefusesBadConfigurations) {
  EXPECT_FALSE(validate_sampler(SamplerConfig{-1.0f, 0, 1.0f, 0}).ok());
  EXPECT_FALSE(validate_sampler(SamplerConfig{1.0f, -2, 1.0f, 0}).ok());
  EXPECT_FALSE(validate_sampler(SamplerConfig{1.0f, 0, 0.0f, 0}).ok());
  EXPECT_FALSE(validate_sampler(SamplerConfig{1.0f, 0, 1.5f, 0}).ok());
  const std::vector<float> with_nan = {0.0f, std::nanf("")};
  Sampler s(SamplerConfig{1.0f, 0, 1.0f, 0}, 0);
  EXPECT_FALSE(s.sample(with_nan.data(), 2).ok());
  Sampler g(SamplerConfig{}, 0);
  EXPECT_FALSE(g.sample(with_nan.data(), 2).ok());
}

}  // namespace
}  // namespace kascade::runtime
