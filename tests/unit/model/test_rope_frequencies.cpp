// test_rope_frequencies.cpp — RoPE inverse frequencies and attention scaling
// (src/model/rope_frequencies.cpp).
// References: (1) the inv_freq and attention_scaling of transformers' own rotary embeddings for
// every config of tests/data/model/hf_configs.json (default, linear, llama3, yarn with each
// option); transformers computes in float32, we in double rounded once, so they agree to a few
// float32 ulp; (2) hand-computed values of each formula.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "kascade/model_config.h"
#include "model/rope_frequencies.h"
#include "model_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;

ModelConfig parse_or_die(const json& config) {
  Result<ModelConfig> m = parse_model_config(config.dump());
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : ModelConfig{};
}

TEST(RopeFrequencies, MatchTransformersOnEveryFixture) {
  const json fixtures = testing::read_model_fixture("hf_configs.json");
  int yarn_cases = 0, llama3_cases = 0;
  for (const json& c : fixtures["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ModelConfig config = parse_or_die(c["config"]);
    Result<RopeFrequencies> rope = compute_rope_frequencies(config);
    ASSERT_TRUE(rope.ok()) << rope.status().to_string();
    const std::vector<double> expected = c["inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(rope->inv_freq.size(), expected.size());
    ASSERT_EQ(static_cast<int64_t>(expected.size()), config.head_dim / 2);
    for (size_t i = 0; i < expected.size(); ++i) {
      // float32 pow / divisions in torch: a few ulp (2^-23 ≈ 1.2e-7 relative each).
      EXPECT_NEAR(rope->inv_freq[i], expected[i], 1e-6 * std::abs(expected[i])) << "pair " << i;
    }
    const double scaling = c["attention_scaling"].get<double>();
    EXPECT_NEAR(rope->attention_scaling, scaling, 1e-7 * scaling);
    yarn_cases += config.rope.type == RopeType::kYarn;
    llama3_cases += config.rope.type == RopeType::kLlama3;
  }
  EXPECT_GE(yarn_cases, 5);
  EXPECT_GE(llama3_cases, 3);
}

json tiny_config() {
  return json::parse(R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 4096, "rope_theta": 10000.0})");
}

TEST(RopeFrequencies, DefaultAndLinearByHand) {
  // head_dim 8, theta 10^4: inv_freq[i] = 10^4^(-2i/8) = 10^-i.
  json c = tiny_config();
  Result<RopeFrequencies> rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  const std::vector<float> expected = {1.0f, 0.1f, 0.01f, 0.001f};
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(rope->inv_freq[i], expected[i]);
  EXPECT_EQ(rope->attention_scaling, 1.0f);

  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(rope->inv_freq[i], expected[i] / 4.0f);
}

TEST(RopeFrequencies, Llama3BandsByHand) {
  // inv = 10^-i, wavelengths 2π·10^i: 6.28, 62.8, 628, 6283. With original 1000, low 1, high 10:
  // low_freq_wavelen = 1000, high_freq_wavelen = 100 → pairs 0,1 kept; pair 3 divided by factor;
  // pair 2 (628) smoothed with s = (1000/628.3 − 1) / 9.
  json c = tiny_config();
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 10.0},
                       {"original_max_position_embeddings", 1000}};
  Result<RopeFrequencies> rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  EXPECT_FLOAT_EQ(rope->inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(rope->inv_freq[1], 0.1f);
  const double s = (1000.0 / (2.0 * std::numbers::pi * 100.0) - 1.0) / 9.0;
  EXPECT_FLOAT_EQ(rope->inv_freq[2], static_cast<float>((1.0 - s) * 0.01 / 8.0 + s * 0.01));
  EXPECT_FLOAT_EQ(rope->inv_freq[3], 0.001f / 8.0f);
  EXPECT_EQ(rope->attention_scaling, 1.0f);
}

TEST(RopeFrequencies, YarnByHand) {
  // head_dim 8, theta 10^4, original 4096, beta_fast 32, beta_slow 1:
  //   correction_dim(r) = 8·ln(4096 / (2π r)) / (2 ln 10^4)
  //   low = floor(cd(32)) , high = ceil(cd(1)), clamped to [0, 7]; ramp over pair index.
  json c = tiny_config();
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 4096}};
  Result<RopeFrequencies> rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  auto cd = [](double r) { return 8.0 * std::log(4096.0 / (2.0 * std::numbers::pi * r)) / (2.0 * std::log(1e4)); };
  const double low = std::max(0.0, std::floor(cd(32.0)));  // cd(32) = 1.31 → 1
  const double high = std::min(7.0, std::ceil(cd(1.0)));   // cd(1) = 2.81 → 3
  ASSERT_EQ(low, 1.0);
  ASSERT_EQ(high, 3.0);
  const double base[4] = {1.0, 0.1, 0.01, 0.001};
  for (int i = 0; i < 4; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);  // share of the interpolated value
    const double want = base[i] / 4.0 * ramp + base[i] * (1.0 - ramp);
    EXPECT_FLOAT_EQ(rope->inv_freq[static_cast<size_t>(i)], static_cast<float>(want)) << i;
  }
  EXPECT_FLOAT_EQ(rope->attention_scaling, static_cast<float>(0.1 * std::log(4.0) + 1.0));

  // Explicit attention_factor wins; mscale / mscale_all_dim ratio otherwise; factor 1 → 1.
  c["rope_scaling"]["attention_factor"] = 0.75;
  rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  EXPECT_EQ(rope->attention_scaling, 0.75f);
  c["rope_scaling"].erase("attention_factor");
  c["rope_scaling"]["mscale"] = 2.0;
  c["rope_scaling"]["mscale_all_dim"] = 1.0;
  rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  EXPECT_FLOAT_EQ(rope->attention_scaling,
                  static_cast<float>((0.2 * std::log(4.0) + 1.0) / (0.1 * std::log(4.0) + 1.0)));
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 1.0}, {"original_max_position_embeddings", 4096}};
  rope = compute_rope_frequencies(parse_or_die(c));
  ASSERT_TRUE(rope.ok());
  EXPECT_EQ(rope->attention_scaling, 1.0f);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(rope->inv_freq[i], static_cast<float>(base[i]));
}

TEST(RopeFrequencies, RefusesInvalidConfig) {
  ModelConfig c = parse_or_die(tiny_config());
  c.head_dim = 7;
  Result<RopeFrequencies> rope = compute_rope_frequencies(c);
  ASSERT_FALSE(rope.ok());
  EXPECT_NE(rope.status().message().find("head_dim"), std::string::npos);
  c = parse_or_die(tiny_config());
  c.rope.type = RopeType::kYarn;
  c.rope.factor = 4.0;
  c.rope.original_max_position_embeddings = 4096;
  c.rope.mscale = -100.0;  // get_mscale(4, -100) < 0 → a negative scale
  c.rope.mscale_all_dim = 1.0;
  rope = compute_rope_frequencies(c);
  ASSERT_FALSE(rope.ok());
  EXPECT_NE(rope.status().message().find("scaling"), std::string::npos);
}

}  // namespace
}  // namespace kascade
