// src/runtime/gpu_memory_plan.h — device memory planning of the CUDA runtime, on the host (so it is
// tested on CPU-only machines): the bytes of the device weights, of the paged KV cache and of the
// activation workspace of a session, and the check of their sum against the device's free memory
// that refuses a batch × context that does not fit with a message naming every number (never an
// out-of-memory crash halfway through a run).
//   weights      device_weight_bytes: every tensor of src/cuda/model/device_weights.h, 256-byte
//                aligned, linear weights and embeddings in the activation dtype, norms and RoPE
//                frequencies fp32; a tied lm_head costs nothing.
//   KV cache     layers × 2 × pages × page_size × G × d × dtype size.
//   activations  device_activation_layout: the fp32 residual stream, the 16-bit activations of the
//                largest call (tokens = Σ per-sequence chunk), the logits rows (fp32), the packed
//                int32 call description (tokens, positions, cache slots, cu_q_lens, kv_lens, block
//                table, logit rows) and the sampler's inputs/outputs.
//   reserve      kGpuReserveBytes for what is not planned here: the attention backend's plans and
//                workspaces (made on first use), cuBLAS, the CUDA context's own allocations.
// Header-only so that the CUDA library (src/cuda/model) uses the same numbers without linking the
// runtime library. Tested by tests/unit/runtime/test_gpu_memory_plan.cpp (hand-computed sizes, the refusal message)
// and, against the real allocations, by tests/cuda/test_gpu_runtime_memory.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "kascade/dtype.h"
#include "kascade/model_config.h"
#include "kascade/status.h"

