// src/cuda/prefill/ws_attention_kernels.cu — the warp-specialised sm_90a prefill kernels
// (ws_attention_kernel.cuh): dense causal prefill (o + lse, kPV = true) and the anchor's LSE pass
// (kPV = false), for f16/bf16 × head dim 64/128 × K/V producer (cp.async or TMA), with their launchers and preparation (dynamic
// shared-memory limit; refusal when the build holds no sm_90a code). Entry points: prefill_launch.h.
// Tested by tests/cuda/test_prefill_dense.cpp, test_prefill_select.cpp, test_prefill_anchor.cpp.
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/ws_attention_kernel.cuh"

namespace kascade::cuda::prefill {
namespace {

template <bool kPV, bool kTma, typename Fn>
cudaError_t dispatch_ws(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(ws::ws_attention_kernel<__half, 64, kPV, kTma>, ws::WsSmem<64, kPV>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(ws::ws_attention_kernel<__half, 128, kPV, kTma>, ws::WsSmem<128, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(ws::ws_attention_kernel<__nv_bfloat16, 64, kPV, kTma>, ws::WsSmem<64, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(ws::ws_attention_kernel<__nv_bfloat16, 128, kPV, kTma>, ws::WsSmem<128, kPV>::kBytes);
  return cudaErrorInvalidValue;
}

template <bool kPV, bool kTma>
cudaError_t launch_ws_variant(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps& maps,
                              int ctas, cudaStream_t stream) {
  return dispatch_ws<kPV, kTma>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    kernel<<<dim3(static_cast<unsigned>(ctas)), kWsThreads, smem_bytes, stream>>>(args, maps);
    return cudaGetLastError();
  });
}

template <bool kPV>
cudaError_t launch_ws(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps, int ctas,
                      cudaStream_t stream) {
  if (ctas < 1) return cudaErrorInvalidValue;
  if (maps != nullptr) return launch_ws_variant<kPV, true>(type, head_dim, args, *maps, ctas, stream);
  const WsKvMaps unused{};
  return launch_ws_variant<kPV, false>(type, head_dim, args, unused, ctas, stream);
}

// Raises the dynamic shared-memory limit after checking that the kernel holds sm_90a code
// (binaryVersion 90), so that it never reaches its trap.
template <bool kPV, bool kTma>
cudaError_t prepare_ws(ElementType type, int head_dim) {
  return dispatch_ws<kPV, kTma>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    cudaFuncAttributes attributes{};
    const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
    if (e != cudaSuccess) return e;
    if (attributes.binaryVersion < 90) return cudaErrorInvalidDeviceFunction;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  });
}

}  // namespace

cudaError_t launch_ws_dense_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                      int ctas, cudaStream_t stream) {
  return launch_ws<true>(type, head_dim, args, maps, ctas, stream);
}

cudaError_t launch_ws_lse_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                    int ctas, cudaStream_t stream) {
  return launch_ws<false>(type, head_dim, args, maps, ctas, stream);
}

cudaError_t prepare_ws_attention(ElementType type, int head_dim) {
  for (const cudaError_t e : {prepare_ws<true, false>(type, head_dim), prepare_ws<false, false>(type, head_dim),
                              prepare_ws<true, true>(type, head_dim), prepare_ws<false, true>(type, head_dim)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace kascade::cuda::prefill
