// src/model/model.cpp — the model object (src/model/model.h): RoPE tables, softmax scale, linear
// weights as sgemm operands (widened to fp32 at load time when they fit the budget).
// Tested through tests/unit/model/test_forward_reference.cpp and test_forward_hf_parity.cpp.
#include "model/model.h"

#include <cmath>

namespace kascade {
namespace {

// fp32 bytes of a matrix view.
int64_t fp32_bytes(const TensorView& v) { return v.numel() * static_cast<int64_t>(sizeof(float)); }

}  // namespace

Result<ref::WeightMatrix> Model::prepare(const TensorView& view, const char* what, int64_t layer) {
  if (view.shape.size() != 2 || view.data == nullptr)
    return internal_error("model: weight ", what, " of layer ", layer, " is not a matrix (shape ",
                          shape_to_string(view.shape), ")");
  ref::WeightMatrix m{view.data, view.dtype, view.shape[0], view.shape[1]};
  if (!widened_ || view.dtype == DType::kF32) return m;
  std::vector<float> storage(static_cast<size_t>(view.numel()));
  KC_RETURN_IF_ERROR(ref::widen_weight_ref(m, storage.data()));
  widened_bytes_ += fp32_bytes(view);
  m.data = storage.data();
  m.dtype = DType::kF32;
  widened_storage_.push_back(std::move(storage));
  return m;
}

Result<std::unique_ptr<Model>> Model::create(Weights weights, const ModelOptions& options) {
  KC_CHECK_ARG(options.widen_budget_bytes >= 0, "model: widen_budget_bytes ", options.widen_budget_bytes,
               " is negative");
  const ModelConfig& config = weights.config();
  KC_RETURN_IF_ERROR(validate_model_config(config));
  KC_CHECK_ARG(static_cast<int64_t>(weights.layers().size()) == config.num_hidden_layers, "model: weights hold ",
               weights.layers().size(), " layers but the config has ", config.num_hidden_layers);
  std::unique_ptr<Model> model(new Model(std::move(weights)));
  KC_ASSIGN_OR_RETURN(model->rope_, compute_rope_frequencies(config));
  model->attention_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim)));

  // Widen when every 16-bit linear weight fits the budget in fp32 (all or none: one code path per model).
  int64_t needed = 0;
  const auto count = [&needed](const TensorView& v) {
    if (v.dtype != DType::kF32) needed += fp32_bytes(v);
  };
  for (const LayerWeights& l : model->weights_.layers()) {
    for (const TensorView* v : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      count(*v);
  }
  count(model->weights_.lm_head());
  model->widened_ = needed > 0 && needed <= options.widen_budget_bytes;

  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const LayerWeights& l = model->weights_.layer(i);
    ModelLayer layer;
    KC_ASSIGN_OR_RETURN(layer.q_proj, model->prepare(l.q_proj, "q_proj", i));
    KC_ASSIGN_OR_RETURN(layer.k_proj, model->prepare(l.k_proj, "k_proj", i));
    KC_ASSIGN_OR_RETURN(layer.v_proj, model->prepare(l.v_proj, "v_proj", i));
    KC_ASSIGN_OR_RETURN(layer.o_proj, model->prepare(l.o_proj, "o_proj", i));
    KC_ASSIGN_OR_RETURN(layer.gate_proj, model->prepare(l.gate_proj, "gate_proj", i));
    KC_ASSIGN_OR_RETURN(layer.up_proj, model->prepare(l.up_proj, "up_proj", i));
    KC_ASSIGN_OR_RETURN(layer.down_proj, model->prepare(l.down_proj, "down_proj", i));
    layer.input_layernorm = l.input_layernorm;
    layer.post_attention_layernorm = l.post_attention_layernorm;
    layer.q_norm = l.q_norm;
    layer.k_norm = l.k_norm;
    if (config.qk_norm && (!layer.q_norm.is_set() || !layer.k_norm.is_set()))
      return internal_error("model: layer ", i, " lacks q_norm / k_norm weights although the config has qk_norm");
    model->layers_.push_back(layer);
  }
  KC_ASSIGN_OR_RETURN(model->lm_head_, model->prepare(model->weights_.lm_head(), "lm_head", -1));
  return model;
}

}  // namespace kascade
