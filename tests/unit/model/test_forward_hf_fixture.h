// test_forward_hf_fixture.h — reads the Hugging Face parity fixtures of tests/data/hf/ (made by
// scripts/make_hf_fixtures.py) and applies DESIGN.md §4's model-level parity rule:
//   max |Δlogit| <= 1e-3 · max |logit|, and equal argmax at every position whose top-2 margin
//   (in the reference) exceeds that tolerance.
// Used by tests/unit/model/test_forward_hf_parity.cpp (forward pass with plain dense attention) and
// tests/unit/runtime/test_runtime_hf_parity.cpp (the whole runtime, every policy).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kascade::forward_test {

struct HfFixture {
  std::string model_dir;              // absolute path of the checkpoint directory
  std::vector<int32_t> prompt;        // 300 ids
  std::vector<int32_t> continuation;  // 20 ids
  int64_t first_logit_position = 0;   // logits rows cover positions first .. prompt + continuation − 1
  int64_t rows = 0;
  int64_t vocab = 0;
  std::vector<float> logits;          // [rows, vocab]
  std::vector<float> inv_freq;
  double attention_scaling = 1.0;
};

inline HfFixture load_hf_fixture(const std::string& name) {
  const std::string dir = std::string(KASCADE_TEST_DATA_DIR) + "/hf/";
  HfFixture f;
  std::ifstream meta(dir + name + ".fixture.json");
  EXPECT_TRUE(meta.good()) << "missing fixture " << dir + name + ".fixture.json";
  if (!meta.good()) return f;
  const nlohmann::json j = nlohmann::json::parse(meta);
  f.model_dir = dir + j.at("model_dir").get<std::string>();
  f.prompt = j.at("prompt").get<std::vector<int32_t>>();
  f.continuation = j.at("continuation").get<std::vector<int32_t>>();
  f.first_logit_position = j.at("first_logit_position").get<int64_t>();
  f.rows = j.at("rows").get<int64_t>();
  f.vocab = j.at("vocab_size").get<int64_t>();
  f.inv_freq = j.at("inv_freq").get<std::vector<float>>();
  f.attention_scaling = j.at("attention_scaling").get<double>();
  std::ifstream bin(dir + name + ".logits.f32", std::ios::binary);
  f.logits.resize(static_cast<size_t>(f.rows * f.vocab));
  bin.read(reinterpret_cast<char*>(f.logits.data()), static_cast<std::streamsize>(f.logits.size() * sizeof(float)));
  EXPECT_TRUE(bin.good()) << "short logits file for " << name;
  EXPECT_EQ(static_cast<int64_t>(f.prompt.size() + f.continuation.size()) - f.first_logit_position, f.rows);
  return f;
}

// got: [rows, vocab] logits of positions first_logit_position .. end, like the fixture's.
inline ::testing::AssertionResult logits_match_hf(const std::vector<float>& got, const HfFixture& f) {
  if (got.size() != f.logits.size())
    return ::testing::AssertionFailure() << "got " << got.size() << " logits, fixture has " << f.logits.size();
  double max_ref = 0, max_err = 0;
  int64_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(f.logits[i])));
    const double err = std::fabs(static_cast<double>(got[i]) - f.logits[i]);
    if (!(err <= max_err)) {  // NaN propagates into max_err
      max_err = err;
      worst = static_cast<int64_t>(i);
    }
  }
  const double tol = 1e-3 * max_ref;
  if (!(max_err <= tol))
    return ::testing::AssertionFailure() << "max |Δlogit| " << max_err << " > 1e-3 · max |logit| = " << tol
                                         << " at position " << f.first_logit_position + worst / f.vocab
                                         << ", token " << worst % f.vocab << " (got " << got[worst] << ", HF "
                                         << f.logits[worst] << ")";
  int64_t checked = 0;
  for (int64_t r = 0; r < f.rows; ++r) {
    const float* ref = f.logits.data() + r * f.vocab;
    const float* g = got.data() + r * f.vocab;
    const int64_t ref_arg = std::max_element(ref, ref + f.vocab) - ref;
    const int64_t got_arg = std::max_element(g, g + f.vocab) - g;
    float second = -INFINITY;
    for (int64_t v = 0; v < f.vocab; ++v)
      if (v != ref_arg) second = std::max(second, ref[v]);
    if (ref[ref_arg] - second <= tol) continue;
    ++checked;
    if (ref_arg != got_arg)
      return ::testing::AssertionFailure() << "argmax differs at position " << f.first_logit_position + r << ": got "
                                           << got_arg << ", HF " << ref_arg << " (margin " << ref[ref_arg] - second
                                           << ")";
  }
  if (checked < f.rows / 2)
    return ::testing::AssertionFailure() << "only " << checked << " of " << f.rows
                                         << " positions have a top-2 margin above the tolerance: the fixture is too flat";
  return ::testing::AssertionSuccess() << "max |Δ| " << max_err << " (tol " << tol << "), argmax checked at " << checked
                                       << " positions";
}

}  // namespace kascade::forward_test
