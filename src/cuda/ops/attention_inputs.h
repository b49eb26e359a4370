// src/cuda/ops/attention_inputs.h — from the fused q/k/v projection to the attention op's inputs,
// in one kernel (DESIGN.md §3 data flow "qkv → rope → KV cache append"):
//   for every token t and head of qkv [T, (H + 2G)·d] (q heads, then k heads, then v heads):
//   - q and k heads: Qwen3's per-head RMSNorm when q_norm / k_norm are given (fp32 sum of squares,
//     as rmsnorm_rows), then RoPE in the rotate-half layout of ref::apply_rope_ref with the same
//     angle arithmetic: a = float(position) · inv_freq[c] (an fp32 product), cos / sin evaluated
//     in fp64 and rounded to fp32, times attention_scaling (the config's rope type — default,
//     linear, llama3, yarn — lives entirely in inv_freq and attention_scaling, computed on the
//     host by compute_rope_frequencies, src/model/rope_frequencies.h);
//   - q is written to q_out [T, H, d]; k and v rows are written into the layer's paged cache at
//     slot[t] = page · page_size + row (the PagedKv layout [num_pages, page_size, G, d]).
// Arithmetic in fp32 from the 16-bit inputs, one rounding to the activation dtype at the end.
// Tested by tests/cuda/test_ops_attention_inputs.cpp against ref::rmsnorm_ref + ref::apply_rope_ref
// (default, llama3 and yarn frequency tables, with and without q/k norm).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

struct AttentionInputsShape {
  int64_t tokens = 0;      // T
  int32_t num_heads = 0;   // H
  int32_t num_kv_heads = 0;  // G
  int32_t head_dim = 0;    // d (even)
  DType dtype = DType::kBF16;  // of qkv, q_out and the cache
};

struct AttentionInputsArgs {
  const void* qkv = nullptr;        // [T, (H + 2G)·d] dtype
  const int32_t* positions = nullptr;  // [T] absolute positions (>= 0)
  const int32_t* slots = nullptr;      // [T] cache rows: page · page_size + position % page_size
  const float* q_norm = nullptr;    // [d] fp32 or null (no q/k norm; both or neither)
  const float* k_norm = nullptr;    // [d] fp32 or null
  float norm_eps = 1e-6f;
  const float* inv_freq = nullptr;  // [d / 2] fp32
  float attention_scaling = 1.0f;
  void* q_out = nullptr;            // [T, H, d] dtype
  void* k_cache = nullptr;          // [num_pages, page_size, G, d] dtype (this layer's)
  void* v_cache = nullptr;          // [num_pages, page_size, G, d] dtype
};

// programmatic: programmatic dependent launch (cuda/common/programmatic_launch.cuh; sm_90+ only).
Status attention_inputs(const AttentionInputsShape& shape, const AttentionInputsArgs& args, cudaStream_t stream,
                        bool programmatic = false);

}  // namespace kascade::cuda
