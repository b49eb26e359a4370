// tests/cuda/test_gpu_runtime_memory.cpp — the device weights of the CUDA runtime
// (src/cuda/model/device_weights.h) against the host weight table and the memory plan
// (src/runtime/gpu_memory_plan.h): the allocation is exactly device_weight_bytes(); the fused qkv
// and gate/up matrices read back equal the host q/k/v and gate/up weights converted to the
// activation dtype (f32 dummy weights → bf16: rounding to nearest even, as convert_buffer does;
// bf16 → bf16: identical); the norm weights come back exactly in fp32.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/model/device_weights.h"
#include "cuda_test_support.h"
#include "kascade/model_config.h"
#include "model/dummy_weights.h"
#include "runtime/gpu_memory_plan.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

std::vector<uint16_t> download16(const void* device, size_t n) {
  std::vector<uint16_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), device, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

std::vector<uint16_t> host16(const TensorView& v, DType act) {
  std::vector<uint16_t> out(static_cast<size_t>(v.numel()));
  convert_buffer(v.data, v.dtype, out.data(), act, v.numel());
  return out;
}

TEST(GpuRuntimeMemory, DeviceWeightsMatchHostTableAndPlan) {
  KC_SKIP_WITHOUT_GPU();
  auto config = parse_model_config(
      R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 300, "hidden_size": 128,
          "intermediate_size": 192, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "max_position_embeddings": 1024, "tie_word_embeddings": false})");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto rope = compute_rope_frequencies(*config);
  ASSERT_TRUE(rope.ok());
  for (DType source : {DType::kF32, DType::kBF16}) {
    auto weights = make_dummy_weights(*config, source, 5);
    ASSERT_TRUE(weights.ok()) << weights.status().to_string();
    for (DType act : {DType::kBF16, DType::kF16}) {
      auto dw = cuda::DeviceWeights::upload(*weights, *rope, act, nullptr);
      ASSERT_TRUE(dw.ok()) << dw.status().to_string();
      EXPECT_EQ((*dw)->bytes(), runtime::device_weight_bytes(*config, act));
      const LayerWeights& l1 = weights->layer(1);
      std::vector<uint16_t> want;
      for (const TensorView* v : {&l1.q_proj, &l1.k_proj, &l1.v_proj}) {
        const std::vector<uint16_t> part = host16(*v, act);
        want.insert(want.end(), part.begin(), part.end());
      }
      EXPECT_EQ(download16((*dw)->layer(1).qkv, want.size()), want) << dtype_name(source) << " -> " << dtype_name(act);
      want.clear();
      for (const TensorView* v : {&l1.gate_proj, &l1.up_proj}) {
        const std::vector<uint16_t> part = host16(*v, act);
        want.insert(want.end(), part.begin(), part.end());
      }
      EXPECT_EQ(download16((*dw)->layer(1).gate_up, want.size()), want);
      EXPECT_EQ(download16((*dw)->lm_head(), 300 * 128), host16(weights->lm_head(), act));
      std::vector<float> norm(64), want_norm(64);
      ASSERT_EQ(cudaMemcpy(norm.data(), (*dw)->layer(1).k_norm, 64 * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (int c = 0; c < 64; ++c) want_norm[c] = l1.k_norm.load(c);
      EXPECT_EQ(norm, want_norm);
      std::vector<float> freq(32);
      ASSERT_EQ(cudaMemcpy(freq.data(), (*dw)->inv_freq(), 32 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(freq, rope->inv_freq);
    }
  }
}

}  // namespace
}  // namespace kascade::testing
