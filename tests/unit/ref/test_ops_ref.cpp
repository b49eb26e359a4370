// test_ops_ref.cpp — the dense forward-pass ops of src/ref/ops_ref.h against straightforward fp64
// recomputations inside this file: matmul over f32 / f16 / bf16 weights (odd shapes, several
// panels, several matrices in one call), RMSNorm, RoPE (including YaRN's attention scaling),
// SiLU·mul, embedding gather, softmax, log_softmax, argmax; plus the input validation of each op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ref/ops_ref.h"
#include "testing/harness.h"

namespace kascade::ref {
namespace {

using kascade::testing::all_close;
using kascade::testing::GuardedBuffer;
using kascade::testing::pack_as;
using kascade::testing::random_floats;
using kascade::testing::rng_for_test;

// fp64 y = x · wᵀ and the bound Σ_k |x||w| per output (for the fp32 accumulation error bound).
void matmul_fp64(const std::vector<float>& x, int64_t m, const std::vector<float>& w, int64_t n, int64_t k,
                 std::vector<double>* y, std::vector<double>* abs_sum) {
  y->assign(m * n, 0.0);
  abs_sum->assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < k; ++c) {
        s += static_cast<double>(x[i * k + c]) * w[j * k + c];
        a += std::fabs(static_cast<double>(x[i * k + c]) * w[j * k + c]);
      }
      (*y)[i * n + j] = s;
      (*abs_sum)[i * n + j] = a;
    }
}

class MatmulDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulDtypes, MatchesFp64AcrossPanels) {
  const DType dtype = GetParam();
  struct Shape {
    int64_t m, n, k;
  };
  // n = 1100 with k = 1000 spans several 4 MiB panels for 16-bit weights (panel rows = 1048).
  const Shape shapes[] = {{1, 1, 1}, {3, 17, 31}, {33, 129, 64}, {7, 1100, 1000}, {1, 300, 257}};
  int case_index = 0;
  for (const Shape& s : shapes) {
    auto rng = rng_for_test(case_index++);
    const auto x = random_floats(rng, s.m * s.k, -1.0f, 1.0f);
    const auto w = random_floats(rng, s.n * s.k, -1.0f, 1.0f, dtype);  // already rounded to dtype
    const auto w_bytes = pack_as(w, dtype);
    GuardedBuffer<float> y(s.m * s.n);
    MatmulScratch scratch;
    ASSERT_TRUE(matmul_ref(x.data(), s.m, WeightMatrix{w_bytes.data(), dtype, s.n, s.k}, y.data(), &scratch).ok());
    ASSERT_TRUE(y.intact());
    std::vector<double> ref, bound;
    matmul_fp64(x, s.m, w, s.n, s.k, &ref, &bound);
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      // fp32 accumulation over k terms: |err| <= ~k·u·Σ|x w|; use 2k·2^-24 plus slack.
      const double tol = (2.0 * s.k + 8) * std::ldexp(1.0, -24) * bound[i] + 1e-30;
      ASSERT_LE(std::fabs(y.data()[i] - ref[i]), tol) << "m,n,k = " << s.m << "," << s.n << "," << s.k << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulDtypes, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Ops, MatmulManyMatchesFp64PerMatrix) {
  // q/k/v-like products of one input with mixed dtypes (one of them spanning two 16-bit panels).
  auto rng = rng_for_test();
  const int64_t m = 5, k = 1000;
  const int64_t rows[] = {64, 1100, 3};
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  const auto x = random_floats(rng, m * k, -1.0f, 1.0f);
  std::vector<std::vector<float>> w(3);
  std::vector<std::vector<uint8_t>> bytes(3);
  std::vector<WeightMatrix> mats;
  std::vector<GuardedBuffer<float>> ys;
  for (int i = 0; i < 3; ++i) {
    w[i] = random_floats(rng, rows[i] * k, -1.0f, 1.0f, dtypes[i]);
    bytes[i] = pack_as(w[i], dtypes[i]);
    mats.push_back(WeightMatrix{bytes[i].data(), dtypes[i], rows[i], k});
    ys.emplace_back(m * rows[i]);
  }
  float* const outs[] = {ys[0].data(), ys[1].data(), ys[2].data()};
  MatmulScratch scratch;
  ASSERT_TRUE(matmul_many_ref(x.data(), m, mats, outs, &scratch).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ys[i].intact());
    std::vector<double> ref, bound;
    matmul_fp64(x, m, w[i], rows[i], k, &ref, &bound);
    for (int64_t j = 0; j < m * rows[i]; ++j)
      ASSERT_LE(std::fabs(ys[i].data()[j] - ref[j]), (2.0 * k + 8) * std::ldexp(1.0, -24) * bound[j]) << i << " " << j;
  }
  // Input widths must agree.
  std::vector<float> narrow(7 * 999, 0.5f);
  const WeightMatrix mixed[] = {mats[0], WeightMatrix{narrow.data(), DType::kF32, 7, 999}};
  std::vector<float> y0(m * 64), y1(m * 7);
  float* const mixed_outs[] = {y0.data(), y1.data()};
  EXPECT_FALSE(matmul_many_ref(x.data(), m, mixed, mixed_outs, nullptr).ok());
  float* const too_few[] = {y0.data()};
  EXPECT_FALSE(matmul_many_ref(x.data(), m, mixed, too_few, nullptr).ok());
}

