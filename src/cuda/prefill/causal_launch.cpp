// src/cuda/prefill/causal_launch.cpp — kernel family and grid of a causal attention pass
// (causal_launch.h). Tested through dense_prefill / prefill_lse / anchor_prefill (tests/cuda/).
#include "cuda/prefill/causal_launch.h"

#include <limits>

#include "cuda/common/cuda_status.h"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda/prefill/ws_tensor_map.h"

namespace kascade::cuda::prefill {

Status launch_causal_attention(const PrefillPlan& plan, CausalPass pass, AttentionArgs args, int32_t batch,
                               int32_t num_kv_heads, cudaStream_t stream) {
  const ElementType type = element_type(plan.shape.dtype);
  const int head_dim = plan.shape.head_dim;
  if (!plan.warp_specialized) {
    const dim3 grid = dense_grid(plan.shape.max_q_len, args.call.group_size, num_kv_heads, batch);
    KC_CUDA_RETURN_IF_ERROR(pass == CausalPass::kDense
                                ? launch_dense_attention(type, head_dim, plan.wgmma, args, grid, stream)
                                : launch_lse_attention(type, head_dim, plan.wgmma, args, grid, stream));
    return ok_status();
  }
  const int64_t row_blocks = dense_row_blocks(plan.shape.max_q_len, args.call.group_size);
  const int64_t units = row_blocks * num_kv_heads * batch;
  KC_CHECK_ARG(units <= std::numeric_limits<int32_t>::max(), "the call has ", units,
               " (row block, KV group, sequence) units; the warp-specialised kernels take at most 2^31 - 1");
  args.row_blocks = static_cast<int32_t>(row_blocks);
  const int ctas = ws_grid_ctas(units, plan.num_sms);
  // TMA producer when planned and the call's K/V layout allows it (else the cp.async producer).
  WsKvMaps maps{};
  const bool tma = plan.ws_tma && ws_tma_eligible(args.call, head_dim);
  if (tma) KC_RETURN_IF_ERROR(encode_ws_kv_maps(args.call, head_dim, maps));
  const WsKvMaps* const maps_arg = tma ? &maps : nullptr;
  KC_CUDA_RETURN_IF_ERROR(pass == CausalPass::kDense
                              ? launch_ws_dense_attention(type, head_dim, args, maps_arg, ctas, stream)
                              : launch_ws_lse_attention(type, head_dim, args, maps_arg, ctas, stream));
  return ok_status();
}

}  // namespace kascade::cuda::prefill
