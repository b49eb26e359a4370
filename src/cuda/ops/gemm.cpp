// src/cuda/ops/gemm.cpp — cuBLAS linear layers (gemm.h). Tested by tests/cuda/test_ops_gemm.cpp.
#include "cuda/ops/gemm.h"

#include <cublas_v2.h>

#include <limits>

#include "cuda/common/cuda_status.h"

namespace kascade::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

Status cublas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  return internal_error(what, ": ", cublasGetStatusName(status), " (", cublasGetStatusString(status), ")");
}

cublasHandle_t as_handle(void* handle) { return static_cast<cublasHandle_t>(handle); }

Result<cudaDataType_t> cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kF32: return CUDA_R_32F;
  }
  return invalid_argument("unknown dtype");
}

}  // namespace

Result<std::unique_ptr<CublasContext>> CublasContext::create(cudaStream_t stream) {
  std::unique_ptr<CublasContext> context(new CublasContext());
  context->stream_ = stream;
  cublasHandle_t handle = nullptr;
  KC_RETURN_IF_ERROR(cublas_status(cublasCreate(&handle), "cublasCreate"));
  context->handle_ = handle;
  KC_RETURN_IF_ERROR(cublas_status(cublasSetStream(handle, stream), "cublasSetStream"));
  const cudaError_t error = cudaMalloc(&context->workspace_, kWorkspaceBytes);
  if (error != cudaSuccess) {
    context->workspace_ = nullptr;
    (void)cudaGetLastError();
    return resource_exhausted("cuBLAS workspace: cannot allocate ", kWorkspaceBytes, " bytes of device memory: ",
                              cudaGetErrorString(error));
  }
  KC_RETURN_IF_ERROR(
      cublas_status(cublasSetWorkspace(handle, context->workspace_, kWorkspaceBytes), "cublasSetWorkspace"));
  return context;
}

CublasContext::~CublasContext() {
  if (handle_ != nullptr) (void)cublasDestroy(as_handle(handle_));
  if (workspace_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFree(workspace_);
  }
}

Status CublasContext::linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                             DType out_dtype, bool accumulate) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  KC_CHECK_ARG(m >= 1 && n >= 1 && k >= 1 && m <= kMax && n <= kMax && k <= kMax, "linear: shape m = ", m,
               ", n = ", n, ", k = ", k, " outside [1, 2^31)");
  KC_CHECK_ARG(x != nullptr && w != nullptr && y != nullptr, "linear: null pointer");
  KC_CHECK_ARG(in_dtype == DType::kBF16 || in_dtype == DType::kF16, "linear: input dtype ", dtype_name(in_dtype),
               " is not supported (bf16 or f16)");
  KC_CHECK_ARG(out_dtype == in_dtype || out_dtype == DType::kF32, "linear: output dtype ", dtype_name(out_dtype),
               " for ", dtype_name(in_dtype), " inputs (the input dtype or f32)");
  KC_ASSIGN_OR_RETURN(const cudaDataType_t ab_type, cuda_type(in_dtype));
  KC_ASSIGN_OR_RETURN(const cudaDataType_t c_type, cuda_type(out_dtype));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  // Column-major: C[n, m] = op(A)[n, k] · B[k, m] with A = w (k × n col-major, transposed), B = xᵀ.
  const cublasStatus_t status =
      cublasGemmEx(as_handle(handle_), CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, w, ab_type, ki, x, ab_type, ki,
                   &beta, y, c_type, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    Status s = cublas_status(status, "cublasGemmEx");
    return s.with_context("linear [" + std::to_string(m) + ", " + std::to_string(k) + "] x [" + std::to_string(n) +
                          ", " + std::to_string(k) + "]^T");
  }
  return ok_status();
}

}  // namespace kascade::cuda
