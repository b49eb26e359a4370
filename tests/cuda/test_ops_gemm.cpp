// tests/cuda/test_ops_gemm.cpp — CublasContext::linear (src/cuda/ops/gemm.h): y = x · wᵀ with bf16 /
// fp16 inputs against an fp64 product of the same rounded inputs, bf16 / fp16 / fp32 outputs, with
// and without accumulation into y, awkward shapes. Bound per element: fp32 accumulation error
// 2·k·2⁻²⁴·Σ|x·w| plus one rounding of the output dtype — a wrong transpose, stride or dtype fails
// it by orders of magnitude. The same for the decode-step kernel small_m_linear (m <= 8). Also: the
// refusals, and a cuBLAS error reported as a Status.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda/ops/gemm.h"
#include "cuda/ops/small_m_linear.h"
#include "cuda_test_support.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

struct LinearShape {
  int64_t m, n, k;
};

// A linear-layer implementation under test: y (+)= x · wᵀ on device buffers.
using LinearFn = std::function<Status(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                                      DType in, DType out, bool accumulate)>;

// Runs `linear` on random inputs for every dtype pair, with and without accumulation, over `shapes`,
// and counts the outputs outside the fp32-accumulation bound of the fp64 product.
void expect_linear_matches_fp64(const LinearFn& linear, const std::vector<LinearShape>& shapes, uint64_t seed) {
  int case_index = 0;
  for (DType in : {DType::kBF16, DType::kF16}) {
    for (DType out : {in, DType::kF32}) {
      for (bool accumulate : {false, true}) {
        for (const LinearShape& s : shapes) {
          auto rng = rng_for_test(seed + static_cast<uint64_t>(++case_index));
          const std::vector<float> x = random_floats(rng, static_cast<size_t>(s.m * s.k), -1.0f, 1.0f, in);
          const std::vector<float> w = random_floats(rng, static_cast<size_t>(s.n * s.k), -1.0f, 1.0f, in);
          const std::vector<float> y0 = random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f, out);
          DeviceBuffer x_d = upload_vector(pack_as(x, in)), w_d = upload_vector(pack_as(w, in));
          DeviceBuffer y_d = upload_vector(pack_as(y0, out));
          KC_ASSERT_OK(linear(x_d.data(), w_d.data(), y_d.data(), s.m, s.n, s.k, in, out, accumulate));
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const std::vector<float> got = to_floats(y_d.download(), out);
          ASSERT_TRUE(y_d.guards_intact());
          int64_t bad = 0;
          for (int64_t i = 0; i < s.m; ++i) {
            for (int64_t n = 0; n < s.n; ++n) {
              double ref = accumulate ? y0[i * s.n + n] : 0.0, magnitude = std::fabs(ref);
              for (int64_t c = 0; c < s.k; ++c) {
                const double p = static_cast<double>(x[i * s.k + c]) * w[n * s.k + c];
                ref += p;
                magnitude += std::fabs(p);
              }
              const double bound = 2.0 * (s.k + 1) * std::ldexp(1.0, -24) * magnitude +
                                   dtype_epsilon(out) * std::fabs(ref) + 1e-30;
              if (!(std::fabs(got[i * s.n + n] - ref) <= bound)) ++bad;
            }
          }
          EXPECT_EQ(bad, 0) << dtype_name(in) << " -> " << dtype_name(out) << " accumulate " << accumulate << " shape "
                            << s.m << "x" << s.n << "x" << s.k;
        }
      }
    }
  }
}

TEST(OpsGemm, LinearMatchesFp64Product) {
  KC_SKIP_WITHOUT_GPU();
  auto context = cuda::CublasContext::create(nullptr);
  ASSERT_TRUE(context.ok()) << context.status().to_string();
  cuda::CublasContext* blas = context->get();
  expect_linear_matches_fp64(
      [blas](const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in, DType out, bool acc) {
        return blas->linear(x, w, y, m, n, k, in, out, acc);
      },
      {{1, 1, 1}, {1, 129, 1000}, {33, 127, 64}, {7, 4097, 31}}, 0);
}

