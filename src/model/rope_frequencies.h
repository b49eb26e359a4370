// rope_frequencies.h — RoPE inverse frequencies and attention scaling of a model config, as
// transformers' rope init functions compute them (modeling_rope_utils.py, transformers 5.x):
//   default  LlamaRotaryEmbedding.compute_default_rope_parameters (Qwen3's is the same)
//            inv_freq[i] = theta^(-2i/d)
//   linear   _compute_linear_scaling_rope_parameters   inv_freq / factor
//   llama3   _compute_llama3_parameters   low frequencies / factor, high kept, smooth in between
//   yarn     _compute_yarn_parameters   ramp between interpolation and extrapolation over the
//            correction range of beta_fast..beta_slow rotations; attention_factor from
//            attention_factor, or mscale / mscale_all_dim, or 0.1·ln(factor) + 1
// The rotary embedding rotates pair i of a head by position · inv_freq[i] and multiplies cos and
// sin by attention_scaling, so q·k logits carry attention_scaling² (yarn's "mscale").
// Computed in double and rounded once to float (transformers computes in float32; the two agree
// to a few ulp). Tested by tests/unit/model/test_rope_frequencies.cpp against values recorded from
// transformers (tests/data/model/hf_configs.json, made by scripts/make_model_fixtures.py).
#pragma once

#include <vector>

#include "kascade/model_config.h"
#include "kascade/status.h"

namespace kascade {

struct RopeFrequencies {
  std::vector<float> inv_freq;     // [head_dim / 2]: angle of pair i at position p is p · inv_freq[i]
  float attention_scaling = 1.0f;  // multiplies cos and sin; 1 for every type but yarn
};

// Validates the config (validate_model_config) and computes its RoPE tables.
Result<RopeFrequencies> compute_rope_frequencies(const ModelConfig& config);

}  // namespace kascade
