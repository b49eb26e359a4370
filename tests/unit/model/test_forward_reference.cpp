// test_forward_reference.cpp — the forward pass (src/model/forward.h) against a float64
// transformer written in the test (test_forward_support.h): Llama (GQA, llama3 RoPE, untied) and
// Qwen3 (q_norm / k_norm, tied embeddings, YaRN), f32 / f16 / bf16 weights, widened and panel
// matmul paths; a varlen batch of sequences of different lengths fed in uneven chunks (so
// positions, cu_q_lens and the cache append are exercised); the observer hook; input validation.
#include <gtest/gtest.h>

#include <cmath>

#include "model/forward.h"
#include "model/model.h"
#include "test_forward_support.h"

namespace kascade::forward_test {
namespace {

const char* kLlamaJson = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 97, "hidden_size": 64,
  "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 16, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 32},
  "tie_word_embeddings": false})";

const char* kQwen3Json = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 101, "hidden_size": 48,
  "intermediate_size": 80, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
  "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128},
  "tie_word_embeddings": true})";

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// Three sequences of lengths 7, 19 and 1 in uneven calls (varlen, chunked, decode-like steps).
void check_against_reference(const char* json, DType dtype, ModelOptions options, uint64_t salt) {
  auto rng = testing::rng_for_test(salt);
  RandomModel m = make_random_model(json, dtype, rng());
  auto model = build_model(m, options);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = m.config.vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(rng, 7, vocab), random_tokens(rng, 19, vocab),
                                                  random_tokens(rng, 1, vocab)};
  const std::vector<std::vector<int32_t>> calls = {{5, 8, 0}, {1, 10, 1}, {1, 1, 0}};
  const auto got = run_in_calls(*model, seqs, calls);
  for (size_t b = 0; b < seqs.size(); ++b) {
    const auto ref = reference_logits(m, model->rope(), seqs[b]);
    ASSERT_EQ(got[b].size(), ref.size()) << "sequence " << b;
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(ref[i]));
      max_err = std::max(max_err, std::fabs(got[b][i] - ref[i]));
    }
    EXPECT_GT(max_ref, 0.1);
    EXPECT_LE(max_err, 2e-5 * max_ref) << "sequence " << b << " " << dtype_name(dtype);
  }
}

class ForwardDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(ForwardDtypes, LlamaMatchesFp64Reference) { check_against_reference(kLlamaJson, GetParam(), {}, 1); }
TEST_P(ForwardDtypes, Qwen3MatchesFp64Reference) { check_against_reference(kQwen3Json, GetParam(), {}, 2); }
TEST_P(ForwardDtypes, PanelMatmulPathMatchesFp64Reference) {
  ModelOptions no_widening;
  no_widening.widen_budget_bytes = 0;
  check_against_reference(kLlamaJson, GetParam(), no_widening, 3);
}

INSTANTIATE_TEST_SUITE_P(Forward, ForwardDtypes, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Forward, WideningFollowsTheBudget) {
  RandomModel m = make_random_model(kLlamaJson, DType::kBF16, 7);
  auto widened = build_model(m);
  ASSERT_NE(widened, nullptr);
  EXPECT_TRUE(widened->widened());
  // q 64·64, k, v 32·64 each, o 64·64, 3 × 96·64 per layer, 3 layers, lm_head 97·64; fp32 bytes.
  EXPECT_EQ(widened->widened_bytes(), 4 * (3 * (64 * 64 * 2 + 32 * 64 * 2 + 3 * 96 * 64) + 97 * 64));
  EXPECT_EQ(widened->layer(0).q_proj.dtype, DType::kF32);
  ModelOptions small;
  small.widen_budget_bytes = 1000;
  auto kept = build_model(m, small);
  ASSERT_NE(kept, nullptr);
  EXPECT_FALSE(kept->widened());
  EXPECT_EQ(kept->layer(0).q_proj.dtype, DType::kBF16);
  EXPECT_FLOAT_EQ(widened->attention_scale(), 0.25f);
}