TEST(Ops, MatmulPanelRowsBoundsThePanel) {
  EXPECT_EQ(matmul_panel_rows(1000), (int64_t{4} << 20) / 4000);
  EXPECT_EQ(matmul_panel_rows(1 << 24), 16);  // never fewer than 16 rows
}

TEST(Ops, WidenWeightIsExact) {
  auto rng = rng_for_test();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const auto w = random_floats(rng, 5 * 7, -3.0f, 3.0f, dtype);
    const auto bytes = pack_as(w, dtype);
    std::vector<float> out(w.size(), -1.0f);
    ASSERT_TRUE(widen_weight_ref(WeightMatrix{bytes.data(), dtype, 5, 7}, out.data()).ok());
    EXPECT_EQ(out, w) << dtype_name(dtype);
  }
}

TEST(Ops, MatmulRejectsBadInput) {
  std::vector<float> x(4), y(4), w(4);
  EXPECT_FALSE(matmul_ref(x.data(), 1, WeightMatrix{nullptr, DType::kF32, 2, 2}, y.data(), nullptr).ok());
  EXPECT_FALSE(matmul_ref(x.data(), 1, WeightMatrix{w.data(), DType::kF32, 0, 2}, y.data(), nullptr).ok());
  EXPECT_FALSE(matmul_ref(x.data(), 0, WeightMatrix{w.data(), DType::kF32, 2, 2}, y.data(), nullptr).ok());
  EXPECT_FALSE(matmul_ref(x.data(), 1, WeightMatrix{w.data(), DType::kF32, 2, 2}, x.data(), nullptr).ok());
  EXPECT_FALSE(matmul_ref(nullptr, 1, WeightMatrix{w.data(), DType::kF32, 2, 2}, y.data(), nullptr).ok());
}

TEST(Ops, RmsnormMatchesFp64) {
  auto rng = rng_for_test();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int32_t dim : {1, 7, 64, 129}) {
      const int64_t rows = 5;
      const auto x = random_floats(rng, rows * dim, -4.0f, 4.0f);
      const auto w = random_floats(rng, dim, 0.5f, 1.5f, dtype);
      const auto w_bytes = pack_as(w, dtype);
      const float eps = 1e-6f;
      GuardedBuffer<float> out(rows * dim);
      ASSERT_TRUE(rmsnorm_ref(x.data(), rows, dim, w_bytes.data(), dtype, eps, out.data()).ok());
      ASSERT_TRUE(out.intact());
      std::vector<float> ref(rows * dim);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int32_t c = 0; c < dim; ++c) ss += static_cast<double>(x[r * dim + c]) * x[r * dim + c];
        const double inv = 1.0 / std::sqrt(ss / dim + eps);
        for (int32_t c = 0; c < dim; ++c) ref[r * dim + c] = static_cast<float>(x[r * dim + c] * inv * w[c]);
      }
      EXPECT_TRUE(all_close(out.span(), ref, {rows, dim}, {1e-6, 1e-6})) << dtype_name(dtype) << " dim " << dim;
    }
  }
}

