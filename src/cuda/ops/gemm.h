// src/cuda/ops/gemm.h — the linear layers of the CUDA forward pass through cuBLAS (DESIGN.md §3
// "cuBLAS GEMM wrappers"): y = x · wᵀ (nn.Linear without bias) with 16-bit x and w (bf16 or fp16)
// and fp32 accumulation (CUBLAS_COMPUTE_32F), y in the activation dtype or fp32; `accumulate`
// adds into y (beta = 1: the o_proj / down_proj outputs go straight into the fp32 residual stream).
// Row-major shapes are mapped onto column-major cuBLAS as yᵀ[n, m] = w[n, k]·xᵀ (op T on w).
// Every cuBLAS failure comes back as a Status naming the call, the shape and cuBLAS's status name.
// The handle owns a preallocated cuBLAS workspace (cublasSetWorkspace), so GEMMs allocate nothing
// at run time and can be captured in a CUDA graph.
// Tested by tests/cuda/test_ops_gemm.cpp against an fp64 product of the same rounded inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

class CublasContext {
 public:
  // A cuBLAS handle bound to `stream` with a 32 MiB workspace on the current device.
  static Result<std::unique_ptr<CublasContext>> create(cudaStream_t stream);
  ~CublasContext();
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  // y[m, n] (+)= x[m, k] · w[n, k]ᵀ. x, w: `in_dtype` (bf16 / f16), row-major, device; y: `out_dtype`
  // (in_dtype or f32), row-major with row stride n. 1 <= m, n, k < 2^31.
  Status linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                DType out_dtype, bool accumulate);

  cudaStream_t stream() const { return stream_; }

 private:
  CublasContext() = default;
  void* handle_ = nullptr;     // cublasHandle_t
  void* workspace_ = nullptr;  // device bytes given to cublasSetWorkspace
  cudaStream_t stream_ = nullptr;
};

}  // namespace kascade::cuda
