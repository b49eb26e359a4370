// src/cuda/prefill/prefill_plan.cpp — supports(), plan and workspace of the prefill ops
// (prefill_plan.h). Tested by tests/cuda/test_prefill_plan.cpp and every op test.
#include "cuda/prefill/prefill_plan.h"

#include <algorithm>
#include <limits>

#include "cuda/common/cuda_status.h"
#include "cuda/common/plan_support.h"
#include "cuda/prefill/prefill_launch.h"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/prefill_shapes.h"

namespace kascade::cuda {
namespace {

using detail::align_workspace_bytes;

bool is_warp_specialized(PrefillKernels kernels) {
  return kernels == PrefillKernels::kWarpSpecialized || kernels == PrefillKernels::kWarpSpecializedTma;
}

// Whether the warp-specialised kernels of (type, head_dim) can run here, preparing them if so: false
// when the build holds no sm_90a code for them; an error Status when the runtime fails otherwise.
Result<bool> prepare_warp_specialized(prefill::ElementType type, int head_dim) {
#ifndef KASCADE_CUDA_HAS_SM90A
  // Built without sm_90a code (KASCADE_CUDA_ARCHS has no 90a): the kernels would trap.
  (void)type;
  (void)head_dim;
  return false;
#else
  const cudaError_t error = prefill::prepare_ws_attention(type, head_dim);
  if (error == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    return false;
  }
  KC_CUDA_RETURN_IF_ERROR(error);
  return true;
#endif
}

}  // namespace

const char* prefill_kernels_name(PrefillKernels kernels) {
  switch (kernels) {
    case PrefillKernels::kAuto:
      return "auto";
    case PrefillKernels::kMma:
      return "mma";
    case PrefillKernels::kWgmma:
      return "wgmma";
    case PrefillKernels::kWarpSpecialized:
      return "ws";
    case PrefillKernels::kWarpSpecializedTma:
      return "ws_tma";
  }
  return "unknown";
}

Status supports_prefill(const PrefillShape& shape) {
  KC_CHECK_ARG(shape.dtype == DType::kF16 || shape.dtype == DType::kBF16, "dtype is ", dtype_name(shape.dtype),
               "; the prefill kernels take f16 and bf16");
  KC_CHECK_ARG(shape.batch >= 1 && shape.batch <= 65535, "batch is ", shape.batch, "; expected 1..65535");
  KC_CHECK_ARG(shape.num_kv_heads >= 1, "num_kv_heads is ", shape.num_kv_heads, "; expected >= 1");
  KC_CHECK_ARG(shape.num_heads >= 1 && shape.num_heads % shape.num_kv_heads == 0, "num_heads ", shape.num_heads,
               " is not a positive multiple of num_kv_heads ", shape.num_kv_heads);
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  if (group > 8) {
    return unsupported("GQA group size is ", group, " (H = ", shape.num_heads, ", G = ", shape.num_kv_heads,
                       "); the prefill kernels are built for 1..8");
  }
  if (shape.head_dim != 64 && shape.head_dim != 128) {
    return unsupported("head_dim is ", shape.head_dim, "; the prefill kernels are built for 64 and 128");
  }
  KC_CHECK_ARG(shape.max_q_len >= 1, "max_q_len is ", shape.max_q_len, "; expected >= 1");
  KC_CHECK_ARG(shape.max_total_q >= shape.max_q_len, "max_total_q ", shape.max_total_q,
               " is smaller than max_q_len ", shape.max_q_len);
  KC_CHECK_ARG(shape.max_kv_len >= shape.max_q_len, "max_kv_len ", shape.max_kv_len, " is smaller than max_q_len ",
               shape.max_q_len);
  KC_CHECK_ARG(int64_t{shape.max_total_q} * shape.num_heads <= std::numeric_limits<int32_t>::max(),
               "max_total_q × num_heads = ", int64_t{shape.max_total_q} * shape.num_heads,
               " does not fit the kernels' int32 row indices");
  KC_CHECK_ARG(shape.tile_size >= 1, "tile_size is ", shape.tile_size, "; expected >= 1");
  if (int64_t{shape.tile_size} * group > prefill::kMaxPoolRows) {
    return unsupported("tile_size × group = ", shape.tile_size, " × ", group, " = ", shape.tile_size * group,
                       " rows per tile; anchor selection pools at most ", prefill::kMaxPoolRows);
  }
  return ok_status();
}

size_t PrefillPlan::selection_scratch_bytes() const { return workspace.total_bytes - workspace.lse; }

Result<PrefillPlan> layout_prefill_plan(const PrefillShape& shape, const PrefillPlanOptions& options, int32_t num_sms,
                                        int32_t pool_ctas_per_sm, bool warp_specialized_ready) {
  KC_RETURN_IF_ERROR(supports_prefill(shape));
  KC_CHECK_ARG(options.kernels == PrefillKernels::kAuto || options.kernels == PrefillKernels::kMma ||
                   options.kernels == PrefillKernels::kWgmma || is_warp_specialized(options.kernels),
               "options.kernels holds unknown value ", static_cast<int>(options.kernels));
  KC_CHECK_ARG(options.tiles_in_flight >= 0, "options.tiles_in_flight is ", options.tiles_in_flight,
               "; expected >= 0 (0: automatic)");
  KC_CHECK_ARG(options.key_splits >= 0, "options.key_splits is ", options.key_splits, "; expected >= 0 (0: automatic)");
  KC_CHECK_ARG(num_sms >= 1, "num_sms is ", num_sms, "; expected >= 1");
  PrefillPlan plan;
  plan.shape = shape;
  plan.selection = options.selection;
  plan.kernels = options.kernels == PrefillKernels::kAuto && !warp_specialized_ready ? PrefillKernels::kMma
                                                                                      : options.kernels;
  plan.num_sms = num_sms;
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  plan.pool_m_tiles = shape.tile_size * group <= prefill::kBlockRows ? 1 : 2;

  size_t offset = 0;
  plan.workspace.error_flags = offset;
  offset = align_workspace_bytes(offset + sizeof(uint32_t));
  plan.workspace.lse = offset;
  plan.workspace.scores = offset;
  if (plan.selection) {
    offset = align_workspace_bytes(offset + size_t(shape.max_total_q) * shape.num_heads * sizeof(float));
    plan.workspace.scores = offset;
    plan.score_stride = (int64_t{shape.max_kv_len} + 3) / 4 * 4;
    const int64_t slots = prefill::max_call_slots(shape.batch, shape.max_total_q, shape.max_q_len, shape.tile_size);
    const size_t tile_bytes = size_t(shape.num_kv_heads) * plan.score_stride * sizeof(float);
    int64_t in_flight = options.tiles_in_flight > 0
                            ? options.tiles_in_flight
                            : static_cast<int64_t>(options.selection_scratch_budget / tile_bytes);
    in_flight = std::clamp<int64_t>(in_flight, 1, std::min<int64_t>(slots, 65535));
    plan.tiles_in_flight = static_cast<int32_t>(in_flight);
    plan.num_waves = static_cast<int32_t>((slots + in_flight - 1) / in_flight);
    offset = align_workspace_bytes(offset + size_t(in_flight) * tile_bytes);
    const int64_t key_blocks = (int64_t{shape.max_kv_len} + prefill::kBlockKeys - 1) / prefill::kBlockKeys;
    int64_t splits = options.key_splits;
    if (splits == 0) {
      const int64_t pairs = in_flight * shape.num_kv_heads;
      const int64_t target = int64_t{2} * num_sms * std::max(pool_ctas_per_sm, 1);
      splits = (target + pairs - 1) / pairs;
    }
    plan.key_splits = static_cast<int32_t>(std::clamp<int64_t>(splits, 1, std::max<int64_t>(key_blocks, 1)));
  }
  plan.workspace.total_bytes = offset;
  return plan;
}

Result<PrefillPlan> plan_prefill(const PrefillShape& shape, const PrefillPlanOptions& options) {
  KC_RETURN_IF_ERROR(supports_prefill(shape));
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  const int m_tiles = shape.tile_size * group <= prefill::kBlockRows ? 1 : 2;
  const prefill::ElementType type = prefill::element_type(shape.dtype);
  int device = 0, num_sms = 0, major = 0, minor = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const bool sm90 = major == 9 && minor == 0;
  const PrefillKernels requested = options.kernels;
  if ((requested == PrefillKernels::kWgmma || is_warp_specialized(requested)) && !sm90) {
    return unsupported("options.kernels = ", prefill_kernels_name(requested),
                       " needs an sm_90 device (Hopper); this one is sm_", major, minor);
  }
  // kAuto asks the same question as the forced variants, and falls back to mma.sync on "no".
  bool warp_specialized_ready = false;
  if (is_warp_specialized(requested) || (requested == PrefillKernels::kAuto && sm90)) {
    KC_ASSIGN_OR_RETURN(warp_specialized_ready, prepare_warp_specialized(type, shape.head_dim));
    if (!warp_specialized_ready && requested != PrefillKernels::kAuto) {
      return unsupported("options.kernels = ", prefill_kernels_name(requested),
                         ": this build holds no sm_90a code (configure with KASCADE_CUDA_ARCHS containing 90a-real)");
    }
  }
  const bool wgmma = requested == PrefillKernels::kWgmma;
  int pool_ctas_per_sm = 0;
  const cudaError_t prepared[] = {
      prefill::prepare_dense_attention(type, shape.head_dim, wgmma),
      prefill::prepare_lse_attention(type, shape.head_dim, wgmma),
      prefill::prepare_sparse_attention(type, shape.head_dim, wgmma),
      prefill::prepare_pooled_scores(type, shape.head_dim, m_tiles, wgmma, &pool_ctas_per_sm)};
  for (const cudaError_t error : prepared) {
    if (wgmma && error == cudaErrorInvalidDeviceFunction) {
      (void)cudaGetLastError();
      return unsupported("options.kernels = wgmma: this build holds no sm_90a code (configure with "
                         "KASCADE_CUDA_ARCHS containing 90a-real)");
    }
    KC_CUDA_RETURN_IF_ERROR(error);
  }
  return layout_prefill_plan(shape, options, num_sms, pool_ctas_per_sm, warp_specialized_ready);
}

Status initialize_prefill_workspace(const PrefillPlan& plan, void* workspace, cudaStream_t stream) {
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate plan.workspace.total_bytes = ",
               plan.workspace.total_bytes);
  KC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(static_cast<char*>(workspace) + plan.workspace.error_flags, 0, sizeof(uint32_t), stream));
  return ok_status();
}

Result<uint32_t> read_prefill_errors(const PrefillPlan& plan, void* workspace, cudaStream_t stream) {
  KC_CHECK_ARG(workspace != nullptr, "workspace is null");
  uint32_t bits = 0;
  void* word = static_cast<char*>(workspace) + plan.workspace.error_flags;
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bits, word, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(word, 0, sizeof(uint32_t), stream));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return bits;
}

}  // namespace kascade::cuda
