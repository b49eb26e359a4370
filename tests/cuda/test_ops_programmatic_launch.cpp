// tests/cuda/test_ops_programmatic_launch.cpp — programmatic dependent launch of the forward pass's
// own kernels (src/cuda/common/programmatic_launch.cuh): a decode-shaped chain of ops launched with
// it must give the same bits as the same chain launched plainly.
//
// OpsProgrammaticLaunch.DecodeLayerChainEqualsPlainLaunches: eight "layers" of the decode step's op
// sequence on 4 rows — RMSNorm → small-m linear (gate/up) → SiLU·mul → small-m linear accumulated
// into the fp32 residual (down) → the next layer's RMSNorm reads that residual — each op reading what
// the one before it wrote, on a non-blocking stream, with and without PDL. The kernels are
// deterministic, so any difference is a consumer that read before its producer finished (a missing
// or misplaced wait): the chain's outputs must be bit-identical, and equal to the plain run a second
// time (the reference's own determinism). Large enough (4.5 MB of weights a layer, 64–96 CTAs a
// linear launch) that a consumer released early would overtake its producer. Skipped below sm_90.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/ops/elementwise.h"
#include "cuda/ops/norm.h"
#include "cuda/ops/small_m_linear.h"
#include "cuda_test_support.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

constexpr int64_t kRows = 4, kHidden = 1024, kInter = 768, kLayers = 8;

struct ChainInputs {
  std::vector<float> residual;                    // [kRows, kHidden] fp32
  std::vector<float> norm_weight;                 // [kHidden] fp32
  std::vector<std::vector<float>> gate_up, down;  // per layer: [2·kInter, kHidden], [kHidden, kInter] (bf16 values)
};

ChainInputs make_inputs() {
  auto rng = rng_for_test(7);
  ChainInputs in;
  in.residual = random_floats(rng, kRows * kHidden, -1.0f, 1.0f, DType::kF32);
  in.norm_weight = random_floats(rng, kHidden, 0.5f, 1.5f, DType::kF32);
  for (int64_t l = 0; l < kLayers; ++l) {
    in.gate_up.push_back(random_floats(rng, 2 * kInter * kHidden, -0.05f, 0.05f, DType::kBF16));
    in.down.push_back(random_floats(rng, kHidden * kInter, -0.05f, 0.05f, DType::kBF16));
  }
  return in;
}

// Runs the chain and returns the final residual's bytes and the last SiLU·mul output's bytes.
std::vector<uint8_t> run_chain(const ChainInputs& in, bool programmatic) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer residual = upload_vector(in.residual), norm_weight = upload_vector(in.norm_weight);
  std::vector<DeviceBuffer> gate_up, down;
  for (int64_t l = 0; l < kLayers; ++l) {
    gate_up.push_back(upload_vector(pack_as(in.gate_up[l], DType::kBF16)));
    down.push_back(upload_vector(pack_as(in.down[l], DType::kBF16)));
  }
  DeviceBuffer h(kRows * kHidden * 2), gu(kRows * 2 * kInter * 2), mlp(kRows * kInter * 2);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int64_t l = 0; l < kLayers; ++l) {
    EXPECT_TRUE(cuda::rmsnorm_rows(static_cast<const float*>(residual.data()), nullptr, kRows, kHidden,
                                   static_cast<const float*>(norm_weight.data()), 1e-5f, h.data(), DType::kBF16, stream,
                                   programmatic)
                    .ok());
    EXPECT_TRUE(cuda::small_m_linear(h.data(), gate_up[l].data(), gu.data(), kRows, 2 * kInter, kHidden, DType::kBF16,
                                     DType::kBF16, false, stream, programmatic)
                    .ok());
    EXPECT_TRUE(cuda::silu_mul(gu.data(), kRows, kInter, mlp.data(), DType::kBF16, stream, programmatic).ok());
    EXPECT_TRUE(cuda::small_m_linear(mlp.data(), down[l].data(), residual.data(), kRows, kHidden, kInter, DType::kBF16,
                                     DType::kF32, true, stream, programmatic)
                    .ok());
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  std::vector<uint8_t> bytes = residual.download();
  const std::vector<uint8_t> last_mlp = mlp.download();
  bytes.insert(bytes.end(), last_mlp.begin(), last_mlp.end());
  EXPECT_TRUE(residual.guards_intact() && mlp.guards_intact());
  return bytes;
}

TEST(OpsProgrammaticLaunch, DecodeLayerChainEqualsPlainLaunches) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_BELOW_SM90("programmatic dependent launch");
  const ChainInputs in = make_inputs();
  const std::vector<uint8_t> plain = run_chain(in, false);
  const std::vector<uint8_t> plain_again = run_chain(in, false);
  ASSERT_EQ(plain, plain_again) << "the plain chain is not deterministic; the comparison below means nothing";
  for (int repeat = 0; repeat < 3; ++repeat) {
    const std::vector<uint8_t> programmatic = run_chain(in, true);
    ASSERT_EQ(programmatic.size(), plain.size());
    int64_t differing = 0;
    for (size_t i = 0; i < plain.size(); ++i) differing += programmatic[i] != plain[i] ? 1 : 0;
    EXPECT_EQ(differing, 0) << "repeat " << repeat << ": " << differing << " of " << plain.size()
                            << " bytes differ with programmatic launch";
  }
  // The chain did something: the residual moved away from its input.
  const std::vector<float> start = in.residual;
  std::vector<float> end(start.size());
  std::memcpy(end.data(), plain.data(), end.size() * sizeof(float));
  double moved = 0;
  for (size_t i = 0; i < end.size(); ++i) moved = std::max(moved, std::fabs(static_cast<double>(end[i]) - start[i]));
  EXPECT_GT(moved, 1e-3);
}

}  // namespace
}  // namespace kascade::testing
