// test_weights.cpp — the weight table and the Weights object (src/model/weights.cpp).
// References: the parameter names and shapes of transformers' own LlamaForCausalLM /
// Qwen3ForCausalLM for every config of tests/data/model/hf_configs.json (tied parameters counted
// once); checkpoints saved by transformers (tests/data/model/tiny_*, with per-tensor sums recorded
// by torch); hand-built tensor sets for every refusal.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "kascade/weights.h"
#include "model/dummy_weights.h"
#include "model/safetensors_writer.h"
#include "model_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;

ModelConfig parse_or_die(const std::string& text) {
  Result<ModelConfig> m = parse_model_config(text);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : ModelConfig{};
}

TEST(Weights, TableMatchesTransformersParameters) {
  const json fixtures = testing::read_model_fixture("hf_configs.json");
  for (const json& c : fixtures["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ModelConfig config = parse_or_die(c["config"].dump());
    Result<std::vector<WeightSpec>> specs = expected_weights(config);
    ASSERT_TRUE(specs.ok()) << specs.status().to_string();
    std::map<std::string, std::vector<int64_t>> ours, theirs;
    for (const WeightSpec& s : *specs) ASSERT_TRUE(ours.emplace(s.name, s.shape).second) << s.name;
    for (const json& p : c["parameters"]) theirs.emplace(p[0].get<std::string>(), p[1].get<std::vector<int64_t>>());
    EXPECT_EQ(ours, theirs);
  }
}

TEST(Weights, LoadsCheckpointsSavedByTransformers) {
  const json summary = testing::read_model_fixture("tiny_checkpoints.json");
  for (const char* name : {"tiny_llama_sharded", "tiny_qwen3_tied"}) {
    SCOPED_TRACE(name);
    const auto dir = testing::model_data_dir() / name;
    Result<ModelConfig> config = load_model_config(dir);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    Result<Weights> w = load_weights(*config, dir);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_TRUE(w->unexpected_tensors().empty());
    EXPECT_EQ(static_cast<int64_t>(w->layers().size()), config->num_hidden_layers);
    // Every tensor of the table, through find(), equals what torch saved.
    const json& expected = summary[name];
    size_t checked = 0;
    for (const NamedTensor& t : w->tensors()) {
      SCOPED_TRACE(t.name);
      ASSERT_TRUE(expected.contains(t.name));
      const json& e = expected[t.name];
      EXPECT_EQ(t.view.shape, e["shape"].get<std::vector<int64_t>>());
      double sum = 0.0;
      for (int64_t i = 0; i < t.view.numel(); ++i) sum += t.view.load(i);
      EXPECT_NEAR(sum, e["sum"].get<double>(), 1e-9 * std::max(1.0, e["sum_sq"].get<double>()));
      Result<TensorView> found = w->find(t.name);
      ASSERT_TRUE(found.ok());
      EXPECT_EQ(found->data, t.view.data);
      ++checked;
    }
    EXPECT_EQ(checked, expected.size());
    // Structured accessors point at the same tensors.
    EXPECT_EQ(w->embed_tokens().data, w->find("model.embed_tokens.weight")->data);
    EXPECT_EQ(w->final_norm().data, w->find("model.norm.weight")->data);
    EXPECT_EQ(w->layer(1).down_proj.data, w->find("model.layers.1.mlp.down_proj.weight")->data);
    EXPECT_EQ(w->layer(0).k_proj.shape, (std::vector<int64_t>{config->num_key_value_heads * config->head_dim,
                                                              config->hidden_size}));
    if (config->tie_word_embeddings) {
      EXPECT_EQ(w->lm_head().data, w->embed_tokens().data);
      EXPECT_FALSE(w->find("lm_head.weight").ok());
    } else {
      EXPECT_EQ(w->lm_head().data, w->find("lm_head.weight")->data);
    }
    EXPECT_EQ(w->layer(0).q_norm.is_set(), config->qk_norm);
    if (config->qk_norm) {
      EXPECT_EQ(w->layer(1).k_norm.data, w->find("model.layers.1.self_attn.k_norm.weight")->data);
    }
  }
}

TEST(Weights, ViewsOutliveTheLoaderButNotTheWeights) {
  const auto dir = testing::model_data_dir() / "tiny_qwen3_tied";
  Result<ModelConfig> config = load_model_config(dir);
  ASSERT_TRUE(config.ok());
  Weights copy = [&] {
    Result<Weights> w = load_weights(*config, dir / "model.safetensors");
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return *w;
  }();
  // The mapping is held by the copy: reading through the views is valid (ASan would object).
  float acc = 0.0f;
  for (int64_t i = 0; i < copy.embed_tokens().numel(); ++i) acc += copy.embed_tokens().load(i);
  EXPECT_TRUE(std::isfinite(acc));
}

// A small in-memory model: each tensor of the table filled with its index, plus extras.
struct HandBuilt {
  ModelConfig config;
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> tensors;

  explicit HandBuilt(const std::string& config_text) : config(parse_or_die(config_text)) {
    Result<std::vector<WeightSpec>> specs = expected_weights(config);
    EXPECT_TRUE(specs.ok());
    storage.reserve(specs->size() + 8);
    for (const WeightSpec& s : *specs) add(s.name, s.shape);
  }
  void add(const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage.emplace_back(static_cast<size_t>(n), static_cast<float>(storage.size()));
    tensors.push_back({name, TensorView{storage.back().data(), DType::kF32, std::move(shape)}});
  }
  Result<Weights> build(WeightsOptions options = {}) const { return Weights::from_tensors(config, tensors, nullptr, options); }
};

const char* kLlama = R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10})";
const char* kQwen3Tied = R"({"model_type": "qwen3", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 10, "tie_word_embeddings": true})";

