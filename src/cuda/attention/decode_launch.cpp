// src/cuda/attention/decode_launch.cpp — dispatch from a DecodeMode to the .cu that instantiates
// it (decode_launch.h, decode_modes.h), with CUDA errors turned into Status values.
// Tested through the ops (tests/cuda/).
#include "cuda/attention/decode_launch.h"

#include "cuda/attention/decode_modes.h"
#include "cuda/common/cuda_status.h"

namespace kascade::cuda::detail {
namespace {

Result<ElementType> element_type(DType dtype, int32_t head_dim) {
  if (head_dim != 64 && head_dim != 128)
    return unsupported("decode kernel: head_dim ", head_dim, " is not built (built: 64 and 128)");
  if (dtype == DType::kF16) return ElementType::kF16;
  if (dtype == DType::kBF16) return ElementType::kBF16;
  return unsupported("decode kernel: dtype ", dtype_name(dtype), " is not built (built: f16 and bf16)");
}

}  // namespace

Status launch_decode_kernel(DecodeMode mode, DType dtype, int32_t head_dim, const DecodeKernelParams& params,
                            int32_t batch, cudaStream_t stream, bool programmatic) {
  KC_ASSIGN_OR_RETURN(const ElementType type, element_type(dtype, head_dim));
  if (batch < 1) return invalid_argument("decode launch: batch is ", batch, "; expected >= 1");
  if (params.num_splits < 1 || params.num_splits > kMaxSplits)
    return internal_error("decode launch: num_splits ", params.num_splits, " outside 1..", kMaxSplits);
  cudaError_t error = cudaErrorInvalidValue;
  switch (mode) {
    case DecodeMode::kDense:
      error = launch_dense_mode(type, head_dim, params, batch, stream, programmatic);
      break;
    case DecodeMode::kDenseLogits:
      error = launch_scoring_mode(true, type, head_dim, params, batch, stream, programmatic);
      break;
    case DecodeMode::kScoring:
      error = launch_scoring_mode(false, type, head_dim, params, batch, stream, programmatic);
      break;
    case DecodeMode::kSparse:
    case DecodeMode::kSparseFromLogits:
      error = launch_sparse_mode(mode == DecodeMode::kSparseFromLogits, type, head_dim, params, batch, stream,
                                 programmatic);
      break;
  }
  return cuda_status(error, "launch of the decode kernel");
}

Result<int32_t> prepare_decode_kernel(DecodeMode mode, DType dtype, int32_t head_dim) {
  KC_ASSIGN_OR_RETURN(const ElementType type, element_type(dtype, head_dim));
  int ctas = 0;
  cudaError_t error = cudaErrorInvalidValue;
  switch (mode) {
    case DecodeMode::kDense:
      error = prepare_dense_mode(type, head_dim, &ctas);
      break;
    case DecodeMode::kDenseLogits:
      error = prepare_scoring_mode(true, type, head_dim, &ctas);
      break;
    case DecodeMode::kScoring:
      error = prepare_scoring_mode(false, type, head_dim, &ctas);
      break;
    case DecodeMode::kSparse:
    case DecodeMode::kSparseFromLogits:
      error = prepare_sparse_mode(mode == DecodeMode::kSparseFromLogits, type, head_dim, &ctas);
      break;
  }
  KC_RETURN_IF_ERROR(cuda_status(error, "preparing the decode kernel"));
  if (ctas < 1) return internal_error("decode kernel does not fit on a multiprocessor");
  return static_cast<int32_t>(ctas);
}

}  // namespace kascade::cuda::detail
