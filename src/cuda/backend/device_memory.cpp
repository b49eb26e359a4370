// src/cuda/backend/device_memory.cpp — device allocations for the CUDA backend (device_memory.h).
// Tested through the backend (tests/cuda/test_backend_ops.cpp).
#include "cuda/backend/device_memory.h"

#include <cuda_runtime_api.h>

namespace kascade::cuda {

Result<BackendBuffer> device_allocate(size_t bytes, const char* what) {
  KC_CHECK_ARG(bytes >= 1, "cuda backend: allocation of 0 bytes for ", what);
  void* data = nullptr;
  const cudaError_t error = cudaMalloc(&data, bytes);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // an out-of-memory error is not sticky; clear it for the next call
    return resource_exhausted("cuda backend: cannot allocate ", bytes, " bytes of device memory for ", what, ": ",
                              cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  }
  return BackendBuffer(data, bytes, [](void* p) { (void)cudaFree(p); });
}

Result<BackendBuffer> pinned_host_allocate(size_t bytes, const char* what) {
  KC_CHECK_ARG(bytes >= 1, "cuda backend: pinned allocation of 0 bytes for ", what);
  void* data = nullptr;
  const cudaError_t error = cudaMallocHost(&data, bytes);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return resource_exhausted("cuda backend: cannot allocate ", bytes, " bytes of pinned host memory for ", what, ": ",
                              cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  }
  return BackendBuffer(data, bytes, [](void* p) { (void)cudaFreeHost(p); });
}

Status GrowingDeviceBuffer::ensure(size_t bytes, const char* what, int64_t* allocations) {
  if (bytes == 0) bytes = 1;
  if (buffer_.data() != nullptr && buffer_.bytes() >= bytes) return ok_status();
  buffer_.reset();
  KC_ASSIGN_OR_RETURN(buffer_, device_allocate(bytes, what));
  if (allocations != nullptr) ++*allocations;
  return ok_status();
}

}  // namespace kascade::cuda
