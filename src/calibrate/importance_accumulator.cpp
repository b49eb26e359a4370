// importance_accumulator.cpp — ImportanceAccumulator (DESIGN.md §2.5): w_l = 1 − cos(x_l, x_l +
// attn_l) in fp64, mean over a prompt's tokens, then mean over prompts.
// Tested by tests/unit/calibrate/test_importance.cpp (hand-computed cosines, fp32 and bf16 rows,
// token and prompt averaging, refusals).
#include <algorithm>
#include <cmath>

#include "kascade/calibration.h"

namespace kascade::calib {

ImportanceAccumulator::ImportanceAccumulator(int32_t num_layers, int64_t hidden_size)
    : num_layers_(num_layers),
      hidden_size_(hidden_size),
      prompt_sum_(num_layers, 0.0),
      prompt_tokens_(num_layers, 0),
      sum_over_prompts_(num_layers, 0.0) {}

Result<ImportanceAccumulator> ImportanceAccumulator::create(int32_t num_layers, int64_t hidden_size) {
  KC_CHECK_ARG(num_layers >= 1, "importance: num_layers is ", num_layers, "; expected >= 1");
  KC_CHECK_ARG(hidden_size >= 1, "importance: hidden_size is ", hidden_size, "; expected >= 1");
  return ImportanceAccumulator(num_layers, hidden_size);
}

void ImportanceAccumulator::reset_prompt() {
  in_prompt_ = false;
  prompt_name_.clear();
  std::fill(prompt_sum_.begin(), prompt_sum_.end(), 0.0);
  std::fill(prompt_tokens_.begin(), prompt_tokens_.end(), 0);
}

Status ImportanceAccumulator::begin_prompt(std::string_view prompt_name) {
  KC_CHECK_ARG(!in_prompt_, "importance: begin_prompt('", prompt_name, "') while prompt '", prompt_name_,
               "' is still open (call end_prompt or discard_prompt)");
  reset_prompt();
  in_prompt_ = true;
  prompt_name_ = std::string(prompt_name);
  return ok_status();
}

void ImportanceAccumulator::discard_prompt() { reset_prompt(); }

Status ImportanceAccumulator::add(int32_t layer, const void* x, const void* attn, int64_t num_tokens,
                                  DType dtype) {
  KC_CHECK_ARG(in_prompt_, "importance: add(layer ", layer, ") outside a prompt");
  const std::string where = detail::concat("importance: prompt '", prompt_name_, "', layer ", layer);
  KC_CHECK_ARG(layer >= 0 && layer < num_layers_, where, ": layer out of range [0, ", num_layers_, ")");
  KC_CHECK_ARG(x != nullptr && attn != nullptr, where, ": x or attn is null");
  KC_CHECK_ARG(num_tokens >= 1, where, ": num_tokens is ", num_tokens, "; expected >= 1");
  KC_CHECK_ARG(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16, where,
               ": unknown dtype");

  const int64_t d = hidden_size_;
  double sum = 0.0;  // Σ over these tokens of 1 − cos
  for (int64_t t = 0; t < num_tokens; ++t) {
    double xx = 0.0, yy = 0.0, xy = 0.0;  // |x|², |x + attn|², x·(x + attn)
    for (int64_t c = 0; c < d; ++c) {
      const double xv = load_as_float(x, dtype, t * d + c);
      const double av = load_as_float(attn, dtype, t * d + c);
      KC_CHECK_ARG(std::isfinite(xv) && std::isfinite(av), where, ", token ", t, ", channel ", c,
                   ": non-finite value (x = ", xv, ", attn = ", av, ")");
      const double yv = xv + av;
      xx += xv * xv;
      yy += yv * yv;
      xy += xv * yv;
    }
    KC_CHECK_ARG(xx > 0.0, where, ", token ", t, ": x has zero norm; the cosine is undefined");
    KC_CHECK_ARG(yy > 0.0, where, ", token ", t, ": x + attn has zero norm; the cosine is undefined");
    sum += 1.0 - xy / (std::sqrt(xx) * std::sqrt(yy));
  }
  prompt_sum_[layer] += sum;
  prompt_tokens_[layer] += num_tokens;
  return ok_status();
}

Status ImportanceAccumulator::end_prompt() {
  KC_CHECK_ARG(in_prompt_, "importance: end_prompt() outside a prompt");
  const int64_t tokens = prompt_tokens_[0];
  Status failure;
  for (int32_t l = 0; l < num_layers_ && failure.ok(); ++l) {
    if (prompt_tokens_[l] == 0) {
      failure = invalid_argument("importance: prompt '", prompt_name_, "': layer ", l, " received no token");
    } else if (prompt_tokens_[l] != tokens) {
      failure = invalid_argument("importance: prompt '", prompt_name_, "': layer ", l, " received ",
                                 prompt_tokens_[l], " tokens but layer 0 received ", tokens);
    }
  }
  if (!failure.ok()) {
    reset_prompt();
    return failure;
  }
  for (int32_t l = 0; l < num_layers_; ++l) {
    sum_over_prompts_[l] += prompt_sum_[l] / static_cast<double>(prompt_tokens_[l]);
  }
  ++num_prompts_;
  reset_prompt();
  return ok_status();
}

Result<std::vector<double>> ImportanceAccumulator::mean_importance() const {
  if (num_prompts_ == 0) return invalid_argument("importance: no prompt has finished");
  std::vector<double> mean(num_layers_);
  for (int32_t l = 0; l < num_layers_; ++l) mean[l] = sum_over_prompts_[l] / static_cast<double>(num_prompts_);
  return mean;
}

}  // namespace kascade::calib
