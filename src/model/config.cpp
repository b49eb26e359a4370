// config.cpp — config.json → ModelConfig (include/kascade/model_config.h).
//
// Mirrors how transformers 5.x resolves LlamaConfig / Qwen3Config from a config.json: the same
// defaults per architecture, `rope_scaling` taking precedence over `rope_parameters`, `type` as the
// old spelling of `rope_type`, `rope_theta` inside the rope dict winning over the top-level one,
// a top-level `original_max_position_embeddings` winning over the rope dict's for llama3/yarn, and
// yarn's `beta_fast or 32` / `beta_slow or 1` / `factor = null → max_pos / original`.
// Tested by tests/unit/model/test_model_config.cpp against configs resolved by transformers.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kascade/model_config.h"

namespace kascade {
namespace {

using nlohmann::json;

constexpr int64_t kMaxDimension = int64_t{1} << 24;
constexpr int64_t kMaxPositions = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxLayers = 4096;  // the largest released models have ~130

std::string describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Typed access to the fields of one JSON object; errors name the field as `<prefix><key>`.
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const std::string& key) const {
    auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }
  const json& at(const std::string& key) const { return object_.at(key); }
  std::string name(const std::string& key) const { return prefix_ + key; }

  Result<int64_t> required_int(const std::string& key) const {
    if (!has(key)) return invalid_argument("config.json: required field '", name(key), "' is missing");
    return as_int(key);
  }
  Result<int64_t> int_or(const std::string& key, int64_t fallback) const {
    if (!has(key)) return fallback;
    return as_int(key);
  }
  Result<double> number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    return as_number(key);
  }
  Result<std::optional<double>> optional_number(const std::string& key) const {
    if (!has(key)) return std::optional<double>();
    KC_ASSIGN_OR_RETURN(double value, as_number(key));
    return std::optional<double>(value);
  }
  Result<bool> bool_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_boolean())
      return invalid_argument("config.json: '", name(key), "' must be true or false, got ", describe(value));
    return value.get<bool>();
  }
  Result<std::optional<std::string>> optional_string(const std::string& key) const {
    if (!has(key)) return std::optional<std::string>();
    const json& value = object_.at(key);
    if (!value.is_string())
      return invalid_argument("config.json: '", name(key), "' must be a string, got ", describe(value));
    return std::optional<std::string>(value.get<std::string>());
  }

  Result<int64_t> as_int(const std::string& key) const {
    const json& value = object_.at(key);
    if (value.is_number_unsigned()) {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return invalid_argument("config.json: '", name(key), "' is out of range: ", describe(value));
      return static_cast<int64_t>(u);
    }
    if (value.is_number_integer()) return value.get<int64_t>();
    return invalid_argument("config.json: '", name(key), "' must be an integer, got ", describe(value));
  }
  Result<double> as_number(const std::string& key) const {
    const json& value = object_.at(key);
    if (!value.is_number())
      return invalid_argument("config.json: '", name(key), "' must be a number, got ", describe(value));
    const double d = value.get<double>();
    if (!std::isfinite(d)) return invalid_argument("config.json: '", name(key), "' is not finite");
    return d;
  }

 private:
  const json& object_;
  std::string prefix_;
};

Result<ModelArchitecture> architecture_from_class_name(const std::string& name) {
  if (name == "LlamaForCausalLM") return ModelArchitecture::kLlama;
  if (name == "Qwen3ForCausalLM") return ModelArchitecture::kQwen3;
  return unsupported("config.json: architecture '", name,
                     "' is not supported; supported: LlamaForCausalLM, Qwen3ForCausalLM");
}

Result<ModelArchitecture> architecture_from_model_type(const std::string& type) {
  if (type == "llama") return ModelArchitecture::kLlama;
  if (type == "qwen3") return ModelArchitecture::kQwen3;
  return unsupported("config.json: model_type '", type, "' is not supported; supported: llama, qwen3");
}

