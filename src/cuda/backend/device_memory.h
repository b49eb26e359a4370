// src/cuda/backend/device_memory.h — device allocations as kascade::BackendBuffer (cudaMalloc,
// released with cudaFree), and a buffer that only grows, for the CUDA backend's scratch: after the
// first call of a given size the ops allocate nothing.
// Tested through the backend (tests/cuda/test_backend_ops.cpp: allocation counts, canaries).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// `bytes` (>= 1) of device memory on the current device; kResourceExhausted naming `what` when
// cudaMalloc fails.
Result<BackendBuffer> device_allocate(size_t bytes, const char* what);

// `bytes` (>= 1) of page-locked host memory (cudaMallocHost), so that a device-to-host copy into it
// is asynchronous; kResourceExhausted naming `what` when the allocation fails.
Result<BackendBuffer> pinned_host_allocate(size_t bytes, const char* what);

// A device buffer that reallocates only when asked for more than it holds; counts allocations.
class GrowingDeviceBuffer {
 public:
  // Makes the buffer hold at least `bytes`; *allocations is incremented when it had to allocate.
  Status ensure(size_t bytes, const char* what, int64_t* allocations);
  void* data() const { return buffer_.data(); }
  template <typename T>
  T* as() const {
    return buffer_.as<T>();
  }

 private:
  BackendBuffer buffer_;
};

}  // namespace kascade::cuda
