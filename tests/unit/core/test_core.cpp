// test_core.cpp — Status, dtype conversion and the budget k(n) (src/core).
// dtype: exhaustive over all 65536 fp16 / bf16 patterns against a double-precision reference of
// round-to-nearest-even. budget: against exact rational arithmetic for every n < 2^20.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kascade/budget.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade {
namespace {

TEST(Status, CarriesCodeAndMessage) {
  Status s = invalid_argument("q.head_dim is ", 96, "; expected 64 or 128");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "InvalidArgument: q.head_dim is 96; expected 64 or 128");
  s.with_context("layer 3");
  EXPECT_EQ(s.message(), "layer 3: q.head_dim is 96; expected 64 or 128");
  EXPECT_TRUE(ok_status().ok());
}

Result<int> half_of(int x) {
  if (x % 2) return invalid_argument(x, " is odd");
  return x / 2;
}
Status use_half(int x, int* out) {
  KC_ASSIGN_OR_RETURN(*out, half_of(x));
  return ok_status();
}

TEST(Status, ResultAndMacros) {
  int v = 0;
  EXPECT_TRUE(use_half(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = use_half(7, &v);
  EXPECT_EQ(s.message(), "7 is odd");
  Result<int> from_ok(ok_status());
  EXPECT_EQ(from_ok.status().code(), StatusCode::kInternal);
}

// Independent reference: round a double to the nearest representable value of a binary format
// with `mant_bits` explicit mantissa bits and exponent range [emin, emax], ties to even.
double round_format(double x, int mant_bits, int emin, int emax) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const double a = std::fabs(x);
  int e = std::ilogb(a);
  if (e < emin) e = emin;  // subnormal spacing
  const double ulp = std::ldexp(1.0, e - mant_bits);
  double q = a / ulp;
  double r = std::nearbyint(q);  // default rounding mode: to nearest even
  double out = r * ulp;
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mant_bits), emax);
  const double overflow_threshold = max_finite + std::ldexp(1.0, emax - mant_bits - 1);
  if (a >= overflow_threshold) out = std::numeric_limits<double>::infinity();
  return std::copysign(out, x);
}

TEST(DType, HalfRoundTripIsExactForAllPatterns) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    const float f = half_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    EXPECT_EQ(float_to_half(f).bits, h.bits) << "pattern " << bits;
  }
}

TEST(DType, HalfRoundingMatchesReference) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 17);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng));
    const double expected = round_format(x, 10, -14, 15);
    EXPECT_EQ(static_cast<double>(half_to_float(float_to_half(x))), expected) << "x = " << x;
  }
  // Midpoints between consecutive halves round to even.
  for (uint32_t bits = 0; bits < 0x7bff; ++bits) {
    const double lo = half_to_float(Half{static_cast<uint16_t>(bits)});
    const double hi = half_to_float(Half{static_cast<uint16_t>(bits + 1)});
    const float mid = static_cast<float>((lo + hi) / 2);
    if (static_cast<double>(mid) != (lo + hi) / 2) continue;
    const uint16_t expect = (bits % 2 == 0) ? bits : bits + 1;
    EXPECT_EQ(float_to_half(mid).bits, expect);
  }
}

