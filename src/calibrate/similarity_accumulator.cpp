// similarity_accumulator.cpp — SimilarityAccumulator (DESIGN.md §2.5): streams pooled scores unit
// by unit and layer by layer, keeps only the Top-k_cal index sets of earlier layers, and reduces
// the mass ratio with a min over units and a mean over prompts.
// Tested by tests/unit/calibrate/test_similarity.cpp (against a direct recomputation that holds
// every S of every layer).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kascade/calibration.h"
#include "ref/topk_ref.h"

namespace kascade::calib {

SimilarityAccumulator::SimilarityAccumulator(int32_t num_layers, int32_t num_kv_heads, int64_t k_cal)
    : num_layers_(num_layers), num_kv_heads_(num_kv_heads), k_cal_(k_cal) {
  const size_t n = static_cast<size_t>(num_layers) * num_layers * num_kv_heads * num_kv_heads;
  prompt_min_.assign(n, std::numeric_limits<double>::infinity());
  usable_units_.assign(static_cast<size_t>(num_layers) * num_kv_heads, 0);
  sum_over_prompts_.assign(n, 0.0);
}

Result<SimilarityAccumulator> SimilarityAccumulator::create(int32_t num_layers, int32_t num_kv_heads,
                                                            int64_t k_cal) {
  KC_CHECK_ARG(num_layers >= 1, "similarity: num_layers is ", num_layers, "; expected >= 1");
  KC_CHECK_ARG(num_kv_heads >= 1, "similarity: num_kv_heads is ", num_kv_heads, "; expected >= 1");
  KC_CHECK_ARG(k_cal >= 1, "similarity: k_cal is ", k_cal, "; expected >= 1");
  // The [N, N, G, G] tables must stay addressable; 4096 layers x 256 heads is far beyond any model.
  KC_CHECK_ARG(num_layers <= 4096 && num_kv_heads <= 256, "similarity: ", num_layers, " layers x ",
               num_kv_heads, " KV heads is larger than supported (4096 x 256)");
  return SimilarityAccumulator(num_layers, num_kv_heads, k_cal);
}

size_t SimilarityAccumulator::sim_index(int32_t a, int32_t b, int32_t ga, int32_t gb) const {
  return ((static_cast<size_t>(a) * num_layers_ + b) * num_kv_heads_ + ga) * num_kv_heads_ + gb;
}

void SimilarityAccumulator::reset_prompt() {
  in_prompt_ = false;
  prompt_name_.clear();
  units_.clear();
  std::fill(prompt_min_.begin(), prompt_min_.end(), std::numeric_limits<double>::infinity());
  std::fill(usable_units_.begin(), usable_units_.end(), 0);
}

Status SimilarityAccumulator::begin_prompt(std::string_view prompt_name) {
  KC_CHECK_ARG(!in_prompt_, "similarity: begin_prompt('", prompt_name, "') while prompt '", prompt_name_,
               "' is still open (call end_prompt or discard_prompt)");
  reset_prompt();
  in_prompt_ = true;
  prompt_name_ = std::string(prompt_name);
  return ok_status();
}

void SimilarityAccumulator::discard_prompt() { reset_prompt(); }

Status SimilarityAccumulator::add(int64_t unit_id, int32_t layer, const UnitScores& in) {
  KC_CHECK_ARG(in_prompt_, "similarity: add(unit ", unit_id, ", layer ", layer, ") outside a prompt");
  const std::string where = detail::concat("similarity: prompt '", prompt_name_, "', unit ", unit_id,
                                           ", layer ", layer);
  KC_CHECK_ARG(layer >= 0 && layer < num_layers_, where, ": layer out of range [0, ", num_layers_, ")");
  KC_CHECK_ARG(in.scores != nullptr, where, ": scores is null");
  KC_CHECK_ARG(in.num_candidates >= 1, where, ": num_candidates is ", in.num_candidates,
               "; a unit needs >= 1 candidate (prefill tile 0 is not a unit)");
  const int64_t stride = in.row_stride == 0 ? in.num_candidates : in.row_stride;
  KC_CHECK_ARG(stride >= in.num_candidates, where, ": row_stride ", in.row_stride, " < num_candidates ",
               in.num_candidates);

  auto it = units_.find(unit_id);
  if (it == units_.end()) {
    KC_CHECK_ARG(layer == 0, where, ": the first layer of a unit must be 0");
  } else {
    const Unit& unit = it->second;
    KC_CHECK_ARG(unit.next_layer < num_layers_, where, ": the unit already has all ", num_layers_, " layers");
    KC_CHECK_ARG(layer == unit.next_layer, where, ": expected layer ", unit.next_layer,
                 " next (layers of a unit arrive in order)");
    KC_CHECK_ARG(in.num_candidates == unit.num_candidates, where, ": num_candidates is ", in.num_candidates,
                 " but layer 0 of this unit had ", unit.num_candidates);
  }

  const int32_t G = num_kv_heads_;
  const int64_t n = in.num_candidates;
  for (int32_t g = 0; g < G; ++g) {
    const float* row = in.scores + g * stride;
    for (int64_t j = 0; j < n; ++j) {
      KC_CHECK_ARG(std::isfinite(row[j]) && row[j] >= 0.0f, where, ": scores[", g, "][", j, "] = ", row[j],
                   "; pooled scores must be finite and >= 0");
    }
    if (in.local_mass != nullptr) {
      const float lt = in.local_mass[g];
      KC_CHECK_ARG(std::isfinite(lt) && lt >= 0.0f, where, ": local_mass[", g, "] = ", lt,
                   "; must be finite and >= 0");
    }
  }

  // I^b_{g,u} for every group, into a scratch buffer first so that a failure changes nothing.
  const int64_t k = std::min(k_cal_, n);
  std::vector<int32_t> topk_b(static_cast<size_t>(G) * k);  // [G, k]
  for (int32_t g = 0; g < G; ++g) {
    Status s = ref::topk_select_ref(in.scores + g * stride, n, k, topk_b.data() + static_cast<size_t>(g) * k);
    if (!s.ok()) return s.with_context(detail::concat(where, ", KV head ", g));
  }

  if (it == units_.end()) {
    Unit unit;
    unit.num_candidates = n;
    unit.k = k;
    unit.topk.resize(static_cast<size_t>(num_layers_) * G * k);
    it = units_.emplace(unit_id, std::move(unit)).first;
  }
  Unit& unit = it->second;
  std::copy(topk_b.begin(), topk_b.end(), unit.topk.begin() + static_cast<ptrdiff_t>(layer) * G * k);

  const int32_t b = layer;
  for (int32_t gb = 0; gb < G; ++gb) {
    const float* row = in.scores + gb * stride;
    const double local = in.local_mass != nullptr ? static_cast<double>(in.local_mass[gb]) : 0.0;
    auto mass_of = [&](const int32_t* indices) {  // indices: [k]
      double sum = 0.0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(row[indices[i]]);
      return sum + local;
    };
    const double denominator = mass_of(unit.topk.data() + (static_cast<size_t>(b) * G + gb) * k);
    if (denominator == 0.0) continue;  // no pooled mass at (b, gb) for this unit: skipped
    ++usable_units_[static_cast<size_t>(b) * G + gb];
    for (int32_t a = 0; a <= b; ++a) {
      for (int32_t ga = 0; ga < G; ++ga) {
        const double ratio = mass_of(unit.topk.data() + (static_cast<size_t>(a) * G + ga) * k) / denominator;
        double& slot = prompt_min_[sim_index(a, b, ga, gb)];
        slot = std::min(slot, ratio);
      }
    }
  }

  ++unit.next_layer;
  if (unit.next_layer == num_layers_) {
    unit.topk.clear();
    unit.topk.shrink_to_fit();
  }
  return ok_status();
}

Status SimilarityAccumulator::end_prompt() {
  KC_CHECK_ARG(in_prompt_, "similarity: end_prompt() outside a prompt");
  const std::string where = detail::concat("similarity: prompt '", prompt_name_, "'");
  Status failure;
  if (units_.empty()) {
    failure = invalid_argument(where, " has no usable unit: no unit was recorded");
  }
  for (const auto& [id, unit] : units_) {
    if (!failure.ok()) break;
    if (unit.next_layer != num_layers_) {
      failure = invalid_argument(where, ": unit ", id, " has ", unit.next_layer, " of ", num_layers_, " layers");
    }
  }
  for (int32_t b = 0; b < num_layers_ && failure.ok(); ++b) {
    for (int32_t gb = 0; gb < num_kv_heads_ && failure.ok(); ++gb) {
      if (usable_units_[static_cast<size_t>(b) * num_kv_heads_ + gb] == 0) {
        failure = invalid_argument(where, " has no usable unit for reuse layer ", b, ", KV head ", gb, ": all ",
                                   units_.size(), " units have zero pooled mass (denominator 0) there");
      }
    }
  }
  if (!failure.ok()) {
    reset_prompt();
    return failure;
  }
  for (int32_t a = 0; a < num_layers_; ++a) {
    for (int32_t b = a; b < num_layers_; ++b) {
      for (int32_t ga = 0; ga < num_kv_heads_; ++ga) {
        for (int32_t gb = 0; gb < num_kv_heads_; ++gb) {
          const size_t i = sim_index(a, b, ga, gb);
          sum_over_prompts_[i] += prompt_min_[i];
        }
      }
    }
  }
  ++num_prompts_;
  reset_prompt();
  return ok_status();
}

Result<std::vector<double>> SimilarityAccumulator::mean_similarity() const {
  if (num_prompts_ == 0) return invalid_argument("similarity: no prompt has finished");
  std::vector<double> mean(sum_over_prompts_.size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = sum_over_prompts_[i] / static_cast<double>(num_prompts_);
  return mean;
}

}  // namespace kascade::calib