namespace kascade::runtime {

constexpr size_t kDeviceAlignment = 256;
constexpr size_t kGpuReserveBytes = size_t{3} << 29;  // 1.5 GiB

inline size_t align_device_bytes(size_t bytes) { return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment; }

// Bytes of DeviceWeights::upload for `config` with activations (and linear weights) in `act`
// (defined below).

// device_kv_bytes: bytes of the paged KV cache (K and V of every layer) (defined below).

// The limits of a session's forward calls.
struct SessionLimits {
  int32_t num_sequences = 0;      // sequences of the session (the largest batch of a call)
  int64_t max_call_tokens = 0;    // tokens of the largest call (Σ over sequences of min(left, chunk))
  int64_t max_logit_rows = 0;     // logit rows of the largest call
  int32_t max_pages_per_seq = 0;  // block-table width (covers the backend's max_seq_len)
};

// Byte offsets of the activation workspace (each buffer 256-byte aligned) and its total.
struct ActivationLayout {
  size_t x = 0;           // [tokens, hidden] fp32 residual stream
  size_t h = 0;           // [tokens, hidden] act, normed
  size_t qkv = 0;         // [tokens, (H + 2G)·d] act
  size_t q = 0;           // [tokens, H·d] act
  size_t attn = 0;        // [tokens, H·d] act
  size_t gate_up = 0;     // [tokens, 2I] act
  size_t mlp = 0;         // [tokens, I] act
  size_t final_rows = 0;  // [logit rows, hidden] act
  size_t logits = 0;      // [logit rows, vocab] fp32
  size_t ints = 0;        // int32 call description (int32_elements of them)
  size_t uniforms = 0;    // [num_sequences] fp64
  size_t tokens_out = 0;  // [num_sequences] int32
  size_t error = 0;       // uint32 error word
  size_t total = 0;
  int64_t int32_elements = 0;  // 3·tokens + (batch + 1) + batch + batch·pages + logit rows
};
// device_activation_layout (defined below).

struct GpuMemoryPlan {
  size_t weights = 0;      // already resident when a session is planned
  size_t kv_cache = 0;
  size_t activations = 0;
  size_t sampler = 0;
  size_t reserve = kGpuReserveBytes;
  size_t total() const { return weights + kv_cache + activations + sampler + reserve; }
};

// OK when what is still to be allocated (everything but `already_resident` bytes of the plan) fits
// in `free_bytes`; otherwise ResourceExhausted naming every part in GiB, the free memory, and
// `what` (e.g. "a batch of 8 sequences of up to 131072 tokens"), with the remedy.
// check_gpu_memory (defined below).

// ---- definitions ----

namespace gpu_plan_detail {

inline std::string gib(size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << static_cast<double>(bytes) / static_cast<double>(size_t{1} << 30) << " GiB";
  return os.str();
}

}  // namespace gpu_plan_detail

inline size_t device_weight_bytes(const ModelConfig& c, DType act) {
  const size_t a = dtype_size(act), f = sizeof(float);
  const size_t hidden = static_cast<size_t>(c.hidden_size), vocab = static_cast<size_t>(c.vocab_size);
  const size_t H = static_cast<size_t>(c.num_attention_heads), G = static_cast<size_t>(c.num_key_value_heads);
  const size_t d = static_cast<size_t>(c.head_dim), inter = static_cast<size_t>(c.intermediate_size);
  size_t total = align_device_bytes(vocab * hidden * a);                   // embed_tokens
  if (!c.tie_word_embeddings) total += align_device_bytes(vocab * hidden * a);  // lm_head
  total += align_device_bytes(hidden * f);                                 // final norm
  total += align_device_bytes(d / 2 * f);                                  // inv_freq
  size_t layer = align_device_bytes((H + 2 * G) * d * hidden * a)          // qkv
                 + align_device_bytes(hidden * H * d * a)                   // o_proj
                 + align_device_bytes(2 * inter * hidden * a)               // gate_up
                 + align_device_bytes(hidden * inter * a)                   // down_proj
                 + 2 * align_device_bytes(hidden * f);                      // input / post norms
  if (c.qk_norm) layer += 2 * align_device_bytes(d * f);
  return total + layer * static_cast<size_t>(c.num_hidden_layers);
}

inline size_t device_kv_bytes(const ModelConfig& c, DType act, int64_t num_pages, int32_t page_size) {
  return static_cast<size_t>(c.num_hidden_layers) * 2 * static_cast<size_t>(num_pages) *
         static_cast<size_t>(page_size) * static_cast<size_t>(c.num_key_value_heads) *
         static_cast<size_t>(c.head_dim) * dtype_size(act);
}

inline Result<ActivationLayout> device_activation_layout(const ModelConfig& c, DType act, const SessionLimits& s) {
  KC_CHECK_ARG(s.num_sequences >= 1 && s.max_call_tokens >= s.num_sequences && s.max_logit_rows >= 0 &&
                   s.max_pages_per_seq >= 1,
               "activation layout: ", s.num_sequences, " sequences, ", s.max_call_tokens, " tokens per call, ",
               s.max_logit_rows, " logit rows, ", s.max_pages_per_seq, " pages per sequence");
  const size_t a = dtype_size(act), f = sizeof(float);
  const size_t T = static_cast<size_t>(s.max_call_tokens), R = static_cast<size_t>(std::max<int64_t>(s.max_logit_rows, 1));
  const size_t B = static_cast<size_t>(s.num_sequences);
  const size_t hidden = static_cast<size_t>(c.hidden_size), vocab = static_cast<size_t>(c.vocab_size);
  const size_t H = static_cast<size_t>(c.num_attention_heads), G = static_cast<size_t>(c.num_key_value_heads);
  const size_t d = static_cast<size_t>(c.head_dim), inter = static_cast<size_t>(c.intermediate_size);
  ActivationLayout l;
  l.int32_elements = static_cast<int64_t>(3 * T + (B + 1) + B + B * static_cast<size_t>(s.max_pages_per_seq) + R);
  size_t at = 0;
  const auto place = [&at](size_t* offset, size_t bytes) {
    *offset = at;
    at += align_device_bytes(bytes);
  };
  place(&l.x, T * hidden * f);
  place(&l.h, T * hidden * a);
  place(&l.qkv, T * (H + 2 * G) * d * a);
  place(&l.q, T * H * d * a);
  place(&l.attn, T * H * d * a);
  place(&l.gate_up, T * 2 * inter * a);
  place(&l.mlp, T * inter * a);
  place(&l.final_rows, R * hidden * a);
  place(&l.logits, R * vocab * f);
  place(&l.ints, static_cast<size_t>(l.int32_elements) * sizeof(int32_t));
  place(&l.uniforms, B * sizeof(double));
  place(&l.tokens_out, B * sizeof(int32_t));
  place(&l.error, sizeof(uint32_t));
  l.total = at;
  return l;
}

inline Status check_gpu_memory(const GpuMemoryPlan& plan, size_t already_resident, size_t free_bytes, const std::string& what) {
  const size_t needed = plan.total() - std::min(already_resident, plan.total());
  if (needed <= free_bytes) return ok_status();
  return resource_exhausted("GPU memory: ", what, " needs ", gpu_plan_detail::gib(needed), " more device memory but ", gpu_plan_detail::gib(free_bytes),
                            " is free (weights ", gpu_plan_detail::gib(plan.weights), ", KV cache ", gpu_plan_detail::gib(plan.kv_cache),
                            ", activations ", gpu_plan_detail::gib(plan.activations), ", sampler ", gpu_plan_detail::gib(plan.sampler),
                            ", reserve for attention plans / cuBLAS ", gpu_plan_detail::gib(plan.reserve),
                            "); use fewer sequences, a shorter --max-context / --max-new-tokens, or a smaller --chunk");
}

}  // namespace kascade::runtime
