// kascade/model_config.h — the model described by a Hugging Face config.json.
//
// Supported: LlamaForCausalLM (model_type "llama") and Qwen3ForCausalLM (model_type "qwen3", which
// adds an RMSNorm over each query and key head: q_norm / k_norm). RoPE: default, linear, llama3 and
// yarn, read from `rope_scaling` (transformers 4.x files, with a top-level `rope_theta`) or
// `rope_parameters` (transformers 5.x files, `rope_theta` inside). Fields that a config.json may
// omit take transformers' defaults for that architecture (Llama: head_dim = hidden/heads,
// num_key_value_heads = heads; Qwen3: head_dim = 128, num_key_value_heads = 32, as Qwen3Config).
// Everything the runtime does not implement is refused with a Status naming the field: unknown
// architectures, attention_bias / mlp_bias true, hidden_act other than silu, sliding-window layers,
// partial rotary, rope types dynamic / longrope / ..., quantization_config.
// Tested by tests/unit/model/test_model_config.cpp (against configs resolved by transformers,
// tests/data/model/hf_configs.json, made by scripts/make_model_fixtures.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade {

enum class ModelArchitecture : uint8_t { kLlama = 0, kQwen3 = 1 };

// "LlamaForCausalLM", "Qwen3ForCausalLM".
const char* architecture_name(ModelArchitecture architecture);

enum class RopeType : uint8_t { kDefault = 0, kLinear = 1, kLlama3 = 2, kYarn = 3 };

// "default", "linear", "llama3", "yarn" (the rope_type strings of config.json).
const char* rope_type_name(RopeType type);

// RoPE parameters after transformers' standardisation (standardize_rope_params): defaults filled
// in, so compute_rope_frequencies (src/model/rope_frequencies.h) needs nothing else.
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;                           // linear, llama3, yarn
  int64_t original_max_position_embeddings = 0;  // llama3, yarn (yarn default: max_position_embeddings)
  double low_freq_factor = 0.0;                  // llama3
  double high_freq_factor = 0.0;                 // llama3
  double beta_fast = 32.0;                       // yarn (0 or null → 32, as transformers' `or 32`)
  double beta_slow = 1.0;                        // yarn (0 or null → 1)
  std::optional<double> attention_factor;        // yarn: explicit scale of cos/sin
  std::optional<double> mscale;                  // yarn: used with mscale_all_dim when both are non-zero
  std::optional<double> mscale_all_dim;          // yarn
  bool truncate = true;                          // yarn: floor/ceil the correction range
};

struct ModelConfig {
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;  // H
  int64_t num_key_value_heads = 0;  // G; H % G == 0
  int64_t head_dim = 0;             // d; even (RoPE rotates pairs)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope;
  bool tie_word_embeddings = false;  // lm_head shares model.embed_tokens.weight
  bool qk_norm = false;              // Qwen3: RMSNorm over each q and k head (weights [head_dim])
  double initializer_range = 0.02;   // std of the normal init (used by dummy weights)
  std::vector<int64_t> bos_token_ids;  // empty when the config has none
  std::vector<int64_t> eos_token_ids;  // config.json gives an int or a list (Llama default: bos 1, eos 2)
  std::optional<DType> torch_dtype;    // `torch_dtype` (4.x) or `dtype` (5.x), when given

  // H / G.
  int64_t group_size() const { return num_attention_heads / num_key_value_heads; }
};

// Parses the text of a config.json and validates the result (validate_model_config).
// Errors: InvalidArgument for malformed JSON, a missing required field or a value of the wrong
// type or range (the message names the field); Unsupported for an unknown architecture or an
// option the runtime does not implement (the message names it and its value).
Result<ModelConfig> parse_model_config(std::string_view json_text);

// Reads `path`: a config.json file, or a model directory holding one. NotFound / IoError when it
// cannot be read; otherwise as parse_model_config, with the path in the message.
Result<ModelConfig> load_model_config(const std::filesystem::path& path);

// Checks the invariants every consumer relies on: sizes positive and at most 2^24 (so products
// of two fit easily in int64; layers at most 4096, positions at most 2^31 − 1), H % G == 0, head_dim even, eps and rope_theta finite and positive,
// and the RoPE parameters usable by their formulas (factor > 0; llama3: high_freq_factor >
// low_freq_factor > 0, original_max_position_embeddings > 0; yarn: rope_theta > 1,
// original_max_position_embeddings > 0, beta_fast, beta_slow > 0).
Status validate_model_config(const ModelConfig& config);

}  // namespace kascade