TEST(DType, BFloat16RoundingMatchesReference) {
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-120, 120);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng));
    const double expected = round_format(x, 7, -126, 127);
    EXPECT_EQ(static_cast<double>(bf16_to_float(float_to_bf16(x))), expected) << "x = " << x;
  }
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const BFloat16 b{static_cast<uint16_t>(bits)};
    const float f = bf16_to_float(b);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f).bits, b.bits);
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, ParseAndSizes) {
  EXPECT_EQ(*parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(*parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(*parse_dtype("float32"), DType::kF32);
  EXPECT_FALSE(parse_dtype("int8").ok());
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
}

// ceil(n * rho) by its definition: the least integer m with m * 1e6 >= n * rho_ppm.
int64_t exact_ceil(int64_t n, int64_t rho_ppm) {
  const __int128 num = static_cast<__int128>(n) * rho_ppm;
  int64_t m = static_cast<int64_t>(num / 1000000);
  while (static_cast<__int128>(m) * 1000000 < num) ++m;
  while (m > 0 && static_cast<__int128>(m - 1) * 1000000 >= num) --m;
  return m;
}

TEST(Budget, MatchesExactRationalArithmetic) {
  for (int64_t rho : {100000LL, 1LL, 25000LL, 333333LL, 999999LL, 1000000LL}) {
    for (int64_t k_round : {1LL, 128LL}) {
      const Budget b{rho, 128, k_round};
      for (int64_t n = 0; n < (1 << 20); ++n) {
        int64_t expect = std::max<int64_t>(128, exact_ceil(n, rho));
        expect = (expect + k_round - 1) / k_round * k_round;
        expect = std::min(n, expect);
        if (n == 0) expect = 0;
        ASSERT_EQ(budget_k(n, b), expect) << "n=" << n << " rho_ppm=" << rho << " k_round=" << k_round;
      }
    }
  }
}

TEST(Budget, SaturatesAndValidates) {
  EXPECT_EQ(budget_k(1000, Budget{1000000, 0, 1}), 1000);  // rho = 1 selects every key
  EXPECT_EQ(budget_k(100, Budget{100000, 128, 1}), 100);   // k_min >= n selects every key
  EXPECT_EQ(budget_k(2000, Budget{100000, 128, 1}), 200);
  EXPECT_EQ(budget_k(2001, Budget{100000, 128, 1}), 201);  // ceil, not floor
  EXPECT_FALSE(validate_budget(Budget{0, 128, 1}).ok());
  EXPECT_FALSE(validate_budget(Budget{1000001, 128, 1}).ok());
  EXPECT_FALSE(validate_budget(Budget{100000, -1, 1}).ok());
  EXPECT_FALSE(validate_budget(Budget{100000, 128, 0}).ok());
  EXPECT_TRUE(validate_budget(Budget{}).ok());
  EXPECT_EQ(*fraction_to_ppm(0.1), 100000);
  EXPECT_FALSE(fraction_to_ppm(0.0).ok());
  EXPECT_FALSE(fraction_to_ppm(1.5).ok());
}

TEST(Budget, DecodeRowWidthIsTheSmallestBucketHoldingK) {
  // Independent reference: the sorted set {2^m, 3*2^(m-1)} from 16 up, searched linearly.
  std::vector<int64_t> buckets;
  for (int64_t p = 16; p <= (int64_t{1} << 31); p *= 2) {
    buckets.push_back(p);
    buckets.push_back(p / 2 * 3);
  }
  std::sort(buckets.begin(), buckets.end());
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{16}, int64_t{17}, int64_t{24}, int64_t{25}, int64_t{154}, int64_t{192},
                    int64_t{193}, int64_t{3277}, int64_t{13108}, int64_t{1} << 20, (int64_t{1} << 20) + 1}) {
    const int64_t expect = *std::find_if(buckets.begin(), buckets.end(), [&](int64_t b) { return b >= std::max<int64_t>(k, 16); });
    EXPECT_EQ(decode_row_width(k), expect) << "k=" << k;
  }
  for (int64_t k = 1; k < 5000; ++k) {
    const int64_t w = decode_row_width(k);
    ASSERT_GE(w, k);
    ASSERT_LE(w, std::max<int64_t>(16, k + k / 2)) << "k=" << k << ": at most half again as wide";
  }
}

TEST(Budget, RollingTileBudgetAtBoundaries) {
  const Budget b{};
  EXPECT_EQ(tile_budget(0, 5000, b, true), 0);       // tile 0 has no candidates
  EXPECT_EQ(tile_budget(32, 5000, b, true), 32);     // all candidates while s_t <= k_min
  EXPECT_EQ(tile_budget(128, 5000, b, true), 128);
  EXPECT_EQ(tile_budget(160, 5000, b, true), 128);   // k_min binds
  EXPECT_EQ(tile_budget(1280, 5000, b, true), 128);  // s_t = k_min * 10: rho·s_t = k_min
  EXPECT_EQ(tile_budget(1312, 5000, b, true), 132);  // ceil(131.2)
  EXPECT_EQ(tile_budget(1312, 5000, b, false), 500); // non-rolling: k(n) = 500
  EXPECT_EQ(tile_budget(320, 5000, b, false), 320);  // capped by the candidates
}

}  // namespace
}  // namespace kascade
