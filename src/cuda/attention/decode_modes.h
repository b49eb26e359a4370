// src/cuda/attention/decode_modes.h — the per-mode launchers each .cu file of the decode kernel
// exports (dense_decode_kernels.cu, anchor_scoring_kernels.cu, sparse_decode_kernels.cu). They
// speak cudaError_t only, so the .cu files need no host library headers; decode_launch.cpp wraps
// them into Status-returning calls. Tested through the ops (tests/cuda/).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/attention/decode_params.h"

namespace kascade::cuda::detail {

enum class ElementType : int { kF16 = 0, kBF16 = 1 };

// Launch grid (num_splits, num_slots, batch); programmatic: programmatic dependent launch
// (cuda/common/programmatic_launch.cuh). cudaErrorInvalidValue for an unbuilt (type, head dim).
cudaError_t launch_dense_mode(ElementType type, int head_dim, const DecodeKernelParams& params, int batch,
                              cudaStream_t stream, bool programmatic);
cudaError_t launch_scoring_mode(bool with_output, ElementType type, int head_dim, const DecodeKernelParams& params,
                                int batch, cudaStream_t stream, bool programmatic);
cudaError_t launch_sparse_mode(bool from_logits, ElementType type, int head_dim, const DecodeKernelParams& params,
                               int batch, cudaStream_t stream, bool programmatic);

// Raises the kernel's dynamic shared-memory limit and reports how many CTAs fit per SM.
cudaError_t prepare_dense_mode(ElementType type, int head_dim, int* ctas_per_sm);
cudaError_t prepare_scoring_mode(bool with_output, ElementType type, int head_dim, int* ctas_per_sm);
cudaError_t prepare_sparse_mode(bool from_logits, ElementType type, int head_dim, int* ctas_per_sm);

}  // namespace kascade::cuda::detail
