// test_dummy_weights.cpp — seeded random weights (src/model/dummy_weights.cpp).
// References: expected_weights() for the shapes; the normal distribution's moments and CDF for the
// values (mean 0, std = initializer_range, P(|x| < σ) = 0.6827, P(|x| < 2σ) = 0.9545, within
// binomial error); byte equality for determinism across calls and thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kascade/weights.h"
#include "model/dummy_weights.h"
#include "model/safetensors_writer.h"
#include "model_test_util.h"

namespace kascade {
namespace {

ModelConfig config_from(const std::string& text) {
  Result<ModelConfig> m = parse_model_config(text);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : ModelConfig{};
}

const char* kQwen3 = R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300, "tie_word_embeddings": true})";
const char* kLlama = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 500, "initializer_range": 0.05})";

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.shape == b.shape && a.dtype == b.dtype && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

TEST(DummyWeights, ShapesAndDtypesFollowTheTable) {
  for (const char* text : {kQwen3, kLlama}) {
    const ModelConfig config = config_from(text);
    Result<std::vector<WeightSpec>> specs = expected_weights(config);
    ASSERT_TRUE(specs.ok());
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(dtype_name(dtype));
      Result<Weights> w = make_dummy_weights(config, dtype, 7);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      ASSERT_EQ(w->tensors().size(), specs->size());
      for (size_t i = 0; i < specs->size(); ++i) {
        EXPECT_EQ(w->tensors()[i].name, (*specs)[i].name);
        EXPECT_EQ(w->tensors()[i].view.shape, (*specs)[i].shape);
        EXPECT_EQ(w->tensors()[i].view.dtype, dtype);
      }
      EXPECT_TRUE(w->unexpected_tensors().empty());
      EXPECT_EQ(w->lm_head().data == w->embed_tokens().data, config.tie_word_embeddings);
    }
  }
}

TEST(DummyWeights, NormsAreOneAndMatricesLookNormal) {
  const ModelConfig config = config_from(kLlama);  // initializer_range 0.05
  Result<Weights> w = make_dummy_weights(config, DType::kF32, 3);
  ASSERT_TRUE(w.ok());
  for (const NamedTensor& t : w->tensors()) {
    SCOPED_TRACE(t.name);
    const int64_t n = t.view.numel();
    if (t.name.find("norm") != std::string::npos) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.view.load(i), 1.0f);
      continue;
    }
    double sum = 0, sum_sq = 0;
    int64_t within1 = 0, within2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = t.view.load(i);
      ASSERT_TRUE(std::isfinite(x));
      sum += x;
      sum_sq += x * x;
      within1 += std::abs(x) < 0.05;
      within2 += std::abs(x) < 0.10;
    }
    const double mean = sum / static_cast<double>(n);
    const double std_dev = std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
    const double se = 1.0 / std::sqrt(static_cast<double>(n));  // relative standard error scale
    EXPECT_NEAR(mean, 0.0, 5 * 0.05 * se);
    EXPECT_NEAR(std_dev, 0.05, 5 * 0.05 * se);
    const double p1 = static_cast<double>(within1) / static_cast<double>(n);
    const double p2 = static_cast<double>(within2) / static_cast<double>(n);
    EXPECT_NEAR(p1, 0.682689, 5 * std::sqrt(0.682689 * 0.317311 / static_cast<double>(n)));
    EXPECT_NEAR(p2, 0.954500, 5 * std::sqrt(0.9545 * 0.0455 / static_cast<double>(n)));
  }
}

TEST(DummyWeights, DeterministicPerSeedAndThreadCount) {
  ModelConfig config = config_from(kQwen3);
  config.vocab_size = 4200;  // the embedding (2^18 elements) takes the multithreaded path
  ASSERT_GE(config.vocab_size * config.hidden_size, int64_t{1} << 18);
  Result<Weights> a = make_dummy_weights(config, DType::kBF16, 42);
  Result<Weights> b = make_dummy_weights(config, DType::kBF16, 42);
  Result<Weights> other = make_dummy_weights(config, DType::kBF16, 43);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Result<Weights> serial = make_dummy_weights(config, DType::kBF16, 42);
  omp_set_num_threads(threads);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok() && serial.ok());
  size_t differing = 0;
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    const TensorView& va = a->tensors()[i].view;
    EXPECT_TRUE(same_bytes(va, b->tensors()[i].view)) << a->tensors()[i].name;
    EXPECT_TRUE(same_bytes(va, serial->tensors()[i].view)) << a->tensors()[i].name;
    differing += !same_bytes(va, other->tensors()[i].view);
  }
  // Every random tensor changes with the seed (norms are 1 whatever the seed).
  EXPECT_EQ(differing, 1 + 3 * 7u);  // embed + per layer q, k, v, o, gate, up, down
  // Tensors of one model are not copies of each other (each has its own stream).
  EXPECT_FALSE(std::memcmp(a->layer(0).gate_proj.data, a->layer(0).up_proj.data, a->layer(0).up_proj.nbytes()) == 0);
  // The 16-bit values are the f32 values rounded.
  Result<Weights> f32 = make_dummy_weights(config, DType::kF32, 42);
  ASSERT_TRUE(f32.ok());
  const TensorView& q16 = a->layer(2).q_proj;
  const TensorView& q32 = f32->layer(2).q_proj;
  for (int64_t i = 0; i < q16.numel(); ++i) ASSERT_EQ(q16.load(i), round_to_dtype(q32.load(i), DType::kBF16));
}

TEST(DummyWeights, SaveAndReloadGivesTheSameWeights) {
  const ModelConfig config = config_from(kLlama);
  Result<Weights> w = make_dummy_weights(config, DType::kF16, 5);
  ASSERT_TRUE(w.ok());
  testing::ScratchDir dir;
  Result<std::vector<std::string>> files = write_safetensors_checkpoint(dir.path(), w->tensors(), 40000);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  EXPECT_GT(files->size(), 2u);  // sharded
  Result<Weights> loaded = load_weights(config, dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (size_t i = 0; i < w->tensors().size(); ++i)
    EXPECT_TRUE(same_bytes(w->tensors()[i].view, loaded->tensors()[i].view)) << w->tensors()[i].name;
}

TEST(DummyWeights, RefusesWhatCannotFit) {
  ModelConfig config = config_from(kLlama);
  config.vocab_size = int64_t{1} << 24;
  config.hidden_size = int64_t{1} << 24;  // 2^48 elements of embeddings alone
  config.num_attention_heads = 1;
  config.num_key_value_heads = 1;
  config.head_dim = 2;
  Result<Weights> w = make_dummy_weights(config, DType::kBF16, 0);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(w.status().message().find("bytes"), std::string::npos);
  config.num_hidden_layers = 0;
  EXPECT_EQ(make_dummy_weights(config, DType::kBF16, 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade
