// src/cuda/prefill/ws_dispatch.cuh — run-time (element type, head dim) → compile-time dispatch of one
// warp-specialised attention kernel mode (ws_attention_kernel.cuh), its launch on a persistent grid,
// and its preparation (refusal without sm_90a code, dynamic shared-memory limit), for the .cu files
// that instantiate it (ws_attention_kernels.cu: dense / LSE; ws_sparse_kernels.cu: sparse).
// Tested through the ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/kernel_attributes.cuh"
#include "cuda/prefill/ws_attention_kernel.cuh"

namespace kascade::cuda::prefill {

template <bool kPV, bool kTma, ws::WsKeys kKeys, typename Fn>
cudaError_t dispatch_ws(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(ws::ws_attention_kernel<__half, 64, kPV, kTma, kKeys>, ws::WsSmem<64, kPV, kKeys>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(ws::ws_attention_kernel<__half, 128, kPV, kTma, kKeys>, ws::WsSmem<128, kPV, kKeys>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(ws::ws_attention_kernel<__nv_bfloat16, 64, kPV, kTma, kKeys>, ws::WsSmem<64, kPV, kKeys>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(ws::ws_attention_kernel<__nv_bfloat16, 128, kPV, kTma, kKeys>, ws::WsSmem<128, kPV, kKeys>::kBytes);
  return cudaErrorInvalidValue;
}

template <bool kPV, bool kTma, ws::WsKeys kKeys>
cudaError_t launch_ws_variant(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps& maps,
                              int ctas, cudaStream_t stream) {
  if (ctas < 1) return cudaErrorInvalidValue;
  return dispatch_ws<kPV, kTma, kKeys>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    kernel<<<dim3(static_cast<unsigned>(ctas)), kWsThreads, smem_bytes, stream>>>(args, maps);
    return cudaGetLastError();
  });
}

// Raises the dynamic shared-memory limit after checking that the kernel holds sm_90a code
// (binaryVersion 90), so that it never reaches its trap.
template <bool kPV, bool kTma, ws::WsKeys kKeys>
cudaError_t prepare_ws(ElementType type, int head_dim) {
  return dispatch_ws<kPV, kTma, kKeys>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    return detail::allow_dynamic_smem(kernel, smem_bytes, /*require_sm90a=*/true);
  });
}

}  // namespace kascade::cuda::prefill