// architectures[0] and model_type; both must agree when both are given.
Result<ModelArchitecture> read_architecture(const json& root) {
  std::optional<ModelArchitecture> from_class;
  std::optional<ModelArchitecture> from_type;
  FieldReader fields(root, "");
  if (fields.has("architectures")) {
    const json& list = root.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      return invalid_argument("config.json: 'architectures' must be a non-empty list of class names, got ",
                              describe(list));
    KC_ASSIGN_OR_RETURN(from_class, architecture_from_class_name(list[0].get<std::string>()));
  }
  KC_ASSIGN_OR_RETURN(auto model_type, fields.optional_string("model_type"));
  if (model_type) {
    KC_ASSIGN_OR_RETURN(from_type, architecture_from_model_type(*model_type));
  }
  if (from_class && from_type && *from_class != *from_type)
    return invalid_argument("config.json: architectures[0] is ", architecture_name(*from_class),
                            " but model_type is '", *model_type, "'");
  if (from_class) return *from_class;
  if (from_type) return *from_type;
  return invalid_argument("config.json: names no model: expected 'architectures' or 'model_type'");
}

// bos_token_id / eos_token_id: absent (→ `fallback`), null, an int or a list of ints.
Result<std::vector<int64_t>> read_token_ids(const json& root, const std::string& key,
                                            std::vector<int64_t> fallback) {
  std::vector<int64_t> ids;
  auto it = root.find(key);
  if (it == root.end()) return fallback;
  if (it->is_null()) return ids;
  auto read_one = [&](const json& value) -> Status {
    if (!value.is_number_integer() || (value.is_number_unsigned() &&
                                       value.get<uint64_t>() > static_cast<uint64_t>(kMaxPositions)) ||
        value.get<int64_t>() < 0)
      return invalid_argument("config.json: '", key, "' must be a non-negative token id or a list of them, got ",
                              describe(*it));
    ids.push_back(value.get<int64_t>());
    return ok_status();
  };
  if (it->is_array()) {
    for (const json& value : *it) KC_RETURN_IF_ERROR(read_one(value));
  } else {
    KC_RETURN_IF_ERROR(read_one(*it));
  }
  return ids;
}

Result<std::optional<DType>> read_torch_dtype(const json& root) {
  FieldReader fields(root, "");
  // transformers 5.x writes `dtype`, 4.x `torch_dtype`; `dtype` wins when both are present.
  const std::string key = fields.has("dtype") ? "dtype" : "torch_dtype";
  KC_ASSIGN_OR_RETURN(auto name, fields.optional_string(key));
  if (!name) return std::optional<DType>();
  if (*name == "float32") return std::optional<DType>(DType::kF32);
  if (*name == "float16") return std::optional<DType>(DType::kF16);
  if (*name == "bfloat16") return std::optional<DType>(DType::kBF16);
  return unsupported("config.json: ", key, " '", *name, "' is not supported; supported: float32, float16, bfloat16");
}

Result<RopeType> rope_type_from_name(const std::string& name, const std::string& field) {
  if (name == "default") return RopeType::kDefault;
  if (name == "linear") return RopeType::kLinear;
  if (name == "llama3") return RopeType::kLlama3;
  if (name == "yarn") return RopeType::kYarn;
  return unsupported("config.json: ", field, " '", name,
                     "' is not supported; supported: default, linear, llama3, yarn");
}

