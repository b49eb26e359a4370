// src/cuda/prefill/causal_launch.h — launches one causal attention pass over every query of a call
// (dense prefill with o, or the anchor's LSE pass without) on the kernel family the plan selects:
// the reference kernels of attention_kernel.cuh (mma.sync or wgmma, one CTA per 128-row block) or
// the warp-specialised sm_90a mainloop of ws_attention_kernel.cuh (persistent grid of
// plan.num_sms CTAs; K/V by TMA when plan.ws_tma and the layout allows, else by cp.async). Shared by prefill_ops.cpp (dense_prefill, anchor_prefill) and
// prefill_stages.cpp (prefill_lse). Tested through those ops (tests/cuda/test_prefill_*.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/prefill_plan.h"
#include "kascade/status.h"

namespace kascade::cuda::prefill {

enum class CausalPass { kDense, kLseOnly };

// args: call and outputs filled (o for kDense; lse may be null for kDense only); batch and
// num_kv_heads of the call's views.
Status launch_causal_attention(const PrefillPlan& plan, CausalPass pass, AttentionArgs args, int32_t batch,
                               int32_t num_kv_heads, cudaStream_t stream);

}  // namespace kascade::cuda::prefill
