// tests/cuda/test_ops_norm.cpp — rmsnorm_rows (src/cuda/ops/norm.h) against ref::rmsnorm_ref on
// random rows of awkward widths (the scalar kernel) and of widths divisible by 4 up to 8192 (the
// vector kernel), with and without a row gather, bf16 and fp16 outputs (outputs
// poisoned with NaN, canaries checked). Tolerance: the fp32 reference rounded to the dtype, within
// one unit of the dtype's rounding (2·u relative) — the kernel's fp32 sum differs from the fp64 one
// by a few fp32 ulps, which moves a result across at most one rounding boundary.
#include <gtest/gtest.h>

#include "cuda/ops/norm.h"
#include "cuda_test_support.h"
#include "ref/ops_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

TEST(OpsNorm, MatchesReferenceWithGather) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int dim : {1, 31, 64, 129, 384, 1000, 4096, 4097, 8192, 8196}) {  // 384..8192: the vector kernel
      auto rng = rng_for_test(static_cast<uint64_t>(dim) * 3 + static_cast<uint64_t>(dtype));
      const int64_t rows = 37;
      std::vector<float> x = random_floats(rng, static_cast<size_t>(rows * dim), -3.0f, 3.0f);
      std::vector<float> w = random_floats(rng, static_cast<size_t>(dim), 0.5f, 1.5f);
      std::vector<int32_t> gather = {5, 0, 36, 5, 17};
      for (bool use_gather : {false, true}) {
        const int64_t out_rows = use_gather ? static_cast<int64_t>(gather.size()) : rows;
        std::vector<float> src(static_cast<size_t>(out_rows * dim));
        for (int64_t r = 0; r < out_rows; ++r) {
          const int64_t s = use_gather ? gather[r] : r;
          std::copy_n(x.begin() + s * dim, dim, src.begin() + r * dim);
        }
        std::vector<float> want(src.size());
        KC_ASSERT_OK(ref::rmsnorm_ref(src.data(), out_rows, dim, w.data(), DType::kF32, 1e-5f, want.data()));
        for (float& v : want) v = round_to_dtype(v, dtype);
        DeviceBuffer x_d = upload_vector(x), w_d = upload_vector(w), g_d = upload_vector(gather);
        DeviceBuffer out_d(static_cast<size_t>(out_rows * dim) * dtype_size(dtype));
        KC_ASSERT_OK(cuda::rmsnorm_rows(x_d.as<float>(), use_gather ? g_d.as<int32_t>() : nullptr, out_rows, dim,
                                        w_d.as<float>(), 1e-5f, out_d.data(), dtype, nullptr));
        const std::vector<float> got = to_floats(out_d.download(), dtype);
        EXPECT_TRUE(out_d.guards_intact());
        EXPECT_TRUE(all_close(got, want, {out_rows, dim}, {1e-6, 2 * dtype_epsilon(dtype)}))
            << dtype_name(dtype) << " dim " << dim << " gather " << use_gather;
      }
    }
  }
}

TEST(OpsNorm, RefusesBadArguments) {
  // Host-side checks: no device needed.
  EXPECT_EQ(cuda::rmsnorm_rows(nullptr, nullptr, 4, 0, nullptr, 1e-5f, nullptr, DType::kBF16, nullptr).code(),
            StatusCode::kInvalidArgument);
  float dummy = 0;
  EXPECT_EQ(cuda::rmsnorm_rows(&dummy, nullptr, 1, 8, &dummy, 1e-5f, &dummy, DType::kF32, nullptr).code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(cuda::rmsnorm_rows(nullptr, nullptr, 2, 8, nullptr, 1e-5f, nullptr, DType::kBF16, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade::testing
