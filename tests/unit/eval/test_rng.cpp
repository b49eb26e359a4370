// tests/unit/eval/test_rng.cpp — the task suite's PRNG and hash against reference values computed
// by an independent Python implementation of splitmix64-seeded xoshiro256** and FNV-1a (the
// published FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c), plus range, uniformity and permutation checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "eval/rng.h"

namespace kascade::eval {
namespace {

TEST(EvalRng, MatchesReferenceSequence) {
  DetRng r42(42);
  EXPECT_EQ(r42.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(r42.next_u64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(r42.next_u64(), 0xae17533239e499a1ULL);
  EXPECT_EQ(r42.next_u64(), 0xecb8ad4703b360a1ULL);
  DetRng r0(0);
  EXPECT_EQ(r0.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(r0.next_u64(), 0xbf6e1f784956452aULL);
}

TEST(EvalRng, Fnv1aReferenceValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("kascade"), 0x9518daa739559a0dULL);
}

TEST(EvalRng, BelowStaysInRangeAndIsRoughlyUniform) {
  DetRng rng(7);
  constexpr int kBuckets = 7, kDraws = 70000;
  int counts[kBuckets] = {};
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = rng.below(kBuckets);
    ASSERT_LT(v, static_cast<uint64_t>(kBuckets));
    ++counts[v];
  }
  // Chi-square with 6 degrees of freedom; 22.46 is the 0.999 quantile.
  double chi2 = 0.0;
  for (const int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 22.46);
  EXPECT_EQ(rng.below(0), 0u);
  EXPECT_EQ(rng.below(1), 0u);
}

TEST(EvalRng, RangeAndUnit) {
  DetRng rng(9);
  bool saw_lo = false, saw_hi = false;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = rng.range(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    saw_lo |= v == -3;
    saw_hi |= v == 3;
    const double u = rng.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_TRUE(saw_lo);
  EXPECT_TRUE(saw_hi);
  EXPECT_EQ(rng.range(5, 5), 5);
}

TEST(EvalRng, ShuffleIsADeterministicPermutation) {
  std::vector<int> a(100), b(100);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  DetRng r1(123), r2(123);
  r1.shuffle(a);
  r2.shuffle(b);
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  int fixed_points = 0;
  for (int i = 0; i < 100; ++i) fixed_points += a[static_cast<size_t>(i)] == i;
  EXPECT_LT(fixed_points, 10);  // a shuffle that does nothing would leave 100
}

}  // namespace
}  // namespace kascade::eval
