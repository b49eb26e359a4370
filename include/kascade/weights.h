// kascade/weights.h — the weights of a Llama / Qwen3 model: typed views by Hugging Face name.
//
// The weight table of an architecture (expected_weights) lists every tensor the forward pass reads,
// with the shape the config implies:
//   model.embed_tokens.weight                          [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight            [hidden]
//   model.layers.{i}.self_attn.q_proj.weight           [H·d, hidden]
//   model.layers.{i}.self_attn.k_proj.weight           [G·d, hidden]
//   model.layers.{i}.self_attn.v_proj.weight           [G·d, hidden]
//   model.layers.{i}.self_attn.o_proj.weight           [hidden, H·d]
//   model.layers.{i}.self_attn.q_norm.weight           [d]        (Qwen3 only)
//   model.layers.{i}.self_attn.k_norm.weight           [d]        (Qwen3 only)
//   model.layers.{i}.post_attention_layernorm.weight   [hidden]
//   model.layers.{i}.mlp.gate_proj.weight              [intermediate, hidden]
//   model.layers.{i}.mlp.up_proj.weight                [intermediate, hidden]
//   model.layers.{i}.mlp.down_proj.weight              [hidden, intermediate]
//   model.norm.weight                                  [hidden]
//   lm_head.weight                                     [vocab, hidden]  (absent when tied)
// Linear weights are [out_features, in_features] row-major, as torch.nn.Linear stores them
// (y = x · Wᵀ). A Weights object holds views over memory it keeps alive: the memory-mapped
// safetensors files of a checkpoint (load_weights) or buffers of random values (make_dummy_weights,
// src/model/dummy_weights.h). Views may differ in dtype (f32 / f16 / bf16) from tensor to tensor.
// Tested by tests/unit/model/test_weights.cpp (weight table against the parameter lists of the
// transformers models, loading of checkpoints saved by transformers, every refusal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/model_config.h"
#include "kascade/status.h"

namespace kascade {

// A read-only view of a dense row-major tensor.
struct TensorView {
  const void* data = nullptr;  // [shape...] elements of dtype; null only when numel() == 0 or unset
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  int64_t numel() const {  // 1 for rank 0
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Element `flat_index` (row-major) as float.
  float load(int64_t flat_index) const { return load_as_float(data, dtype, flat_index); }
  bool is_set() const { return data != nullptr || !shape.empty(); }
};

struct NamedTensor {
  std::string name;
  TensorView view;
};

// "[4096, 128]".
std::string shape_to_string(const std::vector<int64_t>& shape);

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// The weight table of config's architecture, in order: embeddings, layers 0..N-1 (each in the
// order of the table above), final norm, lm_head (unless tied). Validates the config first.
Result<std::vector<WeightSpec>> expected_weights(const ModelConfig& config);

// Views of one decoder layer. q_norm / k_norm are unset (is_set() false) for Llama.
struct LayerWeights {
  TensorView input_layernorm;           // [hidden]
  TensorView q_proj;                    // [H·d, hidden]
  TensorView k_proj;                    // [G·d, hidden]
  TensorView v_proj;                    // [G·d, hidden]
  TensorView o_proj;                    // [hidden, H·d]
  TensorView q_norm;                    // [d] (Qwen3)
  TensorView k_norm;                    // [d] (Qwen3)
  TensorView post_attention_layernorm;  // [hidden]
  TensorView gate_proj;                 // [intermediate, hidden]
  TensorView up_proj;                   // [intermediate, hidden]
  TensorView down_proj;                 // [hidden, intermediate]
};

struct WeightsOptions {
  // Tensors the architecture does not use are always listed in unexpected_tensors(). Those that
  // are known to be harmless (`*.rotary_emb.inv_freq` buffers, `lm_head.weight` of a tied model)
  // never stop a load; any other one is refused (naming it) unless this is true — a checkpoint
  // carrying, say, `q_proj.bias` under a config without attention_bias would otherwise run wrong.
  bool allow_unexpected_tensors = false;
};

class Weights {
 public:
  // Checks `tensors` against expected_weights(config): every expected name present, with the
  // expected shape; names unique; unexpected names handled per `options`. `keepalive` owns the
  // memory the views point into (it is held as long as this object or a copy lives).
  static Result<Weights> from_tensors(const ModelConfig& config, std::vector<NamedTensor> tensors,
                                      std::shared_ptr<const void> keepalive, WeightsOptions options = {});

  const ModelConfig& config() const { return config_; }
  const TensorView& embed_tokens() const { return embed_tokens_; }  // [vocab, hidden]
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }  // 0 <= i < layers
  const TensorView& final_norm() const { return final_norm_; }  // [hidden] (model.norm.weight)
  const TensorView& lm_head() const { return lm_head_; }        // [vocab, hidden]; embed_tokens when tied

  // The expected tensors in expected_weights() order (lm_head omitted when tied): what a writer saves.
  const std::vector<NamedTensor>& tensors() const { return tensors_; }
  // A tensor of the table by its Hugging Face name; NotFound naming it otherwise.
  Result<TensorView> find(std::string_view name) const;
  // Tensors of the source that the architecture does not use, sorted.
  const std::vector<std::string>& unexpected_tensors() const { return unexpected_; }
  // Bytes of all expected tensors.
  size_t total_bytes() const;

 private:
  ModelConfig config_;
  std::vector<NamedTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name → position in tensors_
  std::vector<std::string> unexpected_;
  TensorView embed_tokens_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  std::shared_ptr<const void> keepalive_;
};

// Loads the weights of a Hugging Face checkpoint: `path` is a model directory (model.safetensors,
// else model.safetensors.index.json and its shards), a .safetensors file or an index .json file.
// The files are memory-mapped read-only and validated (src/model/safetensors.h); a missing tensor
// (NotFound), a wrong shape (InvalidArgument) or an unsupported dtype (Unsupported) is refused
// naming the tensor and, for shape, both shapes.
Result<Weights> load_weights(const ModelConfig& config, const std::filesystem::path& path,
                             WeightsOptions options = {});

}  // namespace kascade
