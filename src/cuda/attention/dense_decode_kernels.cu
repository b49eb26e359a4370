// src/cuda/attention/dense_decode_kernels.cu — dense split-KV decode over the paged cache: the
// kDense instantiations of decode_kernel (o + lse over keys 0..n-1, split-KV merge fused into the
// last CTA). The plan and run entry points are in dense_decode.cpp. Tested by
// tests/cuda/test_dense_decode.cpp against ref::dense_attention_ref and an fp64 recomputation.
#include "cuda/attention/decode_dispatch.cuh"

namespace kascade::cuda {
namespace detail {

cudaError_t launch_dense_mode(ElementType type, int head_dim, const DecodeKernelParams& params, int batch,
                              cudaStream_t stream, bool programmatic) {
  return launch_decode_instance<true, false, false>(type, head_dim, params, batch, stream, programmatic);
}

cudaError_t prepare_dense_mode(ElementType type, int head_dim, int* ctas_per_sm) {
  return prepare_decode_instance<true, false, false>(type, head_dim, ctas_per_sm);
}

}  // namespace detail
}  // namespace kascade::cuda