// The decode-step kernel: every row count 1..8, output counts around its 16-row tiles, k around its
// 32-element units and its warps' strides (8 .. 4104), and the Llama-3.1-8B o_proj shape; and grids of
// several waves (265 to 1,101 tiles), with k long enough for every warp and so short that most warps
// have no unit (their zeros still summed).
TEST(OpsGemm, SmallMLinearMatchesFp64Product) {
  KC_SKIP_WITHOUT_GPU();
  std::vector<LinearShape> shapes;
  for (int64_t m = 1; m <= cuda::kSmallMLinearMaxRows; ++m) shapes.push_back({m, 16 + m, 8 * m});
  for (LinearShape s : {LinearShape{1, 1, 8}, LinearShape{4, 15, 40}, LinearShape{4, 17, 264}, LinearShape{3, 33, 1000},
                        LinearShape{8, 100, 1024}, LinearShape{2, 7, 4104}, LinearShape{4, 4096, 4096},
                        LinearShape{5, 16 * 265, 72}, LinearShape{3, 16 * 700 + 5, 264}, LinearShape{2, 9000, 40},
                        LinearShape{8, 16 * 1100 + 9, 1032}})
    shapes.push_back(s);
  expect_linear_matches_fp64(
      [](const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in, DType out, bool acc) {
        return cuda::small_m_linear(x, w, y, m, n, k, in, out, acc, nullptr);
      },
      shapes, 100);
}

TEST(OpsGemm, SmallMLinearRefusesWhatItDoesNotTake) {
  KC_SKIP_WITHOUT_GPU();
  DeviceBuffer a(4096);
  const auto run = [&](const void* x, int64_t m, int64_t k, DType in, DType out) {
    return cuda::small_m_linear(x, a.data(), a.data(), m, 4, k, in, out, false, nullptr);
  };
  EXPECT_EQ(run(a.data(), 9, 8, DType::kBF16, DType::kF32).code(), StatusCode::kInvalidArgument);  // m > 8
  EXPECT_EQ(run(a.data(), 0, 8, DType::kBF16, DType::kF32).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run(a.data(), 2, 12, DType::kBF16, DType::kF32).code(), StatusCode::kInvalidArgument);  // k % 8
  EXPECT_EQ(run(a.data(), 2, 8, DType::kF32, DType::kF32).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run(a.data(), 2, 8, DType::kBF16, DType::kF16).code(), StatusCode::kInvalidArgument);
  const Status misaligned = run(static_cast<const uint8_t*>(a.data()) + 2, 2, 8, DType::kBF16, DType::kF32);
  EXPECT_EQ(misaligned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("16-byte aligned"), std::string::npos) << misaligned.message();
  EXPECT_TRUE(cuda::small_m_linear_supports(a.data(), a.data(), 8, 4, 8, DType::kF16, DType::kF16));
  EXPECT_FALSE(cuda::small_m_linear_supports(a.data(), a.data(), 8, 4, 8, DType::kF16, DType::kBF16));
}

TEST(OpsGemm, RefusesBadArguments) {
  KC_SKIP_WITHOUT_GPU();
  auto context = cuda::CublasContext::create(nullptr);
  ASSERT_TRUE(context.ok()) << context.status().to_string();
  DeviceBuffer a(64);
  EXPECT_EQ((*context)->linear(a.data(), a.data(), a.data(), 0, 1, 1, DType::kBF16, DType::kBF16, false).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*context)->linear(a.data(), a.data(), a.data(), 1, 1, 1, DType::kF32, DType::kF32, false).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*context)->linear(a.data(), a.data(), a.data(), 1, 1, 1, DType::kBF16, DType::kF16, false).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*context)->linear(nullptr, a.data(), a.data(), 1, 1, 1, DType::kBF16, DType::kF32, false).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade::testing
