// src/cuda/kascade/sparse_decode_kernels.cu — the kSparse instantiations of decode_kernel:
// attention over index rows (per KV group through the head map, or per query head), split-K
// across CTAs with the merge fused into the last CTA; and kSparseFromLogits, the same over V rows
// with S read from the anchor's stored logits (the anchor's own sparse output). Plan and run:
// sparse_decode.cpp. Tested by tests/cuda/test_sparse_decode.cpp and test_anchor_decode.cpp.
#include "cuda/attention/decode_dispatch.cuh"

namespace kascade::cuda::detail {

cudaError_t launch_sparse_mode(bool from_logits, ElementType type, int head_dim, const DecodeKernelParams& params,
                               int batch, cudaStream_t stream, bool programmatic) {
  if (from_logits)
    return launch_decode_instance<true, false, true, true>(type, head_dim, params, batch, stream, programmatic);
  return launch_decode_instance<true, false, true>(type, head_dim, params, batch, stream, programmatic);
}

cudaError_t prepare_sparse_mode(bool from_logits, ElementType type, int head_dim, int* ctas_per_sm) {
  if (from_logits) return prepare_decode_instance<true, false, true, true>(type, head_dim, ctas_per_sm);
  return prepare_decode_instance<true, false, true>(type, head_dim, ctas_per_sm);
}

}  // namespace kascade::cuda::detail
