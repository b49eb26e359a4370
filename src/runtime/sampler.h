// src/runtime/sampler.h — next-token sampling: greedy, temperature, top-k, top-p, seeded.
//
// Order of the transforms (as Hugging Face's generate applies its logits warpers): divide by the
// temperature, keep the top_k most likely tokens, keep the smallest most-likely prefix whose
// probability reaches top_p, renormalise, draw by inverse CDF with one uniform number. Tokens are
// ranked by probability, ties to the lower token id, so every step is deterministic given the
// uniform. temperature == 0 is greedy (argmax, ties to the lower id) and draws no number.
//
// Randomness: each Sampler owns a std::mt19937_64 (fully specified by the C++ standard, hence the
// same stream on every platform) seeded with splitmix64(seed, stream); the runtime gives each
// sequence of a batch its own stream (its index), so a sequence's tokens do not depend on the
// batch it runs in.
//
// Tested by tests/unit/runtime/test_sampler.cpp (hand-computed distributions, exact inverse-CDF
// picks, seeded reproducibility, and a chi-square check of empirical frequencies).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kascade/runtime.h"
#include "kascade/status.h"

namespace kascade::runtime {

using kascade::SamplerConfig;  // include/kascade/runtime.h

Status validate_sampler(const SamplerConfig& config);

struct Candidate {
  int32_t token = 0;
  double prob = 0.0;
};

// The distribution a non-greedy sampler draws from: the kept tokens in rank order (probability
// descending, ties to the lower id) with renormalised probabilities summing to 1.
// logits: [n] fp32, no NaN. config.temperature must be > 0.
Result<std::vector<Candidate>> sampling_distribution(const float* logits, int64_t n, const SamplerConfig& config);

// Inverse CDF: the first candidate whose cumulative probability exceeds u (u in [0, 1)); the last
// candidate when rounding leaves u above the total.
int32_t pick_candidate(const std::vector<Candidate>& candidates, double u);

class Sampler {
 public:
  Sampler(const SamplerConfig& config, uint64_t stream);
  // Next token from logits [n] fp32.
  Result<int32_t> sample(const float* logits, int64_t n);
  // Uniform in [0, 1) with 53 random bits (advances the stream).
  double next_uniform();

 private:
  SamplerConfig config_;
  std::mt19937_64 rng_;
};

}  // namespace kascade::runtime
