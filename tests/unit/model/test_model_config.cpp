// test_model_config.cpp — config.json parsing (src/model/config.cpp).
// Reference: the configs transformers 5.x resolves from the same config.json texts
// (tests/data/model/hf_configs.json, scripts/make_model_fixtures.py): every field, defaults
// included, for Llama and Qwen3 and every rope type. Refusals are checked for their code and for
// naming the offending field.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "kascade/model_config.h"
#include "model_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;
using testing::read_model_fixture;

json base_llama() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 1000, "max_position_embeddings": 4096, "rope_theta": 10000.0})");
}

json base_qwen3() {
  json c = base_llama();
  c["architectures"] = json::array({"Qwen3ForCausalLM"});
  c["model_type"] = "qwen3";
  c["head_dim"] = 64;
  return c;
}

DType dtype_from_torch_name(const std::string& name) {
  if (name == "float32") return DType::kF32;
  if (name == "float16") return DType::kF16;
  return DType::kBF16;
}

TEST(ModelConfig, MatchesTransformersOnEveryFixture) {
  const json fixtures = read_model_fixture("hf_configs.json");
  ASSERT_GE(fixtures["cases"].size(), 10u);
  for (const json& c : fixtures["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    Result<ModelConfig> parsed = parse_model_config(c["config"].dump());
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    const ModelConfig& m = *parsed;
    const json& r = c["resolved"];
    EXPECT_EQ(architecture_name(m.architecture), r["architecture"].get<std::string>());
    EXPECT_EQ(m.qk_norm, m.architecture == ModelArchitecture::kQwen3);
    EXPECT_EQ(m.vocab_size, r["vocab_size"].get<int64_t>());
    EXPECT_EQ(m.hidden_size, r["hidden_size"].get<int64_t>());
    EXPECT_EQ(m.intermediate_size, r["intermediate_size"].get<int64_t>());
    EXPECT_EQ(m.num_hidden_layers, r["num_hidden_layers"].get<int64_t>());
    EXPECT_EQ(m.num_attention_heads, r["num_attention_heads"].get<int64_t>());
    EXPECT_EQ(m.num_key_value_heads, r["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(m.head_dim, r["head_dim"].get<int64_t>());
    EXPECT_EQ(m.max_position_embeddings, r["max_position_embeddings"].get<int64_t>());
    EXPECT_EQ(m.rms_norm_eps, r["rms_norm_eps"].get<double>());
    EXPECT_EQ(m.rope_theta, r["rope_theta"].get<double>());
    EXPECT_EQ(rope_type_name(m.rope.type), r["rope_type"].get<std::string>());
    EXPECT_EQ(m.tie_word_embeddings, r["tie_word_embeddings"].get<bool>());
    EXPECT_EQ(m.bos_token_ids, r["bos_token_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(m.eos_token_ids, r["eos_token_ids"].get<std::vector<int64_t>>());
    if (r["dtype"].is_null()) {
      EXPECT_FALSE(m.torch_dtype.has_value());
    } else {
      ASSERT_TRUE(m.torch_dtype.has_value());
      EXPECT_EQ(*m.torch_dtype, dtype_from_torch_name(r["dtype"].get<std::string>()));
    }
  }
}

TEST(ModelConfig, ReadsEveryRopeParameter) {
  json c = base_qwen3();
  c["max_position_embeddings"] = 131072;
  c["rope_scaling"] = json::parse(R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
      "attention_factor": 1.5, "beta_fast": 16, "beta_slow": 2, "mscale": 0.5, "mscale_all_dim": 0.25,
      "truncate": false})");
  Result<ModelConfig> m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.type, RopeType::kYarn);
  EXPECT_EQ(m->rope.factor, 4.0);
  EXPECT_EQ(m->rope.original_max_position_embeddings, 32768);
  EXPECT_EQ(m->rope.attention_factor, 1.5);
  EXPECT_EQ(m->rope.beta_fast, 16.0);
  EXPECT_EQ(m->rope.beta_slow, 2.0);
  EXPECT_EQ(m->rope.mscale, 0.5);
  EXPECT_EQ(m->rope.mscale_all_dim, 0.25);
  EXPECT_FALSE(m->rope.truncate);

  // transformers' `beta_fast or 32`: a zero means the default; yarn without original → max_pos.
  c["rope_scaling"] = json::parse(R"({"rope_type": "yarn", "factor": 2.0, "beta_fast": 0, "beta_slow": 0})");
  m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.beta_fast, 32.0);
  EXPECT_EQ(m->rope.beta_slow, 1.0);
  EXPECT_EQ(m->rope.original_max_position_embeddings, 131072);
  EXPECT_FALSE(m->rope.attention_factor.has_value());
  EXPECT_TRUE(m->rope.truncate);

  c = base_llama();
  c["rope_scaling"] = json::parse(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
      "high_freq_factor": 4, "original_max_position_embeddings": 8192})");
  m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.type, RopeType::kLlama3);
  EXPECT_EQ(m->rope.factor, 8.0);
  EXPECT_EQ(m->rope.low_freq_factor, 1.0);
  EXPECT_EQ(m->rope.high_freq_factor, 4.0);
  EXPECT_EQ(m->rope.original_max_position_embeddings, 8192);

  c["rope_scaling"] = json::parse(R"({"type": "linear", "factor": 2.5})");
  m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.type, RopeType::kLinear);
  EXPECT_EQ(m->rope.factor, 2.5);

  c["rope_scaling"] = json::parse(R"({"rope_type": "default"})");
  m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.type, RopeType::kDefault);
}

