// src/cuda/attention/decode_launch.h — Status-returning entry points to the decode kernel's
// instantiations (decode_kernel.cuh). Each mode is compiled in its own .cu (decode_modes.h) so
// they build in parallel; decode_launch.cpp dispatches and turns CUDA errors into Status.
// Tested through the ops (tests/cuda/).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention/decode_params.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda::detail {

enum class DecodeMode {
  kDense,        // o + lse over keys 0..n-1
  kDenseLogits,  // o + lse, and σ·q·k per head (layer-0 anchor)
  kScoring,      // lse and σ·q·k per head, no V (anchor scoring pass)
  kSparse,       // o + lse over index rows
  kSparseFromLogits,  // o + lse over index rows, S from the stored logits, V rows only (anchor's own output)
};

// Launches the kernel for `batch` sequences (grid num_splits x num_slots x batch); programmatic:
// programmatic dependent launch (PassPlan::programmatic, cuda/common/programmatic_launch.cuh).
Status launch_decode_kernel(DecodeMode mode, DType dtype, int32_t head_dim, const DecodeKernelParams& params,
                            int32_t batch, cudaStream_t stream, bool programmatic);

// CTAs of the mode's kernel that fit on one multiprocessor; also raises the kernel's dynamic
// shared-memory limit (called at plan time, never inside a captured run).
Result<int32_t> prepare_decode_kernel(DecodeMode mode, DType dtype, int32_t head_dim);

}  // namespace kascade::cuda::detail
