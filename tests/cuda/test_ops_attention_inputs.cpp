// tests/cuda/test_ops_attention_inputs.cpp — attention_inputs (src/cuda/ops/attention_inputs.h):
// q/k norm + RoPE + q split + paged KV append against ref::rmsnorm_ref + ref::apply_rope_ref, for the
// RoPE tables of a default, a llama3 and a yarn config (compute_rope_frequencies), with and without
// Qwen3's q/k norm, bf16 and fp16, positions up to 131071, cache rows scattered over shuffled pages.
// q and k within one rounding of the dtype (2·u relative, plus 2·u absolute for values that cancel
// in the rotation); v rows copied exactly; cache rows not written stay poisoned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda/ops/attention_inputs.h"
#include "cuda_test_support.h"
#include "kascade/model_config.h"
#include "model/rope_frequencies.h"
#include "ref/ops_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

const char* kConfigs[] = {
    R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 256,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "max_position_embeddings": 131072, "rope_theta": 10000.0, "rms_norm_eps": 1e-6})",
    R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 512,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192}})",
    R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 64, "hidden_size": 256,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})",
};

TEST(OpsAttentionInputs, MatchesNormAndRopeReference) {
  KC_SKIP_WITHOUT_GPU();
  int case_index = 0;
  for (const char* json : kConfigs) {
    auto config = parse_model_config(json);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto rope = compute_rope_frequencies(*config);
    ASSERT_TRUE(rope.ok()) << rope.status().to_string();
    const int32_t H = static_cast<int32_t>(config->num_attention_heads);
    const int32_t G = static_cast<int32_t>(config->num_key_value_heads);
    const int32_t d = static_cast<int32_t>(config->head_dim);
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      for (bool qk_norm : {false, true}) {
        auto rng = rng_for_test(static_cast<uint64_t>(++case_index));
        const int64_t T = 33;
        const int32_t page_size = 16, num_pages = 8;
        const int32_t width = (H + 2 * G) * d;
        const std::vector<float> qkv = random_floats(rng, static_cast<size_t>(T * width), -2.0f, 2.0f, dtype);
        std::vector<int64_t> positions(T);
        std::vector<int32_t> positions32(T), slots(T);
        std::vector<int32_t> cache_rows(num_pages * page_size);
        std::iota(cache_rows.begin(), cache_rows.end(), 0);
        std::shuffle(cache_rows.begin(), cache_rows.end(), rng);
        std::uniform_int_distribution<int32_t> pos_dist(0, 131071);
        for (int64_t t = 0; t < T; ++t) {
          positions[t] = t < 3 ? t : pos_dist(rng);
          positions32[t] = static_cast<int32_t>(positions[t]);
          slots[t] = cache_rows[t];
        }
        const std::vector<float> q_norm = random_floats(rng, d, 0.5f, 1.5f), k_norm = random_floats(rng, d, 0.5f, 1.5f);
        // Reference: split, norm, rope in fp32 (the CPU forward pass's ops).
        std::vector<float> q(static_cast<size_t>(T * H * d)), k(static_cast<size_t>(T * G * d)), v(k.size());
        for (int64_t t = 0; t < T; ++t) {
          const float* row = qkv.data() + t * width;
          std::copy_n(row, H * d, q.begin() + t * H * d);
          std::copy_n(row + H * d, G * d, k.begin() + t * G * d);
          std::copy_n(row + (H + G) * d, G * d, v.begin() + t * G * d);
        }
        const float eps = static_cast<float>(config->rms_norm_eps);
        if (qk_norm) {
          KC_ASSERT_OK(ref::rmsnorm_ref(q.data(), T * H, d, q_norm.data(), DType::kF32, eps, q.data()));
          KC_ASSERT_OK(ref::rmsnorm_ref(k.data(), T * G, d, k_norm.data(), DType::kF32, eps, k.data()));
        }
        KC_ASSERT_OK(ref::apply_rope_ref(q.data(), T, H, d, positions.data(), rope->inv_freq.data(),
                                         rope->attention_scaling));
        KC_ASSERT_OK(ref::apply_rope_ref(k.data(), T, G, d, positions.data(), rope->inv_freq.data(),
                                         rope->attention_scaling));

        DeviceBuffer qkv_d = upload_vector(pack_as(qkv, dtype)), pos_d = upload_vector(positions32),
                     slots_d = upload_vector(slots), qn_d = upload_vector(q_norm), kn_d = upload_vector(k_norm),
                     freq_d = upload_vector(rope->inv_freq);
        const size_t cache_elems = static_cast<size_t>(num_pages) * page_size * G * d;
        DeviceBuffer q_d(q.size() * dtype_size(dtype)), k_d(cache_elems * dtype_size(dtype)),
            v_d(cache_elems * dtype_size(dtype));
        cuda::AttentionInputsShape shape{T, H, G, d, dtype};
        cuda::AttentionInputsArgs args;
        args.qkv = qkv_d.data();
        args.positions = pos_d.as<int32_t>();
        args.slots = slots_d.as<int32_t>();
        args.q_norm = qk_norm ? qn_d.as<float>() : nullptr;
        args.k_norm = qk_norm ? kn_d.as<float>() : nullptr;
        args.norm_eps = eps;
        args.inv_freq = freq_d.as<float>();
        args.attention_scaling = rope->attention_scaling;
        args.q_out = q_d.data();
        args.k_cache = k_d.data();
        args.v_cache = v_d.data();
        KC_ASSERT_OK(cuda::attention_inputs(shape, args, nullptr));

        const double tol = 2 * dtype_epsilon(dtype);
        std::vector<float> want_q = q;
        for (float& x : want_q) x = round_to_dtype(x, dtype);
        EXPECT_TRUE(all_close(to_floats(q_d.download(), dtype), want_q, {T, H, d}, {tol, tol}))
            << "q, config " << case_index << " " << dtype_name(dtype) << " qk_norm " << qk_norm;
        const std::vector<float> k_cache = to_floats(k_d.download(), dtype), v_cache = to_floats(v_d.download(), dtype);
        std::vector<float> got_k(k.size()), got_v(v.size());
        std::vector<bool> written(static_cast<size_t>(num_pages) * page_size, false);
        for (int64_t t = 0; t < T; ++t) {
          written[slots[t]] = true;
          std::copy_n(k_cache.begin() + static_cast<int64_t>(slots[t]) * G * d, G * d, got_k.begin() + t * G * d);
          std::copy_n(v_cache.begin() + static_cast<int64_t>(slots[t]) * G * d, G * d, got_v.begin() + t * G * d);
        }
        std::vector<float> want_k = k;
        for (float& x : want_k) x = round_to_dtype(x, dtype);
        EXPECT_TRUE(all_close(got_k, want_k, {T, G, d}, {tol, tol})) << "k, config " << case_index;
        EXPECT_EQ(got_v, v) << "v rows are copied exactly";
        for (size_t row = 0; row < written.size(); ++row) {
          if (written[row]) continue;
          EXPECT_TRUE(std::isnan(k_cache[row * G * d]) && std::isnan(v_cache[row * G * d]))
              << "cache row " << row << " was not in the call but changed";
        }
        EXPECT_TRUE(q_d.guards_intact() && k_d.guards_intact() && v_d.guards_intact());
      }
    }
  }
}

TEST(OpsAttentionInputs, RefusesBadShapes) {
  cuda::AttentionInputsArgs args;
  EXPECT_EQ(cuda::attention_inputs({4, 6, 4, 64, DType::kBF16}, args, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::attention_inputs({4, 4, 2, 63, DType::kBF16}, args, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::attention_inputs({4, 4, 2, 64, DType::kBF16}, args, nullptr).code(), StatusCode::kInvalidArgument);
  float dummy = 0;
  args.q_norm = &dummy;
  EXPECT_EQ(cuda::attention_inputs({4, 4, 2, 64, DType::kBF16}, args, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade::testing
