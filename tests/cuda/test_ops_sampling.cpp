// tests/cuda/test_ops_sampling.cpp — DeviceSampler (src/cuda/ops/sampling.h) against the CPU sampler
// (src/runtime/sampler.h):
//   greedy: the token equals ref::argmax_ref exactly, ties (planted repeated maxima) to the lower id;
//   temperature / top-k / top-p: with the uniform drawn from the sequence's CPU Sampler stream, the
//   device token equals pick_candidate(sampling_distribution(...), u) — a mismatch is accepted only
//   when u lies within 1e-12 of a boundary of the CPU's cumulative distribution (the documented
//   non-bit-identical case: parallel vs sequential fp64 sums);
//   a row holding a NaN gives −1.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/ops/sampling.h"
#include "cuda_test_support.h"
#include "ref/ops_ref.h"
#include "runtime/sampler.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

std::vector<float> random_logits(std::mt19937_64& rng, int32_t rows, int64_t vocab) {
  std::vector<float> logits = random_floats(rng, static_cast<size_t>(rows) * vocab, -8.0f, 8.0f);
  for (int32_t r = 0; r < rows; ++r) {  // planted ties of the maximum and of other values
    float* row = logits.data() + static_cast<int64_t>(r) * vocab;
    const float top = 9.0f + static_cast<float>(r % 2);
    row[(r * 7) % vocab] = top;
    row[(r * 7 + vocab / 2) % vocab] = top;
    if (vocab > 3) row[vocab - 1] = row[1];
  }
  return logits;
}

TEST(OpsSampling, GreedyEqualsArgmax) {
  KC_SKIP_WITHOUT_GPU();
  for (int64_t vocab : {1, 33, 1000, 4097, 151936}) {
    auto rng = rng_for_test(static_cast<uint64_t>(vocab));
    const int32_t rows = 5;
    const std::vector<float> logits = random_logits(rng, rows, vocab);
    auto sampler = cuda::DeviceSampler::create(rows, vocab, nullptr);
    ASSERT_TRUE(sampler.ok()) << sampler.status().to_string();
    DeviceBuffer logits_d = upload_vector(logits), tokens_d(rows * sizeof(int32_t));
    KC_ASSERT_OK((*sampler)->sample(logits_d.as<float>(), rows, {}, nullptr, tokens_d.as<int32_t>()));
    const std::vector<int32_t> got = tokens_d.download_as<int32_t>();
    for (int32_t r = 0; r < rows; ++r) {
      auto want = ref::argmax_ref(logits.data() + static_cast<int64_t>(r) * vocab, vocab);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got[r], *want) << "vocab " << vocab << " row " << r;
    }
  }
}

TEST(OpsSampling, TemperatureTopKTopPMatchCpuSampler) {
  KC_SKIP_WITHOUT_GPU();
  struct Case {
    float temperature;
    int32_t top_k;
    float top_p;
  };
  const Case cases[] = {{1.0f, 0, 1.0f}, {0.7f, 50, 1.0f}, {1.3f, 0, 0.9f}, {0.8f, 40, 0.95f}, {2.0f, 1, 1.0f},
                        {1.0f, 100000, 0.5f}};
  int case_index = 0;
  for (const Case& c : cases) {
    for (int64_t vocab : {33, 1000, 32000}) {
      auto rng = rng_for_test(static_cast<uint64_t>(++case_index));
      const int32_t rows = 8;
      std::vector<float> logits = random_logits(rng, rows, vocab);
      auto sampler = cuda::DeviceSampler::create(rows, vocab, nullptr);
      ASSERT_TRUE(sampler.ok()) << sampler.status().to_string();
      DeviceBuffer logits_d = upload_vector(logits), tokens_d(rows * sizeof(int32_t));
      SamplerConfig config{c.temperature, c.top_k, c.top_p, static_cast<uint64_t>(case_index)};
      int boundary = 0;
      for (int step = 0; step < 6; ++step) {  // several draws per row from each row's stream
        std::vector<double> uniforms(rows);
        for (int32_t r = 0; r < rows; ++r) {
          runtime::Sampler stream(config, static_cast<uint64_t>(r));
          for (int i = 0; i <= step; ++i) uniforms[r] = stream.next_uniform();
        }
        DeviceBuffer u_d = upload_vector(uniforms);
        KC_ASSERT_OK((*sampler)->sample(logits_d.as<float>(), rows, {c.temperature, c.top_k, c.top_p},
                                        u_d.as<double>(), tokens_d.as<int32_t>()));
        const std::vector<int32_t> got = tokens_d.download_as<int32_t>();
        for (int32_t r = 0; r < rows; ++r) {
          auto dist = runtime::sampling_distribution(logits.data() + static_cast<int64_t>(r) * vocab, vocab, config);
          ASSERT_TRUE(dist.ok()) << dist.status().to_string();
          const int32_t want = runtime::pick_candidate(*dist, uniforms[r]);
          if (got[r] == want) continue;
          double cumulative = 0.0, nearest = 1.0;
          for (const auto& cand : *dist) {
            cumulative += cand.prob;
            nearest = std::min(nearest, std::fabs(cumulative - uniforms[r]));
          }
          EXPECT_LT(nearest, 1e-12) << "T " << c.temperature << " top_k " << c.top_k << " top_p " << c.top_p
                                    << " vocab " << vocab << " row " << r << ": device " << got[r] << ", CPU " << want;
          ++boundary;
        }
      }
      EXPECT_LE(boundary, 1) << "boundary cases should be rare";
    }
  }
}

TEST(OpsSampling, NanRowGivesMinusOne) {
  KC_SKIP_WITHOUT_GPU();
  const int64_t vocab = 100;
  std::vector<float> logits(2 * vocab, 0.5f);
  logits[vocab + 17] = std::nanf("");
  auto sampler = cuda::DeviceSampler::create(2, vocab, nullptr);
  ASSERT_TRUE(sampler.ok());
  DeviceBuffer logits_d = upload_vector(logits), tokens_d(2 * sizeof(int32_t)), u_d = upload_vector(std::vector<double>{0.305, 0.305});
  KC_ASSERT_OK((*sampler)->sample(logits_d.as<float>(), 2, {}, nullptr, tokens_d.as<int32_t>()));
  EXPECT_EQ(tokens_d.download_as<int32_t>(), (std::vector<int32_t>{0, -1}));
  KC_ASSERT_OK((*sampler)->sample(logits_d.as<float>(), 2, {1.0f, 0, 1.0f}, u_d.as<double>(), tokens_d.as<int32_t>()));
  const std::vector<int32_t> got = tokens_d.download_as<int32_t>();
  EXPECT_EQ(got[1], -1);
  EXPECT_EQ(got[0], 30) << "uniform logits: rank order is id order, u = 0.305 picks id 30 of 100";
}

TEST(OpsSampling, RefusesBadArguments) {
  EXPECT_EQ(cuda::DeviceSampler::workspace_bytes(0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::DeviceSampler::workspace_bytes(100000, 100000).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade::testing
