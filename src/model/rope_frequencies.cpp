// rope_frequencies.cpp — RoPE inverse frequencies and attention scaling
// (src/model/rope_frequencies.h). Each branch mirrors the transformers function named beside it.
// Tested by tests/unit/model/test_rope_frequencies.cpp against transformers' own values.
#include "model/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kascade {
namespace {

// theta^(-2i/d) for i in [0, d/2)   (LlamaRotaryEmbedding.compute_default_rope_parameters)
std::vector<double> default_inv_freq(double theta, int64_t dim) {
  std::vector<double> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    inv[static_cast<size_t>(i)] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
  return inv;
}

// _compute_llama3_parameters
void apply_llama3(const RopeScaling& r, std::vector<double>& inv) {
  const double old_context = static_cast<double>(r.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / r.low_freq_factor;
  const double high_freq_wavelen = old_context / r.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      f = f / r.factor;
    } else if (!(wavelen < high_freq_wavelen)) {  // medium frequency: smooth interpolation
      const double smooth = (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f = (1.0 - smooth) * f / r.factor + smooth * f;
    }
  }
}

// get_mscale inside _compute_yarn_parameters.
double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

// find_correction_dim inside _compute_yarn_parameters.
double yarn_correction_dim(double num_rotations, double dim, double base, double max_positions) {
  return (dim * std::log(max_positions / (num_rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
}

// _compute_yarn_parameters; returns the attention factor.
double apply_yarn(const RopeScaling& r, double theta, int64_t dim, std::vector<double>& inv) {
  double attention_factor;
  if (r.attention_factor) {
    attention_factor = *r.attention_factor;
  } else if (r.mscale.value_or(0.0) != 0.0 && r.mscale_all_dim.value_or(0.0) != 0.0) {
    attention_factor = yarn_get_mscale(r.factor, *r.mscale) / yarn_get_mscale(r.factor, *r.mscale_all_dim);
  } else {
    attention_factor = yarn_get_mscale(r.factor, 1.0);
  }
  const double d = static_cast<double>(dim);
  const double max_positions = static_cast<double>(r.original_max_position_embeddings);
  double low = yarn_correction_dim(r.beta_fast, d, theta, max_positions);
  double high = yarn_correction_dim(r.beta_slow, d, theta, max_positions);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, d - 1.0);
  if (low == high) high += 0.001;  // linear_ramp_factor: "prevent singularity"
  for (size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1.0 - ramp;
    const double extrapolation = inv[i];
    const double interpolation = inv[i] / r.factor;
    inv[i] = interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return attention_factor;
}

}  // namespace

Result<RopeFrequencies> compute_rope_frequencies(const ModelConfig& config) {
  KC_RETURN_IF_ERROR(validate_model_config(config));
  std::vector<double> inv = default_inv_freq(config.rope_theta, config.head_dim);
  double attention_scaling = 1.0;
  switch (config.rope.type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
      for (double& f : inv) f /= config.rope.factor;
      break;
    case RopeType::kLlama3:
      apply_llama3(config.rope, inv);
      break;
    case RopeType::kYarn:
      attention_scaling = apply_yarn(config.rope, config.rope_theta, config.head_dim, inv);
      break;
  }
  RopeFrequencies out;
  out.inv_freq.reserve(inv.size());
  for (double f : inv) out.inv_freq.push_back(static_cast<float>(f));
  out.attention_scaling = static_cast<float>(attention_scaling);
  if (!std::isfinite(out.attention_scaling) || !(out.attention_scaling > 0.0f))
    return invalid_argument("rope yarn attention scaling is ", attention_scaling, "; expected a positive number");
  return out;
}

}  // namespace kascade
