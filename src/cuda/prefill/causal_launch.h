// src/cuda/prefill/causal_launch.h — launches one causal attention pass over every query of a call
// (dense prefill with o, or the anchor's LSE pass without) on the kernel choose_causal_kernel picks
// from the plan (plan.kernels, prefill_plan.h) and the call's K/V layout: the reference kernels of
// attention_kernel.cuh (mma.sync or wgmma, one CTA per 128-row block) or the warp-specialised
// sm_90a mainloop of ws_attention_kernel.cuh (persistent grid of plan.num_sms CTAs; K/V by TMA or by
// cp.async). Shared by prefill_ops.cpp (dense_prefill, anchor_prefill) and prefill_stages.cpp
// (prefill_lse). choose_causal_kernel is tested on the CPU by tests/cuda/test_prefill_plan.cpp;
// the launches through those ops (tests/cuda/test_prefill_*.cpp).
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

}  // namespace kascade::cuda::prefill