TEST(ModelConfig, RopeScalingWinsOverRopeParametersAndThetaInsideWins) {
  json c = base_llama();
  c["rope_theta"] = 1234.0;
  c["rope_parameters"] = json::parse(R"({"rope_type": "linear", "factor": 3.0, "rope_theta": 777.0})");
  Result<ModelConfig> m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.type, RopeType::kLinear);
  EXPECT_EQ(m->rope_theta, 777.0);
  c["rope_scaling"] = json::parse(R"({"rope_type": "linear", "factor": 5.0})");
  m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->rope.factor, 5.0);
  EXPECT_EQ(m->rope_theta, 1234.0);
}

TEST(ModelConfig, AcceptsEquivalentSpellings) {
  json c = base_llama();
  c["hidden_act"] = "swish";  // ACT2FN["swish"] is SiLU
  c.erase("architectures");   // model_type alone names the model
  c["eos_token_id"] = nullptr;
  c["bos_token_id"] = 7;
  c["dtype"] = "float16";
  c["torch_dtype"] = "bfloat16";  // `dtype` (transformers 5) wins
  Result<ModelConfig> m = parse_model_config(c.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->eos_token_ids.empty());
  EXPECT_EQ(m->bos_token_ids, std::vector<int64_t>{7});
  EXPECT_EQ(m->torch_dtype, DType::kF16);
  EXPECT_EQ(m->group_size(), 2);

  json q = base_qwen3();
  q.erase("model_type");  // architectures alone
  q["layer_types"] = json::array({"full_attention", "full_attention"});
  q["use_sliding_window"] = false;
  q["sliding_window"] = 4096;
  m = parse_model_config(q.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->architecture, ModelArchitecture::kQwen3);
  EXPECT_TRUE(m->qk_norm);

  // Qwen3Config: an absent num_key_value_heads is the class default 32, an explicit null becomes
  // num_attention_heads in __post_init__ (the absent case is in the transformers fixtures).
  q["num_key_value_heads"] = nullptr;
  m = parse_model_config(q.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->num_key_value_heads, 4);
}

struct Refusal {
  std::string what;
  json config;
  StatusCode code;
  std::string must_mention;
};

json with(json c, const std::string& key, json value) {
  c[key] = std::move(value);
  return c;
}
json without(json c, const std::string& key) {
  c.erase(key);
  return c;
}