void expect_refused(const Result<Weights>& w, StatusCode code, const std::vector<std::string>& must_mention) {
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), code) << w.status().to_string();
  for (const std::string& m : must_mention)
    EXPECT_NE(w.status().message().find(m), std::string::npos) << "'" << m << "' not in " << w.status().to_string();
}

TEST(Weights, AcceptsTheExactTable) {
  for (const char* text : {kLlama, kQwen3Tied}) {
    HandBuilt model(text);
    Result<Weights> w = model.build();
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(w->tensors().size(), model.tensors.size());
    // Values identify the tensor: the accessor for layer 1's up_proj reads that tensor's storage.
    const TensorView up = *w->find("model.layers.1.mlp.up_proj.weight");
    EXPECT_EQ(w->layer(1).up_proj.data, up.data);
    size_t bytes = 0;
    for (const auto& t : model.tensors) bytes += t.view.nbytes();
    EXPECT_EQ(w->total_bytes(), bytes);
  }
}

TEST(Weights, RefusesMissingWrongShapeAndDuplicates) {
  HandBuilt model(kLlama);
  HandBuilt missing = model;
  missing.tensors.erase(missing.tensors.begin() + 5);
  expect_refused(missing.build(), StatusCode::kNotFound, {model.tensors[5].name, "[", "missing"});

  HandBuilt no_head = model;
  no_head.tensors.pop_back();  // lm_head.weight of an untied model
  expect_refused(no_head.build(), StatusCode::kNotFound, {"lm_head.weight"});

  HandBuilt wrong_shape = model;
  for (NamedTensor& t : wrong_shape.tensors)
    if (t.name == "model.layers.1.self_attn.k_proj.weight") t.view.shape = {16, 16};
  expect_refused(wrong_shape.build(), StatusCode::kInvalidArgument,
                 {"model.layers.1.self_attn.k_proj.weight", "[16, 16]", "[8, 16]"});

  HandBuilt transposed = model;
  for (NamedTensor& t : transposed.tensors)
    if (t.name == "model.layers.0.mlp.down_proj.weight") t.view.shape = {24, 16};
  expect_refused(transposed.build(), StatusCode::kInvalidArgument, {"down_proj", "[24, 16]", "[16, 24]"});

  HandBuilt dup = model;
  dup.tensors.push_back(dup.tensors[0]);
  expect_refused(dup.build(), StatusCode::kInvalidArgument, {"model.embed_tokens.weight", "twice"});

  // A Llama config over a Qwen3 checkpoint: q_norm / k_norm are unexpected; the reverse: missing.
  HandBuilt qwen3(kQwen3Tied);
  HandBuilt llama_over_qwen3 = qwen3;
  llama_over_qwen3.config.architecture = ModelArchitecture::kLlama;
  llama_over_qwen3.config.qk_norm = false;
  expect_refused(llama_over_qwen3.build(), StatusCode::kInvalidArgument, {"self_attn.q_norm.weight", "4 tensor(s)"});
  HandBuilt qwen3_over_llama = model;
  qwen3_over_llama.config.architecture = ModelArchitecture::kQwen3;
  qwen3_over_llama.config.qk_norm = true;
  expect_refused(qwen3_over_llama.build(), StatusCode::kNotFound, {"model.layers.0.self_attn.q_norm.weight"});
}

