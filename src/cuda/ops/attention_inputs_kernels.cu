// src/cuda/ops/attention_inputs_kernels.cu — q/k norm + RoPE + q split + KV append
// (attention_inputs.h): a block per (token, 8 heads), one warp per head (lanes over rotation
// pairs), the token's cos / sin evaluated once per block.
// Tested by tests/cuda/test_ops_attention_inputs.cpp.
#include <cmath>

#include "cuda/common/cuda_status.h"
#include "cuda/common/programmatic_launch.cuh"
#include "cuda/ops/act_types.cuh"
#include "cuda/ops/attention_inputs.h"

namespace kascade::cuda {
namespace {

constexpr int kWarps = 8;

// Grid (T, ceil((H + 2G) / kWarps)): block (t, y) handles heads y·kWarps .. y·kWarps + 7 of token
// t, one warp per head (lanes over rotation pairs). The block first evaluates the token's cos / sin
// for every rotation pair once into shared memory (every head of the token rotates by the same
// angles), so a decode step — a few tokens — spreads over H + 2G warps instead of 8 per token and
// evaluates each fp64 sincos once per block instead of once per head.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attention_inputs_kernel(AttentionInputsShape s, AttentionInputsArgs a) {
  extern __shared__ float rotation[];  // [2][d / 2]: cos, then sin (times attention_scaling)
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int32_t d = s.head_dim, half = d / 2;
  const int32_t heads = s.num_heads + 2 * s.num_kv_heads;
  const int32_t head = blockIdx.y * kWarps + warp;
  const int32_t first_v = s.num_heads + s.num_kv_heads;
  const bool block_rotates = static_cast<int32_t>(blockIdx.y) * kWarps < first_v;
  const float pos = static_cast<float>(a.positions[t]);
  if (block_rotates) {
    for (int32_t c = threadIdx.x; c < half; c += kWarps * 32) {
      const float angle = pos * a.inv_freq[c];  // fp32 product, as the CPU and HF compute it
      double sin_d, cos_d;
      sincos(static_cast<double>(angle), &sin_d, &cos_d);
      rotation[c] = static_cast<float>(cos_d) * a.attention_scaling;
      rotation[half + c] = static_cast<float>(sin_d) * a.attention_scaling;
    }
    __syncthreads();
  }
  if (head >= heads) return;
  const T* in = static_cast<const T*>(a.qkv) + (t * heads + head) * d;
  const int64_t slot = a.slots[t];
  if (head >= first_v) {  // v head: copy into the cache
    const int32_t g = head - first_v;
    T* dst = static_cast<T*>(a.v_cache) + (slot * s.num_kv_heads + g) * d;
    for (int32_t c = lane; c < d; c += 32) dst[c] = in[c];
    return;
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
    const float cos_a = rotation[c], sin_a = rotation[half + c];
    dst[c] = ops_detail::from_float<T>(x0 * cos_a - x1 * sin_a);
    dst[c + half] = ops_detail::from_float<T>(x1 * cos_a + x0 * sin_a);
  }
}

}  // namespace

Status attention_inputs(const AttentionInputsShape& s, const AttentionInputsArgs& a, cudaStream_t stream,
                        bool programmatic) {
  KC_CHECK_ARG(s.tokens >= 0 && s.tokens <= 0x7fffffff, "attention_inputs: tokens = ", s.tokens);
  KC_CHECK_ARG(s.num_heads >= 1 && s.num_kv_heads >= 1 && s.num_heads % s.num_kv_heads == 0,
               "attention_inputs: ", s.num_heads, " heads and ", s.num_kv_heads,
               " KV heads (need >= 1 and H % G == 0)");
  KC_CHECK_ARG(s.head_dim >= 2 && s.head_dim % 2 == 0 && s.head_dim <= 4096, "attention_inputs: head_dim ",
               s.head_dim, " must be even, >= 2 and <= 4096");
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
    const int32_t heads = s.num_heads + 2 * s.num_kv_heads;
    const dim3 grid(static_cast<unsigned>(s.tokens), static_cast<unsigned>((heads + kWarps - 1) / kWarps));
    const size_t shared = static_cast<size_t>(s.head_dim) * sizeof(float);
    KC_RETURN_IF_ERROR(cuda_status(
        detail::launch_kernel(programmatic, attention_inputs_kernel<T>, grid, dim3(kWarps * 32), shared, stream, s, a),
        "launch of attention_inputs_kernel"));
    return ok_status();
  });
}

}  // namespace kascade::cuda
