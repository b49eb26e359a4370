// src/model/model.h — the model object of the CPU runtime: config + weights + RoPE tables, with the
// linear weights prepared for cblas_sgemm.
//
// Weight widening (decided here, documented for docs/perf.md): the runtime computes in fp32.
// f32 weights are used in place (zero copy from the memory-mapped safetensors). f16 / bf16 linear
// weights (q/k/v/o, gate/up/down, lm_head) are widened to fp32 once at load time when their fp32
// size fits `widen_budget_bytes` (default 8 GiB of the 24 GB machine: every model up to ~2B
// parameters — the tiny and 20–40M benchmark models, Llama-3.2-1B, Qwen3-1.7B), so each matmul is
// one sgemm over resident fp32. Larger models keep their 16-bit views and matmul_ref widens
// ~4 MiB row panels per call (src/ref/ops_ref.h): decode then reads 2 bytes per weight from the
// file cache plus a cache-resident panel, instead of needing 4 bytes per weight of RAM (an 8B model
// would need 32 GB). Norm weights and the embedding table are always read in place (they are
// read per row, not multiplied).
//
// Tested through the forward pass: tests/unit/model/test_forward_reference.cpp (against an fp64
// transformer written in the test, for f32 / f16 / bf16 weights, widened and panel paths) and
// tests/unit/model/test_forward_hf_parity.cpp (Hugging Face logits).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kascade/model_config.h"
#include "kascade/status.h"
#include "kascade/weights.h"
#include "model/rope_frequencies.h"
#include "ref/ops_ref.h"

namespace kascade {

struct ModelOptions {
  // Widen 16-bit linear weights to fp32 at load time when their fp32 size is at most this.
  int64_t widen_budget_bytes = int64_t{8} << 30;
};

// One decoder layer, ready for the forward pass.
struct ModelLayer {
  ref::WeightMatrix q_proj, k_proj, v_proj, o_proj;  // [H·d, hidden], [G·d, hidden] ×2, [hidden, H·d]
  ref::WeightMatrix gate_proj, up_proj, down_proj;   // [I, hidden] ×2, [hidden, I]
  TensorView input_layernorm;                        // [hidden]
  TensorView post_attention_layernorm;               // [hidden]
  TensorView q_norm, k_norm;                         // [d] (Qwen3; unset for Llama)
};

class Model {
 public:
  // Validates the config, computes the RoPE tables, prepares the weights (widening per options).
  static Result<std::unique_ptr<Model>> create(Weights weights, const ModelOptions& options = {});
  Model(const Model&) = delete;  // the matrices point into widened_storage_
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return weights_.config(); }
  const Weights& weights() const { return weights_; }
  const RopeFrequencies& rope() const { return rope_; }
  // Softmax scale σ = 1 / sqrt(head_dim) (Llama and Qwen3).
  float attention_scale() const { return attention_scale_; }

  const ModelLayer& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  const TensorView& embed_tokens() const { return weights_.embed_tokens(); }  // [vocab, hidden]
  const TensorView& final_norm() const { return weights_.final_norm(); }      // [hidden]
  const ref::WeightMatrix& lm_head() const { return lm_head_; }                // [vocab, hidden]

  // Whether 16-bit linear weights were widened at load, and the bytes those copies hold.
  bool widened() const { return widened_; }
  int64_t widened_bytes() const { return widened_bytes_; }

 private:
  explicit Model(Weights weights) : weights_(std::move(weights)) {}
  Result<ref::WeightMatrix> prepare(const TensorView& view, const char* what, int64_t layer);

  Weights weights_;
  RopeFrequencies rope_;
  float attention_scale_ = 1.0f;
  std::vector<ModelLayer> layers_;
  ref::WeightMatrix lm_head_;
  bool widened_ = false;
  int64_t widened_bytes_ = 0;
  std::vector<std::vector<float>> widened_storage_;  // fp32 copies the matrices point into
};

}  // namespace kascade
