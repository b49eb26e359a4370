// src/cuda/prefill/attention_dispatch.cuh — run-time (element type, head dim) → compile-time
// dispatch of one prefill_attention_kernel mode, for the .cu files that instantiate it
// (dense_prefill_kernels.cu, lse_prefill_kernels.cu, sparse_prefill_kernels.cu). Tested through
// the ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime.h>

#include "cuda/prefill/attention_kernel.cuh"

namespace kascade::cuda::prefill {

template <bool kPV, bool kSparse, typename Fn>
cudaError_t dispatch_attention_kernel(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(prefill_attention_kernel<__half, 64, kPV, kSparse>, AttentionSmem<64, kPV>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(prefill_attention_kernel<__half, 128, kPV, kSparse>, AttentionSmem<128, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(prefill_attention_kernel<__nv_bfloat16, 64, kPV, kSparse>, AttentionSmem<64, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(prefill_attention_kernel<__nv_bfloat16, 128, kPV, kSparse>, AttentionSmem<128, kPV>::kBytes);
  return cudaErrorInvalidValue;
}

template <bool kPV, bool kSparse>
cudaError_t launch_attention_instance(ElementType type, int head_dim, const AttentionArgs& args, dim3 grid,
                                      cudaStream_t stream) {
  return dispatch_attention_kernel<kPV, kSparse>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    kernel<<<grid, kThreads, smem_bytes, stream>>>(args);
    return cudaGetLastError();
  });
}

template <bool kPV, bool kSparse>
cudaError_t prepare_attention_instance(ElementType type, int head_dim) {
  return dispatch_attention_kernel<kPV, kSparse>(type, head_dim, [&](auto kernel, size_t smem_bytes) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  });
}

}  // namespace kascade::cuda::prefill
