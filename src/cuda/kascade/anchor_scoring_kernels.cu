// src/cuda/kascade/anchor_scoring_kernels.cu — the anchor instantiations of decode_kernel:
//   with_output (layer-0 anchor, omnikv filter layers): dense o + lse and the logits σ·q·k;
//   scoring only (other anchors): the exact LSE and the logits, reading K alone.
// Orchestrated by anchor_decode.cpp. Tested by tests/cuda/test_anchor_decode.cpp.
#include "cuda/attention/decode_dispatch.cuh"

namespace kascade::cuda::detail {

cudaError_t launch_scoring_mode(bool with_output, ElementType type, int head_dim, const DecodeKernelParams& params,
                                int batch, cudaStream_t stream, bool programmatic) {
  if (with_output)
    return launch_decode_instance<true, true, false>(type, head_dim, params, batch, stream, programmatic);
  return launch_decode_instance<false, true, false>(type, head_dim, params, batch, stream, programmatic);
}

cudaError_t prepare_scoring_mode(bool with_output, ElementType type, int head_dim, int* ctas_per_sm) {
  if (with_output) return prepare_decode_instance<true, true, false>(type, head_dim, ctas_per_sm);
  return prepare_decode_instance<false, true, false>(type, head_dim, ctas_per_sm);
}

}  // namespace kascade::cuda::detail
