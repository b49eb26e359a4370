// src/cuda/ops/attention_inputs_kernels.cu — q/k norm + RoPE + q split + KV append
// (attention_inputs.h): one block per token, one warp per head (lanes over rotation pairs).
// Tested by tests/cuda/test_ops_attention_inputs.cpp.
#include <cmath>

#include "cuda/common/cuda_status.h"
#include "cuda/ops/act_types.cuh"
#include "cuda/ops/attention_inputs.h"

namespace kascade::cuda {
namespace {

constexpr int kWarps = 8;

template <typename T>
__global__ void attention_inputs_kernel(AttentionInputsShape s, AttentionInputsArgs a) {
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int32_t d = s.head_dim, half = d / 2;
  const int32_t heads = s.num_heads + 2 * s.num_kv_heads;
  const T* row = static_cast<const T*>(a.qkv) + t * heads * d;
  const int64_t slot = a.slots[t];
  const float pos = static_cast<float>(a.positions[t]);
  for (int32_t head = warp; head < heads; head += kWarps) {
    const T* in = row + static_cast<int64_t>(head) * d;
    if (head >= s.num_heads + s.num_kv_heads) {  // v head: copy into the cache
      const int32_t g = head - s.num_heads - s.num_kv_heads;
      T* dst = static_cast<T*>(a.v_cache) + (slot * s.num_kv_heads + g) * d;
      for (int32_t c = lane; c < d; c += 32) dst[c] = in[c];
      continue;
    }
    const bool is_q = head < s.num_heads;
    const float* norm = is_q ? a.q_norm : a.k_norm;
    float inv = 1.0f;
    if (norm != nullptr) {
      float sum = 0.0f;
      for (int32_t c = lane; c < d; c += 32) {
        const float v = ops_detail::to_float(in[c]);
        sum += v * v;
      }
      for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      inv = rsqrtf(sum / static_cast<float>(d) + a.norm_eps);
    }
    T* dst = is_q ? static_cast<T*>(a.q_out) + (t * s.num_heads + head) * d
                  : static_cast<T*>(a.k_cache) + (slot * s.num_kv_heads + (head - s.num_heads)) * d;
    for (int32_t c = lane; c < half; c += 32) {
      float x0 = ops_detail::to_float(in[c]);
      float x1 = ops_detail::to_float(in[c + half]);
      if (norm != nullptr) {
        x0 = (x0 * inv) * norm[c];
        x1 = (x1 * inv) * norm[c + half];
      }
      const float angle = pos * a.inv_freq[c];  // fp32 product, as the CPU and HF compute it
      double sin_d, cos_d;
      sincos(static_cast<double>(angle), &sin_d, &cos_d);
      const float cos_a = static_cast<float>(cos_d) * a.attention_scaling;
      const float sin_a = static_cast<float>(sin_d) * a.attention_scaling;
      dst[c] = ops_detail::from_float<T>(x0 * cos_a - x1 * sin_a);
      dst[c + half] = ops_detail::from_float<T>(x1 * cos_a + x0 * sin_a);
    }
  }
}

}  // namespace

Status attention_inputs(const AttentionInputsShape& s, const AttentionInputsArgs& a, cudaStream_t stream) {
  KC_CHECK_ARG(s.tokens >= 0 && s.tokens <= 0x7fffffff, "attention_inputs: tokens = ", s.tokens);
  KC_CHECK_ARG(s.num_heads >= 1 && s.num_kv_heads >= 1 && s.num_heads % s.num_kv_heads == 0,
               "attention_inputs: ", s.num_heads, " heads and ", s.num_kv_heads,
               " KV heads (need >= 1 and H % G == 0)");
  KC_CHECK_ARG(s.head_dim >= 2 && s.head_dim % 2 == 0, "attention_inputs: head_dim ", s.head_dim,
               " must be even and >= 2");
  KC_CHECK_ARG((a.q_norm == nullptr) == (a.k_norm == nullptr), "attention_inputs: q_norm and k_norm come together");
  KC_CHECK_ARG(std::isfinite(a.attention_scaling) && std::isfinite(a.norm_eps) && a.norm_eps >= 0.0f,
               "attention_inputs: attention_scaling ", a.attention_scaling, " and eps ", a.norm_eps,
               " must be finite (eps >= 0)");
  if (s.tokens == 0) return ok_status();
  KC_CHECK_ARG(a.qkv != nullptr && a.positions != nullptr && a.slots != nullptr && a.inv_freq != nullptr &&
                   a.q_out != nullptr && a.k_cache != nullptr && a.v_cache != nullptr,
               "attention_inputs: null pointer");
  return ops_detail::dispatch_act(s.dtype, "attention_inputs", [&](auto tag) -> Status {
    using T = decltype(tag);
    attention_inputs_kernel<T><<<static_cast<unsigned>(s.tokens), kWarps * 32, 0, stream>>>(s, a);
    KC_CUDA_RETURN_IF_LAUNCH_FAILED("attention_inputs_kernel");
    return ok_status();
  });
}

}  // namespace kascade::cuda
