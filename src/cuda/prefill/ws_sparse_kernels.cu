// src/cuda/prefill/ws_sparse_kernels.cu — the warp-specialised sm_90a sparse (reuse) prefill kernel:
// ws_attention_kernel.cuh with gathered key lists (WsKeys::kGathered: GatherProducer of
// ws_gather_producer.cuh, the dense kernel's wgmma consumers) for f16/bf16 × head dim 64/128, with
// its launcher and preparation (ws_dispatch.cuh). Entry points: prefill_launch.h.
// Tested by tests/cuda/test_prefill_sparse.cpp and test_prefill_anchor.cpp (warp-specialised variants).
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/ws_dispatch.cuh"

namespace kascade::cuda::prefill {

cudaError_t launch_ws_sparse_attention(ElementType type, int head_dim, const AttentionArgs& args, int ctas,
                                       cudaStream_t stream) {
  const WsKvMaps unused{};
  return launch_ws_variant<true, false, ws::WsKeys::kGathered>(type, head_dim, args, unused, ctas, stream);
}

cudaError_t prepare_ws_sparse_attention(ElementType type, int head_dim) {
  return prepare_ws<true, false, ws::WsKeys::kGathered>(type, head_dim);
}

}  // namespace kascade::cuda::prefill
