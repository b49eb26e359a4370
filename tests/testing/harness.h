// tests/testing/harness.h — the helpers every kascade test uses (research/style.md §10):
//   - seeds derived from the test's own name (never random_device), so failures reproduce;
//   - all_close(): shape-aware comparison with NaN/Inf position check and a worst-element report;
//   - within_naive_error(): the FlashAttention-3 tolerance rule, error <= 2 x a naive
//     same-precision implementation's error against an fp64 reference, plus a dtype atol;
//   - topk_sets_equivalent(): tie-aware comparison of Top-k index sets;
//   - GuardedBuffer: outputs with canary regions on both sides, pre-filled with NaN;
//   - KC_ASSERT_OK(status expression): fails the test with the expression and the status' message;
//   - test_temp_path(): temp-directory paths unique to the running test and process.
// The helpers are themselves tested by tests/unit/test_harness.cpp (they must catch the
// mistakes they exist to catch).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/status.h"

#define KC_ASSERT_OK(expr)                                           \
  do {                                                               \
    const ::kascade::Status kc_s_ = (expr);                          \
    ASSERT_TRUE(kc_s_.ok()) << #expr << ": " << kc_s_.to_string();   \
  } while (0)

namespace kascade::testing {

// A path in the system's temp directory unique to the running test and process:
// <tmp>/kascade_<Suite>_<Name>_<pid>_<name>. Tests that ctest runs in parallel (and two checkouts
// testing at once) never share a file. Nothing is created.
std::filesystem::path test_temp_path(const std::string& name);

// FNV-1a of "Suite.Name" of the running test, mixed with `salt` (case index).
uint64_t seed_from_test_name(uint64_t salt = 0);
std::mt19937_64 rng_for_test(uint64_t salt = 0);

// Fills with values uniform in [lo, hi), rounded through `dtype` (so the float copy equals what
// the 16-bit buffer holds).
std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo, float hi, DType dtype = DType::kF32);

// Packs floats into a byte buffer of `dtype` (round to nearest even).
std::vector<uint8_t> pack_as(const std::vector<float>& values, DType dtype);

// The lengths DESIGN.md §4 asks every kernel test to cover.
inline const std::vector<int>& awkward_lengths() {
  static const std::vector<int> lengths = {1, 31, 32, 33, 127, 129, 1000, 4097};
  return lengths;
}

// The awkward lengths up to `max_len`, as int32 sequence lengths (one varlen batch of the short ones).
inline std::vector<int32_t> awkward_lengths_up_to(int max_len) {
  std::vector<int32_t> out;
  for (int n : awkward_lengths()) {
    if (n <= max_len) out.push_back(n);
  }
  return out;
}

struct CompareOptions {
  double atol = 1e-5;
  double rtol = 1e-5;
};

// Default tolerances of a dtype for values of magnitude ~1: atol = rtol = 8 * unit roundoff
// (floored at 1e-6 for f32).
CompareOptions tolerance_for(DType dtype);

// Element-wise |got - ref| <= atol + rtol * |ref|; NaN/Inf must sit at the same positions with
// the same sign. On failure the message names the count of bad elements and the worst one with
// its multi-index in `shape` (row-major) and both values, plus max error, NMSE and cosine.
::testing::AssertionResult all_close(std::span<const float> got, std::span<const float> ref,
                                     const std::vector<int64_t>& shape, CompareOptions options);

// FA3's rule: max |got - ref64| <= 2 * max |naive - ref64| + atol, all three of the same shape.
// NaN/Inf positions of got must match ref64's.
::testing::AssertionResult within_naive_error(std::span<const float> got, std::span<const float> naive,
                                              std::span<const double> ref64,
                                              const std::vector<int64_t>& shape, double atol);

// Top-k sets: both sets have k = expected.size() distinct entries in [0, scores.size()); every
// index in one set and not the other has a score within eps_rel * |S_k| of the k-th largest score
// S_k (such elements are interchangeable). `got` may be in any order and must not hold -1.
::testing::AssertionResult topk_sets_equivalent(std::span<const int32_t> got,
                                                std::span<const int32_t> expected,
                                                std::span<const float> scores, double eps_rel);

// Counts elements that are NaN.
int64_t count_nan(std::span<const float> values);

// A buffer of T with a canary zone of kGuard elements on each side. The payload is pre-filled with
// NaN (floats) or 0xFF bytes (other types); intact() says whether the canaries survived.
template <typename T>
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 64;
  explicit GuardedBuffer(size_t n) : n_(n), storage_((n + 2 * kGuard) * sizeof(T)) {
    std::memset(storage_.data(), kCanaryByte, storage_.size());
    poison();
  }
  void poison() {
    if constexpr (std::is_floating_point_v<T>) {
      for (size_t i = 0; i < n_; ++i) data()[i] = std::numeric_limits<T>::quiet_NaN();
    } else {
      std::memset(static_cast<void*>(data()), 0xFF, n_ * sizeof(T));
    }
  }
  T* data() { return reinterpret_cast<T*>(storage_.data() + kGuard * sizeof(T)); }
  const T* data() const { return reinterpret_cast<const T*>(storage_.data() + kGuard * sizeof(T)); }
  size_t size() const { return n_; }
  std::span<T> span() { return {data(), n_}; }
  std::span<const T> span() const { return {data(), n_}; }
  bool intact() const {
    const size_t guard_bytes = kGuard * sizeof(T);
    for (size_t i = 0; i < guard_bytes; ++i) {
      if (storage_[i] != kCanaryByte) return false;
      if (storage_[storage_.size() - 1 - i] != kCanaryByte) return false;
    }
    return true;
  }

 private:
  static constexpr uint8_t kCanaryByte = 0xA5;
  size_t n_;
  std::vector<uint8_t> storage_;
};

}  // namespace kascade::testing
