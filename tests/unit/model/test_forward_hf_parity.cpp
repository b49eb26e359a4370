// test_forward_hf_parity.cpp — the forward pass against Hugging Face transformers (DESIGN.md §4):
// the checkpoints of tests/data/hf/ (tiny random Llama with llama3 RoPE, untied, bf16, two shards;
// tiny random Qwen3 with q/k norm, tied, YaRN, f16; the same two families at GQA 8:2 with head dims
// 64 and 128; the bundled kascade-tiny on 2,048 tokens) loaded by our config / safetensors / weights
// code, teacher-forced over the prompt (chunked prefill: 128 + 128 + the rest) and 20 further
// tokens one call each, with plain dense attention (ref::dense_attention_ref over a contiguous
// cache). Logits of the last 40 positions must match transformers' float64 logits:
// max |Δ| <= 1e-3 · max |logit|, equal argmax where the top-2 margin exceeds that.
// The fixtures are made by scripts/make_hf_fixtures.py.
#include <gtest/gtest.h>

#include "kascade/model_config.h"
#include "kascade/weights.h"
#include "model/forward.h"
#include "model/model.h"
#include "test_forward_hf_fixture.h"
#include "test_forward_support.h"

namespace kascade::forward_test {
namespace {

void check_parity(const std::string& name, bool expect_qk_norm, bool expect_tied) {
  const HfFixture f = load_hf_fixture(name);
  ASSERT_FALSE(f.logits.empty());
  auto config = load_model_config(f.model_dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->qk_norm, expect_qk_norm);
  EXPECT_EQ(config->tie_word_embeddings, expect_tied);
  auto weights = load_weights(*config, f.model_dir);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  auto model = Model::create(std::move(weights).value());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  // RoPE tables as transformers built them.
  ASSERT_EQ((*model)->rope().inv_freq.size(), f.inv_freq.size());
  for (size_t i = 0; i < f.inv_freq.size(); ++i)
    EXPECT_NEAR((*model)->rope().inv_freq[i], f.inv_freq[i], 1e-6 * std::fabs(f.inv_freq[i])) << "pair " << i;
  EXPECT_NEAR((*model)->rope().attention_scaling, f.attention_scaling, 1e-6);

  std::vector<int32_t> tokens = f.prompt;
  tokens.insert(tokens.end(), f.continuation.begin(), f.continuation.end());
  std::vector<std::vector<int32_t>> calls = {{128}, {128}, {static_cast<int32_t>(f.prompt.size()) - 256}};
  for (size_t i = 0; i < f.continuation.size(); ++i) calls.push_back({1});
  const auto all = run_in_calls(**model, {tokens}, calls);
  ASSERT_EQ(static_cast<int64_t>(all[0].size()), static_cast<int64_t>(tokens.size()) * f.vocab);
  const std::vector<float> got(all[0].begin() + f.first_logit_position * f.vocab, all[0].end());
  EXPECT_TRUE(logits_match_hf(got, f));
}

TEST(ForwardHfParity, LlamaLlama3RopeUntiedBf16Sharded) { check_parity("llama_tiny", false, false); }
TEST(ForwardHfParity, Qwen3QkNormTiedYarnF16) { check_parity("qwen3_tiny", true, true); }
// The GPU kernels' shapes (GQA group 4, head dim 64 and 128), also checked on the GPU runtime.
TEST(ForwardHfParity, LlamaGqa4HeadDim64) { check_parity("llama_gqa4_d64", false, false); }
TEST(ForwardHfParity, Qwen3Gqa4HeadDim128) { check_parity("qwen3_gqa4_d128", true, true); }
// The bundled model as transformers loads it (2,048-token prompt; calls of 128, 128, rest).
TEST(ForwardHfParity, KascadeTinyShippedWeights) { check_parity("kascade_tiny", false, true); }

}  // namespace
}  // namespace kascade::forward_test
