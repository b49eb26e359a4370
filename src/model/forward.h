// src/model/forward.h — the transformer forward pass on the CPU (DESIGN.md §3 data flow):
//   tokens → embedding → per layer: RMSNorm → q/k/v projections → (Qwen3: per-head q_norm, k_norm)
//   → RoPE → store K/V → attention (the runtime's policy) → o_proj → residual → RMSNorm →
//   SwiGLU MLP → residual → final RMSNorm → lm_head logits of the requested rows.
// Activations are fp32 and packed over the sequences of the call (varlen: [total_q, ...] with
// cu_q_lens); weights are f32 / f16 / bf16 (src/model/model.h).
//
// The forward pass does not own the KV cache or the attention policy: it calls a LayerAttention
// that the runtime implements over its paged cache and policy (src/runtime/), and that tests
// implement over a plain contiguous cache. An optional ForwardObserver sees, per layer, the
// residual stream entering the layer and the attention block's output (after o_proj) — what the
// calibration's importance statistic w_l needs (DESIGN.md §2.5).
//
// Tested by tests/unit/model/test_forward_reference.cpp (fp64 transformer written in the test) and
// tests/unit/model/test_forward_hf_parity.cpp (Hugging Face transformers logits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kascade/attention.h"
#include "kascade/status.h"
#include "model/model.h"
#include "ref/ops_ref.h"

namespace kascade {

// Attention of one layer over a KV cache, for the queries of the current forward call.
class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  // Stores this call's new keys and values of `layer` (after k_norm and RoPE): row r of k / v is
  // the token at packed row r of the call. k, v: [total_q, G, d] fp32.
  virtual Status store(int32_t layer, const float* k, const float* v) = 0;
  // out = attention of the call's queries over `layer`'s cache, which already holds the call's
  // keys. q: the call's queries (q.q: [total_q, H, d] fp32, after q_norm and RoPE);
  // out: [total_q, H, d] fp32.
  virtual Status attend(int32_t layer, const QueryBatch& q, float scale, float* out) = 0;
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // x: [total_q, hidden] fp32, the residual stream entering `layer` (before its norm);
  // attn: [total_q, hidden] fp32, the attention block output after o_proj.
  virtual Status on_attention(int32_t layer, const float* x, const float* attn, int64_t total_q) = 0;
};

// One forward call: the new tokens of `batch` sequences, packed.
struct ForwardInput {
  std::span<const int32_t> tokens;      // [total_q] token ids
  std::span<const int32_t> cu_q_lens;   // [batch + 1] prefix sums of tokens per sequence
  std::span<const int64_t> positions;   // [total_q] absolute position of each token
  std::span<const int32_t> logit_rows;  // packed rows whose logits are wanted (each in [0, total_q))
};

// Wall time spent per kind of work, summed over calls (for the runtime's closing report and the
// CPU benchmark): linear layers (sgemm, with their FLOPs), attention (K/V store + the policy's
// attention), and the rest (embedding, norms, RoPE, SiLU, residual adds). A CUDA session also
// measures device_s: the GPU time of each call from its first upload to its last download (CUDA
// events), so wall − device is the host's share (preparation, graph checks, synchronisation).
struct ForwardTimings {
  double matmul_s = 0.0;
  double matmul_flops = 0.0;  // 2·m·n·k summed over the linear layers
  double attention_s = 0.0;
  double other_s = 0.0;
  double device_s = 0.0;      // CUDA sessions only; 0 on the CPU
};

// Activation buffers reused across calls (grown on demand), and the timings of the calls.
struct ForwardWorkspace {
  std::vector<float> x;       // [total_q, hidden] residual stream
  std::vector<float> h;       // [total_q, hidden] normed
  std::vector<float> q;       // [total_q, H·d]
  std::vector<float> k;       // [total_q, G·d]
  std::vector<float> v;       // [total_q, G·d]
  std::vector<float> attn;    // [total_q, H·d]
  std::vector<float> o;       // [total_q, hidden]
  std::vector<float> gate;    // [total_q, I]
  std::vector<float> up;      // [total_q, I]
  std::vector<float> final_rows;  // [logit_rows, hidden]
  ref::MatmulScratch scratch;
  ForwardTimings timings;
};

// Runs the call and writes logits: [logit_rows.size(), vocab] fp32, row i for packed row
// logit_rows[i]. Validates the input (token ids in range, monotone cu_q_lens, sizes, rows in range).
Status forward(const Model& model, const ForwardInput& input, LayerAttention& attention, ForwardWorkspace& ws,
               float* logits, ForwardObserver* observer = nullptr);

}  // namespace kascade