TEST(Ops, RmsnormInPlaceAndHandValue) {
  // x = [3, 4]: mean square 12.5, 1/sqrt(12.5) = 0.28284271; weight [1, 2].
  std::vector<float> x = {3.0f, 4.0f};
  const std::vector<float> w = {1.0f, 2.0f};
  ASSERT_TRUE(rmsnorm_ref(x.data(), 1, 2, w.data(), DType::kF32, 0.0f, x.data()).ok());
  EXPECT_NEAR(x[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(x[1], 8.0 / std::sqrt(12.5), 1e-6);
  EXPECT_FALSE(rmsnorm_ref(x.data(), 1, 0, w.data(), DType::kF32, 1e-6f, x.data()).ok());
  EXPECT_FALSE(rmsnorm_ref(x.data(), 1, 2, w.data(), DType::kF32, -1.0f, x.data()).ok());
  EXPECT_FALSE(rmsnorm_ref(x.data(), 1, 2, nullptr, DType::kF32, 1e-6f, x.data()).ok());
}

TEST(Ops, RopeMatchesFp64RotationAndScaling) {
  auto rng = rng_for_test();
  const int64_t tokens = 6;
  const int32_t heads = 3;
  for (int32_t d : {2, 64, 128}) {
    for (float scaling : {1.0f, 1.2079442f}) {
      std::vector<float> inv_freq(d / 2);
      for (int32_t c = 0; c < d / 2; ++c) inv_freq[c] = static_cast<float>(std::pow(10000.0, -2.0 * c / d));
      const std::vector<int64_t> positions = {0, 1, 5, 300, 4097, 131071};
      const auto x = random_floats(rng, tokens * heads * d, -1.0f, 1.0f);
      std::vector<float> got = x;
      ASSERT_TRUE(apply_rope_ref(got.data(), tokens, heads, d, positions.data(), inv_freq.data(), scaling).ok());
      std::vector<float> ref(x.size());
      for (int64_t t = 0; t < tokens; ++t)
        for (int32_t h = 0; h < heads; ++h)
          for (int32_t c = 0; c < d / 2; ++c) {
            const double angle = static_cast<double>(static_cast<float>(positions[t]) * inv_freq[c]);
            const double cs = std::cos(angle) * scaling, sn = std::sin(angle) * scaling;
            const int64_t base = (t * heads + h) * d;
            const double a = x[base + c], b = x[base + c + d / 2];
            ref[base + c] = static_cast<float>(a * cs - b * sn);
            ref[base + c + d / 2] = static_cast<float>(b * cs + a * sn);
          }
      EXPECT_TRUE(all_close(got, ref, {tokens, heads, d}, {1e-6, 1e-6})) << "d " << d << " scaling " << scaling;
    }
  }
}

TEST(Ops, RopeAtPositionZeroIsScalingOnlyAndPreservesNorm) {
  const int32_t d = 8;
  std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f, 0.001f};
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t pos0 = 0;
  std::vector<float> y = x;
  ASSERT_TRUE(apply_rope_ref(y.data(), 1, 1, d, &pos0, inv_freq.data(), 2.0f).ok());
  for (int i = 0; i < d; ++i) EXPECT_FLOAT_EQ(y[i], 2.0f * x[i]);
  const int64_t pos = 12345;
  y = x;
  ASSERT_TRUE(apply_rope_ref(y.data(), 1, 1, d, &pos, inv_freq.data(), 1.0f).ok());
  for (int c = 0; c < d / 2; ++c)  // each (c, c + d/2) pair is rotated: its norm is kept
    EXPECT_NEAR(std::hypot(y[c], y[c + d / 2]), std::hypot(x[c], x[c + d / 2]), 1e-5);
  EXPECT_FALSE(apply_rope_ref(y.data(), 1, 1, 7, &pos, inv_freq.data(), 1.0f).ok());
  const int64_t negative = -1;
  EXPECT_FALSE(apply_rope_ref(y.data(), 1, 1, d, &negative, inv_freq.data(), 1.0f).ok());
}

TEST(Ops, SiluMulAndAddMatchFp64) {
  auto rng = rng_for_test();
  const int64_t n = 1001;
  const auto gate = random_floats(rng, n, -10.0f, 10.0f);
  const auto up = random_floats(rng, n, -2.0f, 2.0f);
  GuardedBuffer<float> out(n);
  ASSERT_TRUE(silu_mul_ref(gate.data(), up.data(), n, out.data()).ok());
  ASSERT_TRUE(out.intact());
  std::vector<float> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i]);
  EXPECT_TRUE(all_close(out.span(), ref, {n}, {1e-6, 1e-6}));

  std::vector<float> x = up;
  ASSERT_TRUE(add_inplace_ref(x.data(), gate.data(), n).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], up[i] + gate[i]);
  EXPECT_FALSE(add_inplace_ref(x.data(), x.data(), n).ok());
  EXPECT_FALSE(silu_mul_ref(gate.data(), nullptr, n, out.data()).ok());
}