// The rope dict (rope_scaling or rope_parameters) and the top-level fields it falls back to.
Status read_rope(const json& root, ModelConfig& config) {
  FieldReader top(root, "");
  // transformers: `rope_parameters = rope_scaling or rope_parameters` (a non-empty rope_scaling wins).
  std::string dict_name;
  const json* dict = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_object()) return invalid_argument("config.json: '", key, "' must be an object or null, got ", describe(*it));
    if (it->empty()) continue;
    dict_name = key;
    dict = &*it;
    break;
  }
  KC_ASSIGN_OR_RETURN(config.rope_theta, top.number_or("rope_theta", 10000.0));
  KC_ASSIGN_OR_RETURN(double partial_rotary, top.number_or("partial_rotary_factor", 1.0));
  if (partial_rotary != 1.0)
    return unsupported("config.json: partial_rotary_factor ", partial_rotary, " is not supported (only 1.0)");
  config.rope = RopeScaling{};
  if (dict == nullptr) return ok_status();

  FieldReader rope(*dict, dict_name + ".");
  KC_ASSIGN_OR_RETURN(config.rope_theta, rope.number_or("rope_theta", config.rope_theta));
  KC_ASSIGN_OR_RETURN(partial_rotary, rope.number_or("partial_rotary_factor", 1.0));
  if (partial_rotary != 1.0)
    return unsupported("config.json: ", rope.name("partial_rotary_factor"), " ", partial_rotary,
                       " is not supported (only 1.0)");
  std::string type_key = rope.has("rope_type") ? "rope_type" : "type";
  KC_ASSIGN_OR_RETURN(auto type_name, rope.optional_string(type_key));
  RopeScaling& r = config.rope;
  KC_ASSIGN_OR_RETURN(r.type, rope_type_from_name(type_name.value_or("default"), rope.name(type_key)));

  auto require = [&](const std::string& key) -> Status {
    if (!rope.has(key) && !(key == "factor" && r.type == RopeType::kYarn && dict->contains(key)))
      return invalid_argument("config.json: rope type '", rope_type_name(r.type), "' requires '",
                              rope.name(key), "'");
    return ok_status();
  };
  if (r.type == RopeType::kLlama3 || r.type == RopeType::kYarn) {
    // standardize_rope_params, which the rope init functions call again: a top-level
    // original_max_position_embeddings wins; otherwise the dict's; otherwise max_position_embeddings.
    // (The fixture llama_llama3_top_level_original pins this.)
    if (top.has("original_max_position_embeddings")) {
      KC_ASSIGN_OR_RETURN(r.original_max_position_embeddings, top.as_int("original_max_position_embeddings"));
    } else {
      KC_ASSIGN_OR_RETURN(r.original_max_position_embeddings,
                          rope.int_or("original_max_position_embeddings", config.max_position_embeddings));
    }
  }
  switch (r.type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear: {
      KC_RETURN_IF_ERROR(require("factor"));
      KC_ASSIGN_OR_RETURN(r.factor, rope.as_number("factor"));
      break;
    }
    case RopeType::kLlama3: {
      for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) KC_RETURN_IF_ERROR(require(key));
      KC_ASSIGN_OR_RETURN(r.factor, rope.as_number("factor"));
      KC_ASSIGN_OR_RETURN(r.low_freq_factor, rope.as_number("low_freq_factor"));
      KC_ASSIGN_OR_RETURN(r.high_freq_factor, rope.as_number("high_freq_factor"));
      break;
    }
    case RopeType::kYarn: {
      KC_RETURN_IF_ERROR(require("factor"));  // present; null means max_pos / original
      if (rope.has("factor")) {
        KC_ASSIGN_OR_RETURN(r.factor, rope.as_number("factor"));
      } else {
        if (r.original_max_position_embeddings <= 0)
          return invalid_argument("config.json: ", rope.name("original_max_position_embeddings"),
                                  " must be positive");
        r.factor = static_cast<double>(config.max_position_embeddings) /
                   static_cast<double>(r.original_max_position_embeddings);
      }
      KC_ASSIGN_OR_RETURN(r.attention_factor, rope.optional_number("attention_factor"));
      KC_ASSIGN_OR_RETURN(r.mscale, rope.optional_number("mscale"));
      KC_ASSIGN_OR_RETURN(r.mscale_all_dim, rope.optional_number("mscale_all_dim"));
      // transformers: `beta_fast or 32`, `beta_slow or 1` (a zero counts as absent).
      KC_ASSIGN_OR_RETURN(r.beta_fast, rope.number_or("beta_fast", 32.0));
      if (r.beta_fast == 0.0) r.beta_fast = 32.0;
      KC_ASSIGN_OR_RETURN(r.beta_slow, rope.number_or("beta_slow", 1.0));
      if (r.beta_slow == 0.0) r.beta_slow = 1.0;
      KC_ASSIGN_OR_RETURN(r.truncate, rope.bool_or("truncate", true));
      break;
    }
  }
  return ok_status();
}

