// weights.cpp — the weight table of Llama / Qwen3 and the Weights object (include/kascade/weights.h):
// names and shapes implied by the config, checks of a set of named tensors against them, and
// loading from a (sharded) safetensors checkpoint.
// Tested by tests/unit/model/test_weights.cpp against the parameter lists of transformers' models
// and checkpoints saved by transformers.
#include "kascade/weights.h"

#include <algorithm>
#include <sstream>

#include "model/safetensors.h"

namespace kascade {
namespace {

std::string layer_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tensors a checkpoint may carry that the forward pass never reads and whose absence from the
// table cannot change results.
bool harmless_extra(const std::string& name, const ModelConfig& config) {
  if (ends_with(name, ".rotary_emb.inv_freq")) return true;
  return config.tie_word_embeddings && name == "lm_head.weight";
}

}  // namespace

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Result<std::vector<WeightSpec>> expected_weights(const ModelConfig& config) {
  KC_RETURN_IF_ERROR(validate_model_config(config));
  const int64_t hidden = config.hidden_size;
  const int64_t q_out = config.num_attention_heads * config.head_dim;
  const int64_t kv_out = config.num_key_value_heads * config.head_dim;
  const int64_t inter = config.intermediate_size;
  std::vector<WeightSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {config.vocab_size, hidden}});
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    specs.push_back({layer_name(l, "input_layernorm.weight"), {hidden}});
    specs.push_back({layer_name(l, "self_attn.q_proj.weight"), {q_out, hidden}});
    specs.push_back({layer_name(l, "self_attn.k_proj.weight"), {kv_out, hidden}});
    specs.push_back({layer_name(l, "self_attn.v_proj.weight"), {kv_out, hidden}});
    specs.push_back({layer_name(l, "self_attn.o_proj.weight"), {hidden, q_out}});
    if (config.qk_norm) {
      specs.push_back({layer_name(l, "self_attn.q_norm.weight"), {config.head_dim}});
      specs.push_back({layer_name(l, "self_attn.k_norm.weight"), {config.head_dim}});
    }
    specs.push_back({layer_name(l, "post_attention_layernorm.weight"), {hidden}});
    specs.push_back({layer_name(l, "mlp.gate_proj.weight"), {inter, hidden}});
    specs.push_back({layer_name(l, "mlp.up_proj.weight"), {inter, hidden}});
    specs.push_back({layer_name(l, "mlp.down_proj.weight"), {hidden, inter}});
  }
  specs.push_back({"model.norm.weight", {hidden}});
  if (!config.tie_word_embeddings) specs.push_back({"lm_head.weight", {config.vocab_size, hidden}});
  return specs;
}

Result<Weights> Weights::from_tensors(const ModelConfig& config, std::vector<NamedTensor> tensors,
                                      std::shared_ptr<const void> keepalive, WeightsOptions options) {
  KC_ASSIGN_OR_RETURN(std::vector<WeightSpec> specs, expected_weights(config));
  std::unordered_map<std::string, size_t> given;  // name → position in tensors
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!given.emplace(tensors[i].name, i).second)
      return invalid_argument("tensor '", tensors[i].name, "' is given twice");
  }

  Weights w;
  w.config_ = config;
  w.keepalive_ = std::move(keepalive);
  for (const WeightSpec& spec : specs) {
    auto it = given.find(spec.name);
    if (it == given.end())
      return not_found("tensor '", spec.name, "' is missing (", architecture_name(config.architecture),
                       " expects it with shape ", shape_to_string(spec.shape), ")");
    const TensorView& view = tensors[it->second].view;
    if (view.shape != spec.shape)
      return invalid_argument("tensor '", spec.name, "' has shape ", shape_to_string(view.shape),
                              "; the config implies ", shape_to_string(spec.shape));
    if (view.data == nullptr && view.numel() != 0) return invalid_argument("tensor '", spec.name, "' has no data");
    w.index_.emplace(spec.name, w.tensors_.size());
    w.tensors_.push_back({spec.name, view});
    given.erase(it);
  }

  std::vector<std::string> refused;
  for (const auto& [name, position] : given) {
    w.unexpected_.push_back(name);
    if (!harmless_extra(name, config)) refused.push_back(name);
  }
  std::sort(w.unexpected_.begin(), w.unexpected_.end());
  std::sort(refused.begin(), refused.end());
  if (!refused.empty() && !options.allow_unexpected_tensors) {
    std::ostringstream names;
    for (size_t i = 0; i < refused.size() && i < 5; ++i) names << (i ? ", " : "") << "'" << refused[i] << "'";
    if (refused.size() > 5) names << " and " << refused.size() - 5 << " more";
    return invalid_argument(refused.size(), " tensor(s) that ", architecture_name(config.architecture),
                            " with this config does not use: ", names.str(),
                            " (allow_unexpected_tensors loads anyway)");
  }

  auto get = [&](const std::string& name) { return w.tensors_[w.index_.at(name)].view; };
  w.embed_tokens_ = get("model.embed_tokens.weight");
  w.final_norm_ = get("model.norm.weight");
  w.lm_head_ = config.tie_word_embeddings ? w.embed_tokens_ : get("lm_head.weight");
  w.layers_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    LayerWeights& lw = w.layers_[static_cast<size_t>(l)];
    lw.input_layernorm = get(layer_name(l, "input_layernorm.weight"));
    lw.q_proj = get(layer_name(l, "self_attn.q_proj.weight"));
    lw.k_proj = get(layer_name(l, "self_attn.k_proj.weight"));
    lw.v_proj = get(layer_name(l, "self_attn.v_proj.weight"));
    lw.o_proj = get(layer_name(l, "self_attn.o_proj.weight"));
    if (config.qk_norm) {
      lw.q_norm = get(layer_name(l, "self_attn.q_norm.weight"));
      lw.k_norm = get(layer_name(l, "self_attn.k_norm.weight"));
    }
    lw.post_attention_layernorm = get(layer_name(l, "post_attention_layernorm.weight"));
    lw.gate_proj = get(layer_name(l, "mlp.gate_proj.weight"));
    lw.up_proj = get(layer_name(l, "mlp.up_proj.weight"));
    lw.down_proj = get(layer_name(l, "mlp.down_proj.weight"));
  }
  return w;
}

Result<TensorView> Weights::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return not_found("no weight named '", name, "'");
  return tensors_[it->second].view;
}

size_t Weights::total_bytes() const {
  size_t total = 0;
  for (const NamedTensor& t : tensors_) total += t.view.nbytes();
  return total;
}

Result<Weights> load_weights(const ModelConfig& config, const std::filesystem::path& path, WeightsOptions options) {
  KC_ASSIGN_OR_RETURN(SafetensorsCheckpoint checkpoint, SafetensorsCheckpoint::open(path));
  auto owned = std::make_shared<const SafetensorsCheckpoint>(std::move(checkpoint));
  std::vector<NamedTensor> tensors;
  for (const SafetensorsFile& file : owned->files())
    for (const SafetensorsTensorInfo& info : file.header().tensors) tensors.push_back({info.name, file.view(info)});
  Result<Weights> weights = Weights::from_tensors(config, std::move(tensors), owned, options);
  if (!weights.ok()) {
    Status status = weights.status();
    return status.with_context(path.string());
  }
  return weights;
}

}  // namespace kascade
