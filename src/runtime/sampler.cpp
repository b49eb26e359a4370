// src/runtime/sampler.cpp — temperature / top-k / top-p / greedy sampling (src/runtime/sampler.h).
// Tested by tests/unit/runtime/test_sampler.cpp.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ref/ops_ref.h"

namespace kascade::runtime {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Status validate_sampler(const SamplerConfig& c) {
  KC_CHECK_ARG(std::isfinite(c.temperature) && c.temperature >= 0.0f, "sampler: temperature ", c.temperature,
               " must be finite and >= 0 (0 = greedy)");
  KC_CHECK_ARG(c.top_k >= 0, "sampler: top_k ", c.top_k, " must be >= 0 (0 = off)");
  KC_CHECK_ARG(c.top_p > 0.0f && c.top_p <= 1.0f, "sampler: top_p ", c.top_p, " must be in (0, 1]");
  return ok_status();
}

Result<std::vector<Candidate>> sampling_distribution(const float* logits, int64_t n, const SamplerConfig& config) {
  KC_RETURN_IF_ERROR(validate_sampler(config));
  KC_CHECK_ARG(config.temperature > 0.0f, "sampler: the sampling distribution needs temperature > 0");
  KC_CHECK_ARG(logits != nullptr && n > 0 && n <= std::numeric_limits<int32_t>::max(),
               "sampler: logits null or n = ", n, " out of range");
  std::vector<float> probs(n);
  KC_RETURN_IF_ERROR(ref::softmax_ref(logits, n, config.temperature, probs.data()));
  std::vector<int32_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  const auto by_rank = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const int64_t keep_k = config.top_k > 0 ? std::min<int64_t>(config.top_k, n) : n;
  if (keep_k < n) {
    std::partial_sort(order.begin(), order.begin() + keep_k, order.end(), by_rank);
    order.resize(keep_k);
  } else {
    std::sort(order.begin(), order.end(), by_rank);
  }
  // Renormalise over the top-k set, then cut to the nucleus.
  double kept_mass = 0.0;
  for (int32_t t : order) kept_mass += probs[t];
  std::vector<Candidate> out;
  out.reserve(order.size());
  double cumulative = 0.0;
  for (int32_t t : order) {
    const double p = probs[t] / kept_mass;
    out.push_back(Candidate{t, p});
    cumulative += p;
    if (config.top_p < 1.0f && cumulative >= static_cast<double>(config.top_p)) break;
  }
  double total = 0.0;
  for (const Candidate& c : out) total += c.prob;
  for (Candidate& c : out) c.prob /= total;
  return out;
}

int32_t pick_candidate(const std::vector<Candidate>& candidates, double u) {
  double cumulative = 0.0;
  for (const Candidate& c : candidates) {
    cumulative += c.prob;
    if (u < cumulative) return c.token;
  }
  return candidates.empty() ? 0 : candidates.back().token;
}

Sampler::Sampler(const SamplerConfig& config, uint64_t stream)
    : config_(config), rng_(splitmix64(config.seed ^ splitmix64(stream))) {}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

Result<int32_t> Sampler::sample(const float* logits, int64_t n) {
  KC_RETURN_IF_ERROR(validate_sampler(config_));
  if (config_.temperature == 0.0f) return ref::argmax_ref(logits, n);
  KC_ASSIGN_OR_RETURN(auto candidates, sampling_distribution(logits, n, config_));
  return pick_candidate(candidates, next_uniform());
}

}  // namespace kascade::runtime
