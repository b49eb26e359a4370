// src/cuda/prefill/causal_launch.cpp — kernel choice and grid of the causal, sparse and pooled-score
// passes (causal_launch.h). The choices are tested by tests/cuda/test_prefill_plan.cpp (CPU); the
// launches through dense_prefill / sparse_prefill / prefill_lse / select_prefill / anchor_prefill
// (tests/cuda/test_prefill_*.cpp).
#include "cuda/prefill/causal_launch.h"

#include <algorithm>
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

bool ws_gather_eligible(const CallArgs& call) {
  return static_cast<int64_t>(call.num_pages) * call.page_size * std::max(call.num_kv_heads, 1) <=
         std::numeric_limits<int32_t>::max();
}

CausalKernel choose_sparse_kernel(const PrefillPlan& plan, bool kv_gather_eligible) {
  switch (plan.kernels) {
    case PrefillKernels::kAuto:
    case PrefillKernels::kWarpSpecialized:
    case PrefillKernels::kWarpSpecializedTma:
      return kv_gather_eligible ? CausalKernel::kWarpSpecialized : CausalKernel::kMma;
    case PrefillKernels::kWgmma:
      return CausalKernel::kWgmma;
    case PrefillKernels::kMma:
      break;
  }
  return CausalKernel::kMma;
}

CausalKernel choose_pool_kernel(const PrefillPlan& plan, bool kv_tma_eligible) {
  switch (plan.kernels) {
    case PrefillKernels::kAuto:
    case PrefillKernels::kWarpSpecializedTma:
      return kv_tma_eligible ? CausalKernel::kWarpSpecializedTma : CausalKernel::kMma;
    case PrefillKernels::kWgmma:
      return CausalKernel::kWgmma;
    case PrefillKernels::kMma:
    case PrefillKernels::kWarpSpecialized:
      break;
  }
  return CausalKernel::kMma;
}

Status launch_sparse_attention_pass(const PrefillPlan& plan, AttentionArgs args, int32_t batch, int32_t num_heads,
                                    int32_t num_kv_heads, int32_t tile_size, cudaStream_t stream) {
  const ElementType type = element_type(plan.shape.dtype);
  const int head_dim = plan.shape.head_dim;
  const bool per_head = args.rows.per_query_head != 0;
  const int64_t rows_per_tile = int64_t{tile_size} * (per_head ? 1 : args.call.group_size);
  args.row_blocks_per_tile = static_cast<int32_t>((rows_per_tile + kBlockRows - 1) / kBlockRows);
  const int64_t blocks_per_sequence = max_tiles_per_sequence(plan.shape.max_q_len, tile_size) * args.row_blocks_per_tile;
  const int32_t consumers = per_head ? num_heads : num_kv_heads;
  const CausalKernel kernel = choose_sparse_kernel(plan, ws_gather_eligible(args.call));
  if (kernel == CausalKernel::kWarpSpecialized) {
    const int64_t units = blocks_per_sequence * consumers * batch;
    KC_CHECK_ARG(units <= std::numeric_limits<int32_t>::max(), "the call has ", units,
                 " (tile row block, consumer, sequence) units; the warp-specialised kernels take at most 2^31 - 1");
    args.row_blocks = static_cast<int32_t>(blocks_per_sequence);
    KC_CUDA_RETURN_IF_ERROR(
        launch_ws_sparse_attention(type, head_dim, args, ws_grid_ctas(units, plan.num_sms), stream));
    return ok_status();
  }
  KC_CHECK_ARG(blocks_per_sequence <= int64_t{0x7fffffff}, "the call needs ", blocks_per_sequence,
               " CTAs per row consumer; too many");
  const dim3 grid(static_cast<unsigned>(blocks_per_sequence), static_cast<unsigned>(consumers),
                  static_cast<unsigned>(batch));
  KC_CUDA_RETURN_IF_ERROR(
      launch_sparse_attention(type, head_dim, kernel == CausalKernel::kWgmma, args, grid, stream));
  return ok_status();
}

Status launch_pooled_scores_pass(const PrefillPlan& plan, PoolArgs args, cudaStream_t stream) {
  const ElementType type = element_type(plan.shape.dtype);
  const int head_dim = plan.shape.head_dim;
  CausalKernel kernel = choose_pool_kernel(plan, ws_tma_eligible(args.call, head_dim));
  WsKvMaps maps{};
  if (kernel == CausalKernel::kWarpSpecializedTma) {
    const Status encoded = encode_ws_kv_maps(args.call, head_dim, maps);
    if (!encoded.ok() && plan.kernels != PrefillKernels::kAuto) return encoded;
    if (!encoded.ok()) kernel = CausalKernel::kMma;  // kAuto: a driver that refuses the maps means mma.sync
  }
  if (kernel == CausalKernel::kWarpSpecializedTma) {
    const int64_t key_tiles = (int64_t{plan.shape.max_kv_len} + kWsBlockKeys - 1) / kWsBlockKeys;
    const int64_t chunks = (key_tiles + kWsPoolChunkTiles - 1) / kWsPoolChunkTiles;
    const int64_t units = int64_t{plan.tiles_in_flight} * args.call.num_kv_heads * chunks;
    KC_CHECK_ARG(units <= std::numeric_limits<int32_t>::max(), "the wave has ", units,
                 " (slot, KV group, key chunk) units; the warp-specialised kernels take at most 2^31 - 1");
    args.wave_slots = plan.tiles_in_flight;
    args.key_chunks = static_cast<int32_t>(chunks);
    KC_CUDA_RETURN_IF_ERROR(
        launch_ws_pooled_scores(type, head_dim, args, maps, ws_grid_ctas(units, plan.num_sms), stream));
    return ok_status();
  }
  const dim3 grid(static_cast<unsigned>(plan.key_splits), static_cast<unsigned>(plan.tiles_in_flight),
                  static_cast<unsigned>(args.call.num_kv_heads));
  KC_CUDA_RETURN_IF_ERROR(
      launch_pooled_scores(type, head_dim, plan.pool_m_tiles, kernel == CausalKernel::kWgmma, args, grid, stream));
  return ok_status();
}

}  // namespace kascade::cuda::prefill
