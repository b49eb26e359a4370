// src/cuda/prefill/causal_launch.cpp — kernel choice and grid of a causal attention pass
// (causal_launch.h). choose_causal_kernel is tested by tests/cuda/test_prefill_plan.cpp (CPU); the
// launches through dense_prefill / prefill_lse / anchor_prefill (tests/cuda/test_prefill_*.cpp).
#include "cuda/prefill/causal_launch.h"

#include <limits>

#include "cuda/common/cuda_status.h"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda/prefill/ws_tensor_map.h"

namespace kascade::cuda::prefill {

const char* causal_kernel_name(CausalKernel kernel) {
  switch (kernel) {
    case CausalKernel::kMma:
      return "mma";
    case CausalKernel::kWgmma:
      return "wgmma";
    case CausalKernel::kWarpSpecialized:
      return "ws";
    case CausalKernel::kWarpSpecializedTma:
      return "ws_tma";
  }
  return "unknown";
}

CausalKernel choose_causal_kernel(const PrefillPlan& plan, bool kv_tma_eligible) {
  switch (plan.kernels) {
    case PrefillKernels::kAuto:
      return kv_tma_eligible ? CausalKernel::kWarpSpecializedTma : CausalKernel::kMma;
    case PrefillKernels::kWgmma:
      return CausalKernel::kWgmma;
    case PrefillKernels::kWarpSpecialized:
      return CausalKernel::kWarpSpecialized;
    case PrefillKernels::kWarpSpecializedTma:
      return kv_tma_eligible ? CausalKernel::kWarpSpecializedTma : CausalKernel::kWarpSpecialized;
    case PrefillKernels::kMma:
      break;
  }
  return CausalKernel::kMma;
}

Status launch_causal_attention(const PrefillPlan& plan, CausalPass pass, AttentionArgs args, int32_t batch,
                               int32_t num_kv_heads, cudaStream_t stream) {
  const ElementType type = element_type(plan.shape.dtype);
  const int head_dim = plan.shape.head_dim;
  CausalKernel kernel = choose_causal_kernel(plan, ws_tma_eligible(args.call, head_dim));
  WsKvMaps maps{};
  if (kernel == CausalKernel::kWarpSpecializedTma) {
    const Status encoded = encode_ws_kv_maps(args.call, head_dim, maps);
    // kAuto never fails where mma.sync would run: a driver that refuses the maps means mma.sync.
    if (!encoded.ok() && plan.kernels != PrefillKernels::kAuto) return encoded;
    if (!encoded.ok()) kernel = CausalKernel::kMma;
  }
  if (kernel == CausalKernel::kMma || kernel == CausalKernel::kWgmma) {
    const bool wgmma = kernel == CausalKernel::kWgmma;
    const dim3 grid = dense_grid(plan.shape.max_q_len, args.call.group_size, num_kv_heads, batch);
    KC_CUDA_RETURN_IF_ERROR(pass == CausalPass::kDense
                                ? launch_dense_attention(type, head_dim, wgmma, args, grid, stream)
                                : launch_lse_attention(type, head_dim, wgmma, args, grid, stream));
    return ok_status();
  }
  const int64_t row_blocks = dense_row_blocks(plan.shape.max_q_len, args.call.group_size);
  const int64_t units = row_blocks * num_kv_heads * batch;
  KC_CHECK_ARG(units <= std::numeric_limits<int32_t>::max(), "the call has ", units,
               " (row block, KV group, sequence) units; the warp-specialised kernels take at most 2^31 - 1");
  args.row_blocks = static_cast<int32_t>(row_blocks);
  const int ctas = ws_grid_ctas(units, plan.num_sms);
  const WsKvMaps* const maps_arg = kernel == CausalKernel::kWarpSpecializedTma ? &maps : nullptr;
  KC_CUDA_RETURN_IF_ERROR(pass == CausalPass::kDense
                              ? launch_ws_dense_attention(type, head_dim, args, maps_arg, ctas, stream)
                              : launch_ws_lse_attention(type, head_dim, args, maps_arg, ctas, stream));
  return ok_status();
}

}  // namespace kascade::cuda::prefill
