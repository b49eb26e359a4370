// test_runtime_hf_parity.cpp — the whole runtime (config + safetensors loading, paged KV cache,
// chunked varlen prefill, decode, policies) against Hugging Face transformers' logits
// (tests/data/hf/, scripts/make_hf_fixtures.py: two tiny random models of head dim 32, the same
// families at GQA 8:2 with head dims 64 and 128, and the bundled kascade-tiny on 2,048 tokens),
// teacher-forced over the fixture's prompt (300 tokens; 2,048 for kascade-tiny, dense only) plus 20
// decode steps, DESIGN.md §4's rule (max |Δ| <= 1e-3·max |logit|, argmax where the margin allows):
//   - dense, for several prefill chunk sizes (one shot, multiples of the tile, not) and page sizes;
//   - every policy with a saturating budget (rho = 1): equal to dense (to fp32 rounding) and to HF,
//     with every key counted as attended;
//   - a varlen batch (the fixture sequence next to a shorter one) equal to each sequence alone;
//   - kascade with a real budget: the attended-key counts of the report equal the budget formula
//     of DESIGN.md §2.1–2.3 computed here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kascade/model_config.h"
#include "kascade/runtime.h"
#include "unit/model/test_forward_hf_fixture.h"

namespace kascade {
namespace {

using forward_test::HfFixture;
using forward_test::load_hf_fixture;
using forward_test::logits_match_hf;

RuntimeOptions options_for(const HfFixture& f) {
  RuntimeOptions o;
  o.model_path = f.model_dir;
  o.chunk_size = 128;
  return o;
}

TeacherForcedInput input_of(const HfFixture& f) {
  return TeacherForcedInput{f.prompt, f.continuation, f.first_logit_position};
}

std::vector<float> run(const RuntimeOptions& o, const HfFixture& f) {
  auto rt = Runtime::create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  if (!rt.ok()) return {};
  auto out = (*rt)->teacher_forced({input_of(f)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0].rows, f.rows);
  return (*out)[0].logits;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

class RuntimeHfParity : public ::testing::TestWithParam<const char*> {};

TEST_P(RuntimeHfParity, DenseAcrossChunkAndPageSizes) {
  const HfFixture f = load_hf_fixture(GetParam());
  ASSERT_FALSE(f.logits.empty());
  struct Case {
    int32_t chunk, page;
    DType kv;
  };
  for (const Case c : {Case{512, 16, DType::kF32}, Case{64, 16, DType::kF32}, Case{100, 1, DType::kF32},
                       Case{37, 64, DType::kF32}}) {
    RuntimeOptions o = options_for(f);
    o.chunk_size = c.chunk;
    o.page_size = c.page;
    o.kv_dtype = c.kv;
    EXPECT_TRUE(logits_match_hf(run(o, f), f)) << "chunk " << c.chunk << " page " << c.page;
  }
}

TEST_P(RuntimeHfParity, SaturatingBudgetMakesEveryPolicyEqualDense) {
  const HfFixture f = load_hf_fixture(GetParam());
  ASSERT_FALSE(f.logits.empty());
  const std::vector<float> dense = run(options_for(f), f);
  ASSERT_TRUE(logits_match_hf(dense, f));
  auto config = load_model_config(f.model_dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  const auto layers = static_cast<int32_t>(config->num_hidden_layers);
  for (const std::string& name : policy_names()) {
    if (name == "dense") continue;
    RuntimeOptions o = options_for(f);
    o.attention.policy = name;
    o.attention.topk_fraction = 1.0;
    if (name.rfind("kascade", 0) == 0) o.attention.anchors = {0, std::min<int32_t>(2, layers - 1)};
    auto rt = Runtime::create(o);
    ASSERT_TRUE(rt.ok()) << name << ": " << rt.status().to_string();
    auto out = (*rt)->teacher_forced({input_of(f)});
    ASSERT_TRUE(out.ok()) << name << ": " << out.status().to_string();
    const std::vector<float>& got = (*out)[0].logits;
    ASSERT_EQ(got.size(), dense.size()) << name;
    double diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - dense[i]));
    EXPECT_LE(diff, 1e-5 * max_abs(dense)) << name;
    EXPECT_TRUE(logits_match_hf(got, f)) << name;
    const AttendedStatistics& s = (*rt)->policy().statistics();
    for (ForwardMode mode : {ForwardMode::kPrefill, ForwardMode::kDecode}) {
      const AttendedCount total = s.total(mode);
      EXPECT_GT(total.causal, 0) << name;
      EXPECT_EQ(total.attended, total.causal) << name << " " << forward_mode_name(mode);
    }
  }
}

TEST_P(RuntimeHfParity, VarlenBatchEqualsSequencesAlone) {
  const HfFixture f = load_hf_fixture(GetParam());
  ASSERT_FALSE(f.logits.empty());
  TeacherForcedInput other;
  for (int i = 0; i < 77; ++i) other.prompt.push_back(static_cast<int32_t>((i * 37 + 11) % f.vocab));
  for (int i = 0; i < 5; ++i) other.continuation.push_back(static_cast<int32_t>((i * 53 + 3) % f.vocab));
  other.first_logit_position = 0;
  RuntimeOptions o = options_for(f);
  o.chunk_size = 64;
  auto rt = Runtime::create(o);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  auto batch = (*rt)->teacher_forced({other, input_of(f)});
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  EXPECT_TRUE(logits_match_hf((*batch)[1].logits, f));
  auto alone = (*rt)->teacher_forced({other});
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ((*alone)[0].rows, 82);
  ASSERT_EQ((*batch)[0].logits.size(), (*alone)[0].logits.size());
  const double scale = max_abs((*alone)[0].logits);
  for (size_t i = 0; i < (*alone)[0].logits.size(); ++i)
    ASSERT_NEAR((*batch)[0].logits[i], (*alone)[0].logits[i], 1e-5 * scale) << "row " << i / f.vocab;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RuntimeHfParity,
                         ::testing::Values("llama_tiny", "qwen3_tiny", "llama_gqa4_d64", "qwen3_gqa4_d128"),
                         [](const auto& info) { return std::string(info.param); });

// The bundled model (2,048-token prompt, prefill chunks of 512 over 16-key pages, then 20 decode
// steps) against transformers on its shipped weights.
TEST(RuntimeHfParityKascadeTiny, DenseMatchesTransformers) {
  const HfFixture f = load_hf_fixture("kascade_tiny");
  ASSERT_FALSE(f.logits.empty());
  RuntimeOptions o = options_for(f);
  o.chunk_size = 512;
  EXPECT_TRUE(logits_match_hf(run(o, f), f));
}

// k(n) of DESIGN.md §2.1 for rho = 0.1, k_min = 16, written out here.
int64_t k_of(int64_t n) { return std::min<int64_t>(n, std::max<int64_t>(16, (n + 9) / 10)); }

TEST(RuntimeAttended, KascadeCountsFollowTheBudget) {
  const HfFixture f = load_hf_fixture("qwen3_tiny");  // 3 layers, H = 4
  ASSERT_FALSE(f.logits.empty());
  RuntimeOptions o = options_for(f);
  o.chunk_size = 64;
  o.attention.policy = "kascade";
  o.attention.anchors = {0, 1};  // layer 2 reuses layer 1's rows
  o.attention.topk_fraction = 0.1;
  o.attention.k_min = 16;
  o.attention.tile_size = 32;
  auto rt = Runtime::create(o);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  auto out = (*rt)->teacher_forced({input_of(f)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (float x : (*out)[0].logits) ASSERT_TRUE(std::isfinite(x));
  const int64_t H = 4;
  // Prefill: query at position p in tile t (s = 32t) attends min(s, k(s)) candidates + its p − s + 1
  // local keys; layer 0 attends all p + 1 keys.
  int64_t sparse = 0, causal = 0;
  for (int64_t p = 0; p < 300; ++p) {
    const int64_t s = p / 32 * 32;
    sparse += std::min(s, k_of(s)) + (p - s + 1);
    causal += p + 1;
  }
  const AttendedStatistics& st = (*rt)->policy().statistics();
  EXPECT_EQ(st.layer(ForwardMode::kPrefill, 0).attended, H * causal);
  for (int32_t layer : {1, 2}) {
    EXPECT_EQ(st.layer(ForwardMode::kPrefill, layer).attended, H * sparse) << "layer " << layer;
    EXPECT_EQ(st.layer(ForwardMode::kPrefill, layer).causal, H * causal) << "layer " << layer;
  }
  EXPECT_EQ(st.by_role(ForwardMode::kPrefill, LayerRole::kReuse).attended, H * sparse);
  // Decode: each of the 20 steps with n = 301..320 keys attends k(n) keys per head (layer 0: n).
  int64_t decode_sparse = 0, decode_causal = 0;
  for (int64_t n = 301; n <= 320; ++n) {
    decode_sparse += k_of(n);
    decode_causal += n;
  }
  EXPECT_EQ(st.layer(ForwardMode::kDecode, 0).attended, H * decode_causal);
  EXPECT_EQ(st.layer(ForwardMode::kDecode, 2).attended, H * decode_sparse);
  EXPECT_EQ(st.layer(ForwardMode::kDecode, 2).causal, H * decode_causal);
}

}  // namespace
}  // namespace kascade