TEST(Ops, EmbeddingGatherWidensRowsAndRejectsBadIds) {
  auto rng = rng_for_test();
  const int64_t vocab = 11;
  const int32_t hidden = 5;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const auto table = random_floats(rng, vocab * hidden, -1.0f, 1.0f, dtype);
    const auto bytes = pack_as(table, dtype);
    const std::vector<int32_t> tokens = {10, 0, 3, 3};
    GuardedBuffer<float> out(tokens.size() * hidden);
    ASSERT_TRUE(embedding_gather_ref(bytes.data(), dtype, vocab, hidden, tokens.data(), 4, out.data()).ok());
    ASSERT_TRUE(out.intact());
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int32_t c = 0; c < hidden; ++c) ASSERT_EQ(out.data()[t * hidden + c], table[tokens[t] * hidden + c]);
    const std::vector<int32_t> bad = {1, 11};
    const Status s = embedding_gather_ref(bytes.data(), dtype, vocab, hidden, bad.data(), 2, out.data());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("token id 11"), std::string::npos) << s.message();
  }
}

TEST(Ops, SoftmaxLogSoftmaxArgmaxMatchFp64) {
  auto rng = rng_for_test();
  const int64_t n = 257;
  auto logits = random_floats(rng, n, -30.0f, 30.0f);
  for (float temperature : {1.0f, 0.7f, 2.5f}) {
    std::vector<float> p(n);
    ASSERT_TRUE(softmax_ref(logits.data(), n, temperature, p.data()).ok());
    double m = -1e300;
    for (float l : logits) m = std::max(m, static_cast<double>(l));
    double z = 0;
    for (float l : logits) z += std::exp((l - m) / temperature);
    std::vector<float> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(std::exp((logits[i] - m) / temperature) / z);
    EXPECT_TRUE(all_close(p, ref, {n}, {1e-12, 1e-6}));
  }
  std::vector<float> lp(n);
  ASSERT_TRUE(log_softmax_ref(logits.data(), n, lp.data()).ok());
  double m = -1e300;
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  double z = 0;
  for (float l : logits) z += std::exp(l - m);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(lp[i], logits[i] - m - std::log(z), 1e-5);

  logits[17] = 100.0f;
  logits[200] = 100.0f;  // tie: the lower index wins
  auto best = argmax_ref(logits.data(), n);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 17);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(argmax_ref(logits.data(), n).ok());
  EXPECT_FALSE(softmax_ref(logits.data(), n, 1.0f, lp.data()).ok());
  EXPECT_FALSE(softmax_ref(lp.data(), n, 0.0f, lp.data()).ok());
}

TEST(Ops, SoftmaxHandValues) {
  // log(1), log(2), log(5) → 1/8, 2/8, 5/8.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};
  std::vector<float> p(3);
  ASSERT_TRUE(softmax_ref(logits.data(), 3, 1.0f, p.data()).ok());
  EXPECT_NEAR(p[0], 0.125, 1e-7);
  EXPECT_NEAR(p[1], 0.25, 1e-7);
  EXPECT_NEAR(p[2], 0.625, 1e-7);
  // Temperature 0.5 squares the odds: 1, 4, 25 → /30.
  ASSERT_TRUE(softmax_ref(logits.data(), 3, 0.5f, p.data()).ok());
  EXPECT_NEAR(p[0], 1.0 / 30, 1e-7);
  EXPECT_NEAR(p[2], 25.0 / 30, 1e-7);
}

}  // namespace
}  // namespace kascade::ref
