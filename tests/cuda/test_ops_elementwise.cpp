// tests/cuda/test_ops_elementwise.cpp — silu_mul and embedding_gather (src/cuda/ops/elementwise.h)
// against ref::silu_mul_ref and ref::embedding_gather_ref: random inputs in bf16 / fp16, awkward
// sizes, outputs poisoned; the embedding gather must be exact, SwiGLU within one rounding of the
// dtype; an out-of-range token sets the error word.
#include <gtest/gtest.h>

#include "cuda/ops/elementwise.h"
#include "cuda_test_support.h"
#include "ref/ops_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

TEST(OpsElementwise, SiluMulMatchesReference) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int inter : {1, 33, 1000, 4097}) {
      auto rng = rng_for_test(static_cast<uint64_t>(inter) * 3 + static_cast<uint64_t>(dtype));
      const int64_t tokens = 7;
      const std::vector<float> gate_up = random_floats(rng, static_cast<size_t>(tokens * 2 * inter), -6.0f, 6.0f, dtype);
      std::vector<float> gate(static_cast<size_t>(tokens * inter)), up(gate.size()), want(gate.size());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < inter; ++i) {
          gate[t * inter + i] = gate_up[t * 2 * inter + i];
          up[t * inter + i] = gate_up[t * 2 * inter + inter + i];
        }
      KC_ASSERT_OK(ref::silu_mul_ref(gate.data(), up.data(), tokens * inter, want.data()));
      for (float& v : want) v = round_to_dtype(v, dtype);
      DeviceBuffer in_d = upload_vector(pack_as(gate_up, dtype));
      DeviceBuffer out_d(gate.size() * dtype_size(dtype));
      KC_ASSERT_OK(cuda::silu_mul(in_d.data(), tokens, inter, out_d.data(), dtype, nullptr));
      const std::vector<float> got = to_floats(out_d.download(), dtype);
      EXPECT_TRUE(out_d.guards_intact());
      EXPECT_TRUE(all_close(got, want, {tokens, inter}, {1e-6, 2 * dtype_epsilon(dtype)})) << dtype_name(dtype);
    }
  }
}

TEST(OpsElementwise, EmbeddingGatherIsExact) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    const int64_t vocab = 1000;
    const int32_t hidden = 129;
    const std::vector<float> table = random_floats(rng, static_cast<size_t>(vocab * hidden), -1.0f, 1.0f, dtype);
    const std::vector<uint8_t> packed = pack_as(table, dtype);
    std::vector<int32_t> tokens = {0, 999, 17, 17, 500, 1};
    std::vector<float> want(tokens.size() * hidden);
    KC_ASSERT_OK(ref::embedding_gather_ref(packed.data(), dtype, vocab, hidden, tokens.data(),
                                           static_cast<int64_t>(tokens.size()), want.data()));
    DeviceBuffer table_d = upload_vector(packed), tokens_d = upload_vector(tokens);
    DeviceBuffer out_d(want.size() * sizeof(float)), error_d(sizeof(uint32_t), 0);
    KC_ASSERT_OK(cuda::embedding_gather(table_d.data(), dtype, vocab, hidden, tokens_d.as<int32_t>(),
                                        static_cast<int64_t>(tokens.size()), out_d.as<float>(),
                                        error_d.as<uint32_t>(), nullptr));
    EXPECT_EQ(out_d.download_as<float>(), want);
    EXPECT_EQ(error_d.download_as<uint32_t>()[0], 0u);
    // A token outside the vocabulary: zero row and the error bit.
    tokens[2] = static_cast<int32_t>(vocab);
    tokens_d.upload(tokens.data(), tokens.size() * sizeof(int32_t));
    KC_ASSERT_OK(cuda::embedding_gather(table_d.data(), dtype, vocab, hidden, tokens_d.as<int32_t>(),
                                        static_cast<int64_t>(tokens.size()), out_d.as<float>(),
                                        error_d.as<uint32_t>(), nullptr));
    const std::vector<float> got = out_d.download_as<float>();
    for (int32_t c = 0; c < hidden; ++c) EXPECT_EQ(got[2 * hidden + c], 0.0f);
    EXPECT_EQ(error_d.download_as<uint32_t>()[0], 1u);
  }
}

TEST(OpsElementwise, RefusesBadArguments) {
  int dummy = 0;
  EXPECT_EQ(cuda::silu_mul(&dummy, 4, 0, &dummy, DType::kBF16, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::silu_mul(&dummy, 4, 4, &dummy, DType::kBF16, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::embedding_gather(nullptr, DType::kBF16, 10, 4, nullptr, 3, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade::testing