TEST(ModelConfig, RefusesWithMessagesNamingTheField) {
  const json llama = base_llama();
  const json qwen3 = base_qwen3();
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  const StatusCode kUnsupported = StatusCode::kUnsupported;
  std::vector<Refusal> cases = {
      {"unknown architecture", with(without(llama, "model_type"), "architectures", json::array({"MistralForCausalLM"})),
       kUnsupported, "MistralForCausalLM"},
      {"unknown model_type", with(without(llama, "architectures"), "model_type", "gemma"), kUnsupported, "gemma"},
      {"architecture disagrees with model_type", with(llama, "model_type", "qwen3"), kInvalid, "model_type"},
      {"no architecture", without(without(llama, "model_type"), "architectures"), kInvalid, "architectures"},
      {"architectures not a list", with(llama, "architectures", "LlamaForCausalLM"), kInvalid, "architectures"},
      {"rope dynamic", with(llama, "rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}), kUnsupported,
       "dynamic"},
      {"rope longrope (old key)", with(llama, "rope_scaling", {{"type", "longrope"}}), kUnsupported, "longrope"},
      {"attention_bias", with(llama, "attention_bias", true), kUnsupported, "attention_bias"},
      {"attention_bias qwen3", with(qwen3, "attention_bias", true), kUnsupported, "attention_bias"},
      {"mlp_bias", with(llama, "mlp_bias", true), kUnsupported, "mlp_bias"},
      {"hidden_act", with(llama, "hidden_act", "gelu_pytorch_tanh"), kUnsupported, "gelu_pytorch_tanh"},
      {"sliding window", with(qwen3, "use_sliding_window", true), kUnsupported, "use_sliding_window"},
      {"sliding layer", with(qwen3, "layer_types", json::array({"full_attention", "sliding_attention"})), kUnsupported,
       "layer_types[1]"},
      {"layer_types length", with(qwen3, "layer_types", json::array({"full_attention"})), kInvalid, "layer_types"},
      {"quantized", with(llama, "quantization_config", {{"quant_method", "awq"}}), kUnsupported,
       "quantization_config"},
      {"partial rotary", with(llama, "partial_rotary_factor", 0.5), kUnsupported, "partial_rotary_factor"},
      {"partial rotary in dict",
       with(llama, "rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}}), kUnsupported,
       "partial_rotary_factor"},
      {"torch_dtype", with(llama, "torch_dtype", "float64"), kUnsupported, "float64"},
      {"missing vocab_size", without(llama, "vocab_size"), kInvalid, "vocab_size"},
      {"missing hidden_size", without(llama, "hidden_size"), kInvalid, "hidden_size"},
      {"missing intermediate_size", without(llama, "intermediate_size"), kInvalid, "intermediate_size"},
      {"missing num_hidden_layers", without(llama, "num_hidden_layers"), kInvalid, "num_hidden_layers"},
      {"missing num_attention_heads", without(llama, "num_attention_heads"), kInvalid, "num_attention_heads"},
      {"hidden_size as string", with(llama, "hidden_size", "256"), kInvalid, "hidden_size"},
      {"hidden_size fractional", with(llama, "hidden_size", 256.5), kInvalid, "hidden_size"},
      {"hidden_size huge", with(llama, "hidden_size", 18446744073709551615ull), kInvalid, "hidden_size"},
      {"hidden_size negative", with(llama, "hidden_size", -256), kInvalid, "hidden_size"},
      {"tie not bool", with(llama, "tie_word_embeddings", "yes"), kInvalid, "tie_word_embeddings"},
      {"eps not number", with(llama, "rms_norm_eps", "1e-5"), kInvalid, "rms_norm_eps"},
      {"eps zero", with(llama, "rms_norm_eps", 0.0), kInvalid, "rms_norm_eps"},
      {"theta negative", with(llama, "rope_theta", -1.0), kInvalid, "rope_theta"},
      {"eos not int", with(llama, "eos_token_id", json::array({1, "x"})), kInvalid, "eos_token_id"},
      {"bos negative", with(llama, "bos_token_id", -1), kInvalid, "bos_token_id"},
      {"heads not multiple of kv", with(llama, "num_key_value_heads", 3), kInvalid, "num_key_value_heads"},
      {"odd head_dim", with(qwen3, "head_dim", 63), kInvalid, "head_dim"},
      {"llama hidden not multiple of heads", with(llama, "hidden_size", 258), kInvalid, "num_attention_heads"},
      {"zero layers", with(llama, "num_hidden_layers", 0), kInvalid, "num_hidden_layers"},
      {"absurd layers", with(llama, "num_hidden_layers", 100000), kInvalid, "num_hidden_layers"},
      {"linear without factor", with(llama, "rope_scaling", {{"rope_type", "linear"}}), kInvalid, "factor"},
      {"llama3 without low_freq_factor",
       with(llama, "rope_scaling",
            {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0},
             {"original_max_position_embeddings", 1024}}),
       kInvalid, "low_freq_factor"},
      {"llama3 high <= low",
       with(llama, "rope_scaling",
            {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 4.0},
             {"original_max_position_embeddings", 1024}}),
       kInvalid, "high_freq_factor"},
      {"yarn without factor", with(qwen3, "rope_scaling", {{"rope_type", "yarn"}}), kInvalid, "factor"},
      {"yarn factor negative", with(qwen3, "rope_scaling", {{"rope_type", "yarn"}, {"factor", -2.0}}), kInvalid,
       "factor"},
      {"yarn theta 1", with(with(qwen3, "rope_theta", 1.0), "rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}}),
       kInvalid, "rope_theta"},
      {"yarn beta negative",
       with(qwen3, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", -1.0}}), kInvalid,
       "beta_fast"},
      {"yarn truncate not bool",
       with(qwen3, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}, {"truncate", 1}}), kInvalid, "truncate"},
      {"rope_scaling not object", with(llama, "rope_scaling", "llama3"), kInvalid, "rope_scaling"},
      {"rope type not string", with(llama, "rope_scaling", {{"rope_type", 3}}), kInvalid, "rope_type"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.what);
    Result<ModelConfig> m = parse_model_config(r.config.dump());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), r.code) << m.status().to_string();
    EXPECT_NE(m.status().message().find(r.must_mention), std::string::npos) << m.status().to_string();
  }
}

