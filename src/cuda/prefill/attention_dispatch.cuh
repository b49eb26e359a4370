// src/cuda/prefill/attention_dispatch.cuh — run-time (element type, head dim) → compile-time
// dispatch of one prefill_attention_kernel mode, for the .cu files that instantiate it
// (dense_prefill_kernels.cu, lse_prefill_kernels.cu, sparse_prefill_kernels.cu). Tested through
// the ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/kernel_attributes.cuh"
#include "cuda/prefill/attention_kernel.cuh"

namespace kascade::cuda::prefill {

template <bool kPV, bool kSparse, bool kWgmma, typename Fn>
cudaError_t dispatch_attention_type_dim(ElementType type, int head_dim, Fn&& fn) {
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(prefill_attention_kernel<__half, 64, kPV, kSparse, kWgmma>, AttentionSmem<64, kPV>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(prefill_attention_kernel<__half, 128, kPV, kSparse, kWgmma>, AttentionSmem<128, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(prefill_attention_kernel<__nv_bfloat16, 64, kPV, kSparse, kWgmma>, AttentionSmem<64, kPV>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(prefill_attention_kernel<__nv_bfloat16, 128, kPV, kSparse, kWgmma>, AttentionSmem<128, kPV>::kBytes);
  return cudaErrorInvalidValue;
}

template <bool kPV, bool kSparse, typename Fn>
cudaError_t dispatch_attention_kernel(ElementType type, int head_dim, bool wgmma, Fn&& fn) {
  return wgmma ? dispatch_attention_type_dim<kPV, kSparse, true>(type, head_dim, fn)
               : dispatch_attention_type_dim<kPV, kSparse, false>(type, head_dim, fn);
}

template <bool kPV, bool kSparse>
cudaError_t launch_attention_instance(ElementType type, int head_dim, bool wgmma, const AttentionArgs& args,
                                      dim3 grid, cudaStream_t stream) {
  return dispatch_attention_kernel<kPV, kSparse>(type, head_dim, wgmma, [&](auto kernel, size_t smem_bytes) {
    kernel<<<grid, kThreads, smem_bytes, stream>>>(args);
    return cudaGetLastError();
  });
}

// Raises the dynamic shared-memory limit; with wgmma, also checks that the kernel was built for
// sm_90a (binaryVersion 90) so that it never reaches its trap.
template <bool kPV, bool kSparse>
cudaError_t prepare_attention_instance(ElementType type, int head_dim, bool wgmma) {
  return dispatch_attention_kernel<kPV, kSparse>(type, head_dim, wgmma, [&](auto kernel, size_t smem_bytes) {
    return detail::allow_dynamic_smem(kernel, smem_bytes, /*require_sm90a=*/wgmma);
  });
}

}  // namespace kascade::cuda::prefill