class RecordingObserver final : public ForwardObserver {
 public:
  Status on_attention(int32_t layer, const float* x, const float* attn, int64_t total_q) override {
    layers.push_back(layer);
    first_x.emplace_back(x, x + total_q * 64);
    first_attn.emplace_back(attn, attn + total_q * 64);
    return ok_status();
  }
  std::vector<int32_t> layers;
  std::vector<std::vector<float>> first_x, first_attn;
};

TEST(Forward, ObserverSeesResidualAndAttentionOutput) {
  RandomModel m = make_random_model(kLlamaJson, DType::kF32, 11);
  auto model = build_model(m);
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> tokens = {3, 9, 27};
  ContiguousAttention attention(m.config, 1, 3);
  attention.begin_call({3});
  ForwardWorkspace ws;
  RecordingObserver observer;
  const std::vector<int32_t> cu = {0, 3};
  const std::vector<int64_t> positions = {0, 1, 2};
  const std::vector<int32_t> rows = {2};
  std::vector<float> logits(m.config.vocab_size);
  ASSERT_TRUE(forward(*model, ForwardInput{tokens, cu, positions, rows}, attention, ws, logits.data(), &observer).ok());
  ASSERT_EQ(observer.layers, (std::vector<int32_t>{0, 1, 2}));
  // Layer 0's residual is the embedding of the tokens.
  const auto& embed = m.values.at("model.embed_tokens.weight");
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(observer.first_x[0][t * 64 + i], embed[tokens[t] * 64 + i]);
  // At position 0 attention sees one key: its output is o_proj(v of token 0) — check one entry.
  const auto& wv = m.values.at("model.layers.0.self_attn.v_proj.weight");
  const auto& wo = m.values.at("model.layers.0.self_attn.o_proj.weight");
  const auto& wn = m.values.at("model.layers.0.input_layernorm.weight");
  std::vector<double> h(64);
  double ss = 0;
  for (int i = 0; i < 64; ++i) ss += static_cast<double>(embed[3 * 64 + i]) * embed[3 * 64 + i];
  for (int i = 0; i < 64; ++i) h[i] = embed[3 * 64 + i] / std::sqrt(ss / 64 + 1e-5) * wn[i];
  std::vector<double> v(32, 0.0);
  for (int o = 0; o < 32; ++o)
    for (int i = 0; i < 64; ++i) v[o] += h[i] * wv[o * 64 + i];
  double out0 = 0;  // o_proj row 0 over heads: head hh reads KV group hh / 2
  for (int hh = 0; hh < 4; ++hh)
    for (int c = 0; c < 16; ++c) out0 += wo[0 * 64 + hh * 16 + c] * v[(hh / 2) * 16 + c];
  EXPECT_NEAR(observer.first_attn[0][0], out0, 1e-5);
}

TEST(Forward, RefusesBadInput) {
  RandomModel m = make_random_model(kLlamaJson, DType::kF32, 12);
  auto model = build_model(m);
  ASSERT_NE(model, nullptr);
  ContiguousAttention attention(m.config, 1, 4);
  attention.begin_call({2});
  ForwardWorkspace ws;
  std::vector<float> logits(2 * m.config.vocab_size);
  const std::vector<int64_t> positions = {0, 1};
  const std::vector<int32_t> cu = {0, 2};
  const std::vector<int32_t> rows = {1};
  const std::vector<int32_t> bad_token = {1, 97};
  Status s = forward(*model, ForwardInput{bad_token, cu, positions, rows}, attention, ws, logits.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token id 97"), std::string::npos) << s.message();
  const std::vector<int32_t> tokens = {1, 2};
  const std::vector<int32_t> bad_rows = {2};
  EXPECT_FALSE(forward(*model, ForwardInput{tokens, cu, positions, bad_rows}, attention, ws, logits.data()).ok());
  const std::vector<int32_t> empty_seq = {0, 0, 2};
  EXPECT_FALSE(forward(*model, ForwardInput{tokens, empty_seq, positions, rows}, attention, ws, logits.data()).ok());
  const std::vector<int64_t> negative = {0, -1};
  EXPECT_FALSE(forward(*model, ForwardInput{tokens, cu, negative, rows}, attention, ws, logits.data()).ok());
  EXPECT_FALSE(forward(*model, ForwardInput{tokens, cu, positions, rows}, attention, ws, nullptr).ok());
}

}  // namespace
}  // namespace kascade::forward_test
