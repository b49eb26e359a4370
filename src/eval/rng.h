// eval/rng.h — the task suite's deterministic PRNG (xoshiro256** seeded through splitmix64) and
// stable 64-bit hashing. Every draw is defined here (no std:: distributions, whose output
// differs between standard libraries), so a sample is identical on every platform.
// Tested by tests/unit/eval/test_rng.cpp (reference values, range and uniformity checks).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kascade::eval {

// FNV-1a 64 of `text`, continued from `basis`.
uint64_t fnv1a64(std::string_view text, uint64_t basis = 0xcbf29ce484222325ULL);

// splitmix64 finaliser: a bijective mix of a 64-bit value.
uint64_t mix64(uint64_t x);

class DetRng {
 public:
  explicit DetRng(uint64_t seed);

  uint64_t next_u64();
  // Uniform in [0, n); n > 0 (n == 0 returns 0). Lemire's multiply-shift with rejection.
  uint64_t below(uint64_t n);
  // Uniform in [lo, hi]; lo <= hi.
  int64_t range(int64_t lo, int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double unit();

  // Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(below(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  uint64_t s_[4];
};

}  // namespace kascade::eval
