// tests/cuda/test_ops_gemm.cpp — CublasContext::linear (src/cuda/ops/gemm.h): y = x · wᵀ with bf16 /
// fp16 inputs against an fp64 product of the same rounded inputs, bf16 / fp16 / fp32 outputs, with
// and without accumulation into y, awkward shapes. Bound per element: fp32 accumulation error
// 2·k·2⁻²⁴·Σ|x·w| plus one rounding of the output dtype — a wrong transpose, stride or dtype fails
// it by orders of magnitude. Also: the refusals, and a cuBLAS error reported as a Status.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/ops/gemm.h"
#include "cuda_test_support.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

TEST(OpsGemm, LinearMatchesFp64Product) {
  KC_SKIP_WITHOUT_GPU();
  auto context = cuda::CublasContext::create(nullptr);
  ASSERT_TRUE(context.ok()) << context.status().to_string();
  struct Shape {
    int64_t m, n, k;
  };
  int case_index = 0;
  for (DType in : {DType::kBF16, DType::kF16}) {
    for (DType out : {in, DType::kF32}) {
      for (bool accumulate : {false, true}) {
        for (Shape s : {Shape{1, 1, 1}, Shape{1, 129, 1000}, Shape{33, 127, 64}, Shape{7, 4097, 31}}) {
          auto rng = rng_for_test(static_cast<uint64_t>(++case_index));
          const std::vector<float> x = random_floats(rng, static_cast<size_t>(s.m * s.k), -1.0f, 1.0f, in);
          const std::vector<float> w = random_floats(rng, static_cast<size_t>(s.n * s.k), -1.0f, 1.0f, in);
          const std::vector<float> y0 = random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f, out);
          DeviceBuffer x_d = upload_vector(pack_as(x, in)), w_d = upload_vector(pack_as(w, in));
          DeviceBuffer y_d = upload_vector(pack_as(y0, out));
          KC_ASSERT_OK((*context)->linear(x_d.data(), w_d.data(), y_d.data(), s.m, s.n, s.k, in, out, accumulate));
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
