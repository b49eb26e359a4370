// src/cuda/attention/decode_dispatch.cuh — run-time (element type, head dim) → compile-time
// dispatch of one decode_kernel mode, for the .cu files that instantiate it. An unbuilt pair
// returns cudaErrorInvalidValue (decode_launch.cpp has already refused it with a Status naming
// the value). Tested through the ops (tests/cuda/).
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/decode_kernel.cuh"
#include "cuda/common/kernel_attributes.cuh"
#include "cuda/attention/decode_modes.h"

namespace kascade::cuda::detail {

template <bool kPV, bool kLogits, bool kIndexed, bool kStoredLogits, typename Fn>
cudaError_t dispatch_decode_kernel(ElementType type, int head_dim, Fn&& fn) {
  constexpr bool S = kStoredLogits;
  if (type == ElementType::kF16 && head_dim == 64)
    return fn(decode_kernel<__half, 64, kPV, kLogits, kIndexed, S>, DecodeSmem<64, kPV, S, kLogits>::kBytes);
  if (type == ElementType::kF16 && head_dim == 128)
    return fn(decode_kernel<__half, 128, kPV, kLogits, kIndexed, S>, DecodeSmem<128, kPV, S, kLogits>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 64)
    return fn(decode_kernel<__nv_bfloat16, 64, kPV, kLogits, kIndexed, S>, DecodeSmem<64, kPV, S, kLogits>::kBytes);
  if (type == ElementType::kBF16 && head_dim == 128)
    return fn(decode_kernel<__nv_bfloat16, 128, kPV, kLogits, kIndexed, S>, DecodeSmem<128, kPV, S, kLogits>::kBytes);
  return cudaErrorInvalidValue;
}

template <bool kPV, bool kLogits, bool kIndexed, bool kStoredLogits = false>
cudaError_t launch_decode_instance(ElementType type, int head_dim, const DecodeKernelParams& params, int batch,
                                   cudaStream_t stream, bool programmatic) {
  return dispatch_decode_kernel<kPV, kLogits, kIndexed, kStoredLogits>(type, head_dim, [&](auto kernel,
                                                                                           size_t smem_bytes) {
    const dim3 grid(params.num_splits, params.num_slots, batch);
    return launch_kernel(programmatic, kernel, grid, dim3(kDecodeThreads), smem_bytes, stream, params);
  });
}

template <bool kPV, bool kLogits, bool kIndexed, bool kStoredLogits = false>
cudaError_t prepare_decode_instance(ElementType type, int head_dim, int* ctas_per_sm) {
  return dispatch_decode_kernel<kPV, kLogits, kIndexed, kStoredLogits>(type, head_dim, [&](auto kernel,
                                                                                           size_t smem_bytes) {
    const cudaError_t error = allow_dynamic_smem(kernel, smem_bytes, /*require_sm90a=*/false);
    if (error != cudaSuccess) return error;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, kDecodeThreads, smem_bytes);
  });
}

}  // namespace kascade::cuda::detail
