// src/cuda/prefill/causal_launch.h — kernel choice and launch of the attention passes of a call:
//   - a causal pass over every query (dense prefill with o, or the anchor's LSE pass without) on the
//     kernel choose_causal_kernel picks from the plan (plan.kernels, prefill_plan.h) and the call's
//     K/V layout: the reference kernels of attention_kernel.cuh (mma.sync or wgmma, one CTA per
//     128-row block) or the warp-specialised sm_90a mainloop of ws_attention_kernel.cuh (persistent
//     grid of plan.num_sms CTAs; K/V by TMA or by cp.async);
//   - a sparse pass (reuse layers, the anchor's sparse output; choose_sparse_kernel): the kSparse
//     reference kernel or the same warp-specialised mainloop with gathered key lists;
//   - a pooled-score wave (choose_pool_kernel): pooled_scores_kernels.cu or the warp-specialised
//     pooled-score kernel with the TMA producer (ws_pooled_scores_kernels.cu).
// Shared by prefill_ops.cpp and prefill_stages.cpp. The choices are tested on the CPU by
// tests/cuda/test_prefill_plan.cpp; the launches through the ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/prefill_plan.h"
#include "kascade/status.h"

namespace kascade::cuda::prefill {

enum class CausalPass { kDense, kLseOnly };

// The kernel one causal pass runs on.
enum class CausalKernel {
  kMma,                 // attention_kernel.cuh, Q·Kᵀ on mma.sync
  kWgmma,               // attention_kernel.cuh, Q·Kᵀ on sm_90a wgmma
  kWarpSpecialized,     // ws_attention_kernel.cuh, cp.async K/V producer
  kWarpSpecializedTma,  // ws_attention_kernel.cuh, TMA K/V producer (tensor maps of ws_tensor_map.h)
};

// "mma", "wgmma", "ws", "ws_tma".
const char* causal_kernel_name(CausalKernel kernel);

// The kernel of a causal pass: plan.kernels (as plan_prefill resolved it) and whether the call's K/V
// can be read by TMA (kv_tma_eligible: ws_tma_eligible of the call, ws_tensor_map.h). kAuto runs
// the TMA producer where eligible and mma.sync elsewhere (never the cp.async producer, which loses
// to mma.sync on small pages); the forced variants run what they name (kWarpSpecializedTma with the
// cp.async producer where TMA cannot read the layout). Needs no GPU.
CausalKernel choose_causal_kernel(const PrefillPlan& plan, bool kv_tma_eligible);

// args: call and outputs filled (o for kDense; lse may be null for kDense only); batch and
// num_kv_heads of the call's views.
Status launch_causal_attention(const PrefillPlan& plan, CausalPass pass, AttentionArgs args, int32_t batch,
                               int32_t num_kv_heads, cudaStream_t stream);

// Whether the gathering producer of the warp-specialised sparse kernel can serve this call: every
// head row index ((page · page_size + slot) · G + kv_head) fits int32 (any page size; K/V bases as the
// views require).
bool ws_gather_eligible(const CallArgs& call);

// The kernel of a sparse pass. kAuto, kWarpSpecialized and kWarpSpecializedTma: the warp-specialised
// kernel with gathered key lists (kWarpSpecialized; its cp.async gather serves every page size)
// where kv_gather_eligible, else mma.sync; kWgmma: the reference kernel on wgmma; kMma: mma.sync.
// Needs no GPU.
CausalKernel choose_sparse_kernel(const PrefillPlan& plan, bool kv_gather_eligible);

// The kernel of a pooled-score wave. kAuto and kWarpSpecializedTma: the warp-specialised kernel
// with the TMA K producer (kWarpSpecializedTma) where kv_tma_eligible (the candidates are a
// contiguous prefix: contiguous K, or pages of a multiple of 128 keys), else mma.sync; kWgmma: the
// reference kernel on wgmma; kMma and kWarpSpecialized (the cp.async-producer variant): mma.sync.
// Needs no GPU.
CausalKernel choose_pool_kernel(const PrefillPlan& plan, bool kv_tma_eligible);

// Sparse prefill over compact rows. args: call, rows and outputs filled; per_query_head rows are
// consumed per query head (num_heads consumers), else per KV group; tile_size of the rows.
Status launch_sparse_attention_pass(const PrefillPlan& plan, AttentionArgs args, int32_t batch, int32_t num_heads,
                                    int32_t num_kv_heads, int32_t tile_size, cudaStream_t stream);

// Pooled scores of one wave. args: everything but the warp-specialised schedule (wave_slots,
// key_chunks), which this fills.
Status launch_pooled_scores_pass(const PrefillPlan& plan, PoolArgs args, cudaStream_t stream);

}  // namespace kascade::cuda::prefill
