// src/cuda/common/kernel_attributes.cuh — host helper every kernel family's prepare step shares:
// raise a kernel's dynamic shared-memory limit, first refusing (cudaErrorInvalidDeviceFunction) a
// wgmma kernel whose binary holds no sm_90a code, so that it never reaches its trap.
// Tested through the ops' prepare paths (tests/cuda/test_prefill_*.cpp, test_decode_*.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace kascade::cuda::detail {

template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t smem_bytes, bool require_sm90a) {
  if (require_sm90a) {
    cudaFuncAttributes attributes{};
    const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
    if (e != cudaSuccess) return e;
    if (attributes.binaryVersion < 90) return cudaErrorInvalidDeviceFunction;
  }
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
}

}  // namespace kascade::cuda::detail