TEST(ModelConfig, RefusesMalformedJson) {
  for (const char* text : {"", "{", "{\"hidden_size\": }", "[1, 2]", "\"LlamaForCausalLM\"", "{} trailing",
                           "{\"vocab_size\": NaN}"}) {
    SCOPED_TRACE(text);
    Result<ModelConfig> m = parse_model_config(text);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("config.json"), std::string::npos) << m.status().to_string();
  }
}

TEST(ModelConfig, ValidateCatchesHandBuiltMistakes) {
  Result<ModelConfig> m = parse_model_config(base_llama().dump());
  ASSERT_TRUE(m.ok());
  ModelConfig c = *m;
  EXPECT_TRUE(validate_model_config(c).ok());
  c.num_key_value_heads = 0;
  EXPECT_NE(validate_model_config(c).message().find("num_key_value_heads"), std::string::npos);
  c = *m;
  c.rope.type = RopeType::kYarn;
  c.rope.factor = 2.0;
  c.rope.original_max_position_embeddings = 0;
  EXPECT_NE(validate_model_config(c).message().find("original_max_position_embeddings"), std::string::npos);
  c = *m;
  c.head_dim = int64_t{1} << 30;
  EXPECT_NE(validate_model_config(c).message().find("head_dim"), std::string::npos);
}

TEST(ModelConfig, LoadsFromFileOrDirectory) {
  testing::ScratchDir dir;
  testing::write_file_text(dir.path() / "config.json", base_qwen3().dump(2));
  Result<ModelConfig> from_dir = load_model_config(dir.path());
  ASSERT_TRUE(from_dir.ok()) << from_dir.status().to_string();
  EXPECT_EQ(from_dir->architecture, ModelArchitecture::kQwen3);
  Result<ModelConfig> from_file = load_model_config(dir.path() / "config.json");
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(from_file->head_dim, 64);

  Result<ModelConfig> missing = load_model_config(dir.path() / "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);

  testing::write_file_text(dir.path() / "config.json", with(base_llama(), "attention_bias", true).dump());
  Result<ModelConfig> bad = load_model_config(dir.path());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad.status().message().find((dir.path() / "config.json").string()), std::string::npos)
      << bad.status().to_string();

  Result<ModelConfig> shipped = load_model_config(testing::model_data_dir() / "tiny_llama_sharded");
  ASSERT_TRUE(shipped.ok()) << shipped.status().to_string();
  EXPECT_EQ(shipped->rope.type, RopeType::kLlama3);
  EXPECT_EQ(shipped->torch_dtype, DType::kBF16);
}

}  // namespace
}  // namespace kascade
