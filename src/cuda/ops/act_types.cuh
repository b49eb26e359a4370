// src/cuda/ops/act_types.cuh — the activation element types of the CUDA forward pass (bf16, fp16)
// and their fp32 conversions, plus the dispatch from kascade::DType to a kernel template.
// Device/host header for the .cu files of src/cuda/ops; tested through every op's test
// (tests/cuda/test_ops_*.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda::ops_detail {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// Calls f(T{}) with T the device type of a 16-bit activation dtype; f32 is refused (the CUDA
// forward pass keeps activations in bf16 or fp16, DESIGN.md §3 kernel contract).
template <typename F>
Status dispatch_act(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kBF16: return f(__nv_bfloat16{});
    case DType::kF16: return f(__half{});
    case DType::kF32: break;
  }
  return unsupported(op, ": activation dtype ", dtype_name(dtype), " is not supported on CUDA (bf16 or f16)");
}

}  // namespace kascade::cuda::ops_detail
