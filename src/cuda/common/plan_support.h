// src/cuda/common/plan_support.h — what every CUDA plan needs (host only): the alignment of the
// buffers it lays out in a workspace, the typed view of a buffer at its offset, and the
// multiprocessor count of the current device it sizes its grids for, and whether a device has the
// sm_90 launch features (clusters, programmatic dependent launch). Exercised by the plan tests in tests/cuda/ (test_decode_plan.cpp,
// test_prefill_plan.cpp, test_radix_topk.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/common/cuda_status.h"
#include "kascade/status.h"

namespace kascade::cuda::detail {

// Every buffer inside a workspace starts on a 256-byte boundary.
inline constexpr size_t kWorkspaceAlign = 256;
inline constexpr size_t align_workspace_bytes(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// The buffer of type T at byte `offset` of a workspace (offsets from a plan's layout).
template <typename T>
inline T* workspace_at(void* workspace, size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(workspace) + offset);
}

// Multiprocessors of the current device.
inline Result<int32_t> current_multiprocessor_count() {
  int device = 0, sms = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<int32_t>(sms);
}

// Whether `device` has the sm_90 launch features — thread-block clusters and programmatic dependent
// launch (compute capability 9.0 and later).
inline Result<bool> device_has_sm90_launch_features(int device) {
  int major = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

// Whether the current device launches thread-block clusters (compute capability 9.0 and later).
inline Result<bool> current_device_has_clusters() {
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  return device_has_sm90_launch_features(device);
}

}  // namespace kascade::cuda::detail
