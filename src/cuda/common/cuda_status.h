// src/cuda/common/cuda_status.h — turning CUDA runtime errors into kascade Status values.
// Host-only; every CUDA call the backend makes goes through KC_CUDA_RETURN_IF_ERROR so a failure
// reaches the caller as a Status naming the call ("cudaMemsetAsync(workspace): invalid argument"),
// never as an abort. Exercised by every test in tests/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include "kascade/status.h"

namespace kascade::cuda {

// kOk for cudaSuccess; otherwise kInternal naming `what` and the CUDA error string.
inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ok_status();
  return internal_error(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

}  // namespace kascade::cuda

// Returns a Status from the enclosing function when the CUDA call fails.
#define KC_CUDA_RETURN_IF_ERROR(expr) KC_RETURN_IF_ERROR(::kascade::cuda::cuda_status((expr), #expr))

// After a kernel launch: reports launch-configuration errors (cudaGetLastError) as a Status.
#define KC_CUDA_RETURN_IF_LAUNCH_FAILED(kernel_name) \
  KC_RETURN_IF_ERROR(::kascade::cuda::cuda_status(cudaGetLastError(), "launch of " kernel_name))