TEST(Weights, UnexpectedTensorsAreReportedAndRefusedUnlessHarmless) {
  HandBuilt model(kQwen3Tied);
  model.add("model.layers.0.self_attn.rotary_emb.inv_freq", {4});
  model.add("lm_head.weight", {10, 16});  // tied: transformers ignores it too
  Result<Weights> w = model.build();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->unexpected_tensors(),
            (std::vector<std::string>{"lm_head.weight", "model.layers.0.self_attn.rotary_emb.inv_freq"}));
  EXPECT_EQ(w->lm_head().data, w->embed_tokens().data);  // still tied

  model.add("model.layers.0.self_attn.q_proj.bias", {32});
  expect_refused(model.build(), StatusCode::kInvalidArgument, {"model.layers.0.self_attn.q_proj.bias", "1 tensor(s)"});
  WeightsOptions allow;
  allow.allow_unexpected_tensors = true;
  w = model.build(allow);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->unexpected_tensors().size(), 3u);

  for (int i = 0; i < 7; ++i) model.add("extra." + std::to_string(i), {1});
  expect_refused(model.build(), StatusCode::kInvalidArgument, {"8 tensor(s)", "and 3 more"});
}

TEST(Weights, LoadRefusesBadCheckpoints) {
  HandBuilt model(kLlama);
  testing::ScratchDir dir;
  // Missing directory / files.
  Result<Weights> none = load_weights(model.config, dir.path() / "absent");
  expect_refused(none, StatusCode::kNotFound, {"absent"});
  none = load_weights(model.config, dir.path());
  expect_refused(none, StatusCode::kNotFound, {"model.safetensors"});

  // A shard missing one tensor: named, with the path.
  std::vector<NamedTensor> partial(model.tensors.begin() + 1, model.tensors.end());
  ASSERT_TRUE(write_safetensors_checkpoint(dir.path(), partial, 1 << 20).ok());
  expect_refused(load_weights(model.config, dir.path()), StatusCode::kNotFound,
                 {"model.embed_tokens.weight", dir.path().string()});

  // A wrong dtype in the file (I64 is refused by name).
  const std::string header = R"({"model.embed_tokens.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + std::string(8, '\0');
  testing::write_file_text(dir.path() / "model.safetensors", file);
  expect_refused(load_weights(model.config, dir.path()), StatusCode::kUnsupported,
                 {"model.embed_tokens.weight", "I64"});

  // The full table round-trips through the writer.
  ASSERT_TRUE(write_safetensors_checkpoint(dir.path(), model.tensors, 1 << 20).ok());
  Result<Weights> w = load_weights(model.config, dir.path());
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const TensorView v = *w->find(model.tensors[i].name);
    EXPECT_EQ(v.load(0), static_cast<float>(i)) << model.tensors[i].name;
  }
}

}  // namespace
}  // namespace kascade
