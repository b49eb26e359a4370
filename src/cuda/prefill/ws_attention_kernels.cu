// src/cuda/prefill/ws_attention_kernels.cu — the warp-specialised sm_90a causal prefill kernels
// (ws_attention_kernel.cuh): dense causal prefill (o + lse, kPV = true) and the anchor's LSE pass
// (kPV = false), for f16/bf16 × head dim 64/128 × K/V producer (cp.async or TMA), with their
// launchers and preparation (ws_dispatch.cuh). Entry points: prefill_launch.h.
// Tested by tests/cuda/test_prefill_dense.cpp, test_prefill_select.cpp, test_prefill_anchor.cpp.
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/ws_dispatch.cuh"

namespace kascade::cuda::prefill {
namespace {

template <bool kPV>
cudaError_t launch_ws(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps, int ctas,
                      cudaStream_t stream) {
  if (maps != nullptr) return launch_ws_variant<kPV, true, ws::WsKeys::kCausal>(type, head_dim, args, *maps, ctas, stream);
  const WsKvMaps unused{};
  return launch_ws_variant<kPV, false, ws::WsKeys::kCausal>(type, head_dim, args, unused, ctas, stream);
}

}  // namespace

cudaError_t launch_ws_dense_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                      int ctas, cudaStream_t stream) {
  return launch_ws<true>(type, head_dim, args, maps, ctas, stream);
}

cudaError_t launch_ws_lse_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                    int ctas, cudaStream_t stream) {
  return launch_ws<false>(type, head_dim, args, maps, ctas, stream);
}

cudaError_t prepare_ws_attention(ElementType type, int head_dim) {
  using ws::WsKeys;
  for (const cudaError_t e :
       {prepare_ws<true, false, WsKeys::kCausal>(type, head_dim), prepare_ws<false, false, WsKeys::kCausal>(type, head_dim),
        prepare_ws<true, true, WsKeys::kCausal>(type, head_dim), prepare_ws<false, true, WsKeys::kCausal>(type, head_dim),
        prepare_ws_sparse_attention(type, head_dim), prepare_ws_pooled_scores(type, head_dim)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace kascade::cuda::prefill
