// src/cuda/common/programmatic_launch.cuh — programmatic dependent launch (PDL, sm_90+) for the
// kernels of a decode step: the host helper that launches a kernel with programmatic stream
// serialization, and the two device calls every kernel so launched makes.
//
// A kernel launched with `programmatic = true` may start while its predecessor in the stream still
// runs: its CTAs become resident as soon as the predecessor calls allow_dependent_grids() (or
// finishes) and resources free up. The contract that keeps it correct, kept by every kernel that
// takes part (norm, small-m linear, RoPE / KV append, SiLU·mul, decode_kernel):
//   1. wait_for_prerequisite_grids() before the first read of anything a kernel of the stream writes
//      and before the first write of anything (no WAR races with a predecessor still reading);
//      only immutable data (weights) may be touched before it — the small-m linear layer prefetches
//      its weight tile into L2 there;
//   2. allow_dependent_grids() only after that wait, so a dependent's own early part (which may only
//      read immutable data) can never overtake anything.
// Without the launch attribute both calls return at once (griddepcontrol.wait has no prerequisite
// grid to wait for), so the kernels are unchanged when PDL is off. Below sm_90 they compile to nothing,
// and the runtime refuses to set the attribute there (CudaBackend::create refuses
// CudaBackendOptions::programmatic_launch below compute capability 9.0 with a Status).
// Tested by tests/cuda/test_ops_gemm.cpp (a producer → consumer chain, both ways) and the GPU runtime's
// greedy-parity tests with RuntimeOptions::programmatic_launch (tests/cuda/test_gpu_runtime_parity.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace kascade::cuda::detail {

// Blocks until every prerequisite grid has completed and its memory operations are visible.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the stream's next programmatically launched kernel start (its CTAs then wait in their own
// wait_for_prerequisite_grids() for this grid to complete).
__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...), with programmatic stream serialization when
// `programmatic` (the kernel must keep the contract above). Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = programmatic ? &attribute : nullptr;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace kascade::cuda::detail