// Options the runtime does not implement: refused by name.
Status refuse_unsupported_options(const json& root, const ModelConfig& config) {
  FieldReader top(root, "");
  KC_ASSIGN_OR_RETURN(bool attention_bias, top.bool_or("attention_bias", false));
  if (attention_bias)
    return unsupported("config.json: attention_bias = true (biases on the q/k/v/o projections) is not supported");
  KC_ASSIGN_OR_RETURN(bool mlp_bias, top.bool_or("mlp_bias", false));
  if (mlp_bias) return unsupported("config.json: mlp_bias = true (biases on the MLP projections) is not supported");
  KC_ASSIGN_OR_RETURN(auto act, top.optional_string("hidden_act"));
  // transformers' ACT2FN maps both "silu" and "swish" to SiLU.
  if (act && *act != "silu" && *act != "swish")
    return unsupported("config.json: hidden_act '", *act, "' is not supported; supported: silu");
  if (top.has("quantization_config"))
    return unsupported("config.json: quantized checkpoints (quantization_config) are not supported");
  KC_ASSIGN_OR_RETURN(bool sliding, top.bool_or("use_sliding_window", false));
  if (sliding && config.architecture == ModelArchitecture::kQwen3)
    return unsupported("config.json: use_sliding_window = true (sliding-window attention layers) is not supported");
  if (top.has("layer_types")) {
    const json& types = root.at("layer_types");
    if (!types.is_array()) return invalid_argument("config.json: 'layer_types' must be a list, got ", describe(types));
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i].is_string() || types[i].get<std::string>() != "full_attention")
        return unsupported("config.json: layer_types[", i, "] is ", describe(types[i]),
                           "; only full_attention layers are supported");
    }
    if (static_cast<int64_t>(types.size()) != config.num_hidden_layers)
      return invalid_argument("config.json: layer_types has ", types.size(), " entries but num_hidden_layers is ",
                              config.num_hidden_layers);
  }
  return ok_status();
}

Status check_dimension(const char* name, int64_t value, int64_t limit) {
  if (value <= 0 || value > limit)
    return invalid_argument("config: ", name, " is ", value, "; expected 1..", limit);
  return ok_status();
}

}  // namespace

const char* architecture_name(ModelArchitecture architecture) {
  switch (architecture) {
    case ModelArchitecture::kLlama: return "LlamaForCausalLM";
    case ModelArchitecture::kQwen3: return "Qwen3ForCausalLM";
  }
  return "?";
}

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kLlama3: return "llama3";
    case RopeType::kYarn: return "yarn";
  }
  return "?";
}

Status validate_model_config(const ModelConfig& c) {
  KC_RETURN_IF_ERROR(check_dimension("vocab_size", c.vocab_size, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("hidden_size", c.hidden_size, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("intermediate_size", c.intermediate_size, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("num_hidden_layers", c.num_hidden_layers, kMaxLayers));
  KC_RETURN_IF_ERROR(check_dimension("num_attention_heads", c.num_attention_heads, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("num_key_value_heads", c.num_key_value_heads, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("head_dim", c.head_dim, kMaxDimension));
  KC_RETURN_IF_ERROR(check_dimension("max_position_embeddings", c.max_position_embeddings, kMaxPositions));
  if (c.num_attention_heads * c.head_dim > kMaxDimension)
    return invalid_argument("config: num_attention_heads * head_dim = ", c.num_attention_heads * c.head_dim,
                            " exceeds ", kMaxDimension);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return invalid_argument("config: num_attention_heads (", c.num_attention_heads,
                            ") is not a multiple of num_key_value_heads (", c.num_key_value_heads, ")");
  if (c.head_dim % 2 != 0) return invalid_argument("config: head_dim is ", c.head_dim, "; RoPE needs an even head_dim");
  if (!(c.rms_norm_eps > 0.0) || !std::isfinite(c.rms_norm_eps))
    return invalid_argument("config: rms_norm_eps is ", c.rms_norm_eps, "; expected a positive number");
  if (!(c.rope_theta > 0.0) || !std::isfinite(c.rope_theta))
    return invalid_argument("config: rope_theta is ", c.rope_theta, "; expected a positive number");
  if (!(c.initializer_range >= 0.0) || !std::isfinite(c.initializer_range))
    return invalid_argument("config: initializer_range is ", c.initializer_range, "; expected >= 0");
  for (int64_t id : c.bos_token_ids)
    if (id < 0) return invalid_argument("config: bos_token_id ", id, " is negative");
  for (int64_t id : c.eos_token_ids)
    if (id < 0) return invalid_argument("config: eos_token_id ", id, " is negative");

  const RopeScaling& r = c.rope;
  const char* type = rope_type_name(r.type);
  if (r.type != RopeType::kDefault && (!(r.factor > 0.0) || !std::isfinite(r.factor)))
    return invalid_argument("config: rope ", type, " factor is ", r.factor, "; expected a positive number");
  if (r.type == RopeType::kLlama3 || r.type == RopeType::kYarn) {
    if (r.original_max_position_embeddings <= 0 || r.original_max_position_embeddings > kMaxPositions)
      return invalid_argument("config: rope ", type, " original_max_position_embeddings is ",
                              r.original_max_position_embeddings, "; expected 1..", kMaxPositions);
  }
  if (r.type == RopeType::kLlama3) {
    if (!(r.low_freq_factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor) ||
        !std::isfinite(r.high_freq_factor))
      return invalid_argument("config: rope llama3 needs 0 < low_freq_factor < high_freq_factor, got low_freq_factor ",
                              r.low_freq_factor, " and high_freq_factor ", r.high_freq_factor);
  }
  if (r.type == RopeType::kYarn) {
    if (!(c.rope_theta > 1.0))
      return invalid_argument("config: rope yarn needs rope_theta > 1 (its correction range divides by log(theta)), got ",
                              c.rope_theta);
    if (!(r.beta_fast > 0.0) || !(r.beta_slow > 0.0) || !std::isfinite(r.beta_fast) || !std::isfinite(r.beta_slow))
      return invalid_argument("config: rope yarn needs beta_fast > 0 and beta_slow > 0, got ", r.beta_fast, " and ",
                              r.beta_slow);
    for (const auto* opt : {&r.attention_factor, &r.mscale, &r.mscale_all_dim})
      if (opt->has_value() && !std::isfinite(**opt))
        return invalid_argument("config: rope yarn attention_factor / mscale / mscale_all_dim must be finite");
    if (r.attention_factor && !(*r.attention_factor > 0.0))
      return invalid_argument("config: rope yarn attention_factor is ", *r.attention_factor, "; expected > 0");
  }
  return ok_status();
}

Result<ModelConfig> parse_model_config(std::string_view json_text) {
  // nlohmann's parser stops at a NUL byte as if the input ended there; JSON has none.
  if (json_text.find('\0') != std::string_view::npos)
    return invalid_argument("config.json is not valid JSON: it contains a NUL byte at offset ", json_text.find('\0'));
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return invalid_argument("config.json is not valid JSON: ", e.what());
  }
  if (!root.is_object()) return invalid_argument("config.json: the top level must be an object, got ", describe(root));

  ModelConfig c;
  KC_ASSIGN_OR_RETURN(c.architecture, read_architecture(root));
  const bool qwen3 = c.architecture == ModelArchitecture::kQwen3;
  c.qk_norm = qwen3;
  FieldReader top(root, "");
  KC_ASSIGN_OR_RETURN(c.vocab_size, top.required_int("vocab_size"));
  KC_ASSIGN_OR_RETURN(c.hidden_size, top.required_int("hidden_size"));
  KC_ASSIGN_OR_RETURN(c.intermediate_size, top.required_int("intermediate_size"));
  KC_ASSIGN_OR_RETURN(c.num_hidden_layers, top.required_int("num_hidden_layers"));
  KC_ASSIGN_OR_RETURN(c.num_attention_heads, top.required_int("num_attention_heads"));
  KC_RETURN_IF_ERROR(check_dimension("num_attention_heads", c.num_attention_heads, kMaxDimension));
  // Defaults as LlamaConfig / Qwen3Config: an absent field takes the class default (Qwen3:
  // num_key_value_heads 32, head_dim 128), an explicit null the value __post_init__ derives
  // (num_key_value_heads = heads; head_dim = hidden / heads).
  const bool kv_absent = !root.contains("num_key_value_heads");
  KC_ASSIGN_OR_RETURN(c.num_key_value_heads,
                      top.int_or("num_key_value_heads", qwen3 && kv_absent ? 32 : c.num_attention_heads));
  if (!qwen3 && c.hidden_size % c.num_attention_heads != 0)  // LlamaConfig.validate_architecture
    return invalid_argument("config: hidden_size (", c.hidden_size, ") is not a multiple of num_attention_heads (",
                            c.num_attention_heads, ")");
  const bool head_dim_absent = !root.contains("head_dim");
  KC_ASSIGN_OR_RETURN(c.head_dim,
                      top.int_or("head_dim", qwen3 && head_dim_absent ? 128 : c.hidden_size / c.num_attention_heads));
  KC_ASSIGN_OR_RETURN(c.max_position_embeddings, top.int_or("max_position_embeddings", qwen3 ? 32768 : 2048));
  KC_ASSIGN_OR_RETURN(c.rms_norm_eps, top.number_or("rms_norm_eps", 1e-6));
  KC_ASSIGN_OR_RETURN(c.tie_word_embeddings, top.bool_or("tie_word_embeddings", false));
  KC_ASSIGN_OR_RETURN(c.initializer_range, top.number_or("initializer_range", 0.02));
  // LlamaConfig defaults bos_token_id = 1, eos_token_id = 2; Qwen3Config None.
  KC_ASSIGN_OR_RETURN(c.bos_token_ids, read_token_ids(root, "bos_token_id", qwen3 ? std::vector<int64_t>{}
                                                                                  : std::vector<int64_t>{1}));
  KC_ASSIGN_OR_RETURN(c.eos_token_ids, read_token_ids(root, "eos_token_id", qwen3 ? std::vector<int64_t>{}
                                                                                  : std::vector<int64_t>{2}));
  KC_ASSIGN_OR_RETURN(c.torch_dtype, read_torch_dtype(root));
  KC_RETURN_IF_ERROR(read_rope(root, c));
  KC_RETURN_IF_ERROR(refuse_unsupported_options(root, c));
  KC_RETURN_IF_ERROR(validate_model_config(c));
  return c;
}

Result<ModelConfig> load_model_config(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path, ec)) file = path / "config.json";
  if (!std::filesystem::exists(file, ec)) return not_found("model config ", file.string(), " does not exist");
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error("cannot open ", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error("cannot read ", file.string());
  Result<ModelConfig> config = parse_model_config(text.str());
  if (!config.ok()) {
    Status status = config.status();
    return status.with_context(file.string());
  }
  return config;
}

}  // namespace kascade
