// src/ref/ops_ref.h — the dense CPU ops of the transformer forward pass (DESIGN.md §3 data flow):
// RMSNorm, rotary position embedding (HF rotate-half layout), linear layers through OpenBLAS
// cblas_sgemm over fp32 activations × f32 / f16 / bf16 weights, SiLU·mul, residual add, embedding
// gather, and the softmax / argmax helpers the sampler and the parity tests use.
//
// Precision: activations are fp32 everywhere; reductions (RMSNorm's mean square, softmax sums)
// accumulate in fp64; weights are read in their stored dtype and widened exactly to fp32.
//
// Weights of 16-bit dtypes are widened in row panels inside matmul_ref (MatmulScratch holds a
// panel of about 4 MiB per thread); the model (src/model/model.h) decides whether to widen whole
// matrices once at load time instead.
//
// Tested by tests/unit/ref/test_ops_ref.cpp against straightforward fp64 recomputations.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::ref {

// A weight matrix in Hugging Face nn.Linear layout: `rows` output features × `cols` input
// features, row-major, elements of `dtype`. Does not own memory.
struct WeightMatrix {
  const void* data = nullptr;  // [rows, cols] `dtype`
  DType dtype = DType::kF32;
  int64_t rows = 0;            // output features (N)
  int64_t cols = 0;            // input features (K)
};

// Reusable fp32 panel storage for matmul_ref over 16-bit weights (one object per calling thread;
// it holds one panel per OpenMP thread of the call).
struct MatmulScratch {
  std::vector<std::vector<float>> panels;  // [threads][panel_rows, cols] fp32
};

// Rows of a 16-bit weight panel widened per sgemm call: chosen so a panel is about 4 MiB.
int64_t matmul_panel_rows(int64_t cols);

// y = x · wᵀ (nn.Linear without bias):
//   y[i][n] = Σ_k x[i][k] · w[n][k]
// x: [m, w.cols] fp32 row-major; y: [m, w.rows] fp32 row-major (must not alias x).
// The output features are split in blocks across the OpenMP threads, each block one
// cblas_sgemm call with OpenBLAS set to one thread (the first call sets it, process-wide);
// f32 weights are read in place, f16 / bf16 weights are widened exactly to fp32 in row panels of
// at most matmul_panel_rows (scratch may be null: local panels are then allocated per call).
Status matmul_ref(const float* x, int64_t m, const WeightMatrix& w, float* y, MatmulScratch* scratch);

// Several products of the same input in one parallel loop (q/k/v, gate/up):
//   ys[i] = x · ws[i]ᵀ, ys[i]: [m, ws[i].rows] fp32; every ws[i].cols equal; no ys[i] aliases x.
// Same arithmetic as matmul_ref per matrix; one thread synchronisation instead of one per matrix.
Status matmul_many_ref(const float* x, int64_t m, std::span<const WeightMatrix> ws, std::span<float* const> ys,
                       MatmulScratch* scratch);

// Widens a whole weight matrix to fp32 (exact). out: [w.rows, w.cols] fp32.
Status widen_weight_ref(const WeightMatrix& w, float* out);

// RMSNorm (Llama / Qwen3): out[r][c] = x[r][c] / sqrt(mean_c(x[r]²) + eps) · weight[c].
// x: [rows, dim] fp32; weight: [dim] `weight_dtype`; out: [rows, dim] fp32, may alias x.
// Qwen3's q_norm / k_norm are this op over rows = tokens × heads, dim = head_dim.
Status rmsnorm_ref(const float* x, int64_t rows, int32_t dim, const void* weight, DType weight_dtype,
                   float eps, float* out);

// Rotary position embedding, rotate-half layout (HF Llama / Qwen3 `apply_rotary_pos_emb`), in place:
// for channel c < d/2 of every head, with angle a = float(pos) · inv_freq[c] (fp32 product as HF
// computes it) and cos/sin multiplied by attention_scaling (1 except YaRN):
//   x'[c]       = x[c] · cos(a) − x[c + d/2] · sin(a)
//   x'[c + d/2] = x[c + d/2] · cos(a) + x[c] · sin(a)
// x: [tokens, heads, head_dim] fp32; positions: [tokens] int64 (absolute, >= 0);
// inv_freq: [head_dim / 2] fp32. head_dim must be even.
Status apply_rope_ref(float* x, int64_t tokens, int32_t heads, int32_t head_dim, const int64_t* positions,
                      const float* inv_freq, float attention_scaling);

// SwiGLU activation: out[i] = silu(gate[i]) · up[i], silu(z) = z / (1 + e^−z).
// gate, up, out: [n] fp32; out may alias gate or up.
Status silu_mul_ref(const float* gate, const float* up, int64_t n, float* out);

// Residual add: x[i] += y[i]. x, y: [n] fp32 (must not alias).
Status add_inplace_ref(float* x, const float* y, int64_t n);

// Embedding gather: out[t][c] = table[tokens[t]][c] widened to fp32.
// table: [vocab, hidden] `table_dtype`; tokens: [n] int32 in [0, vocab); out: [n, hidden] fp32.
Status embedding_gather_ref(const void* table, DType table_dtype, int64_t vocab, int32_t hidden,
                            const int32_t* tokens, int64_t n, float* out);

// Softmax of logits / temperature (temperature > 0), max-subtracted, sums in fp64.
// logits: [n] fp32; probs: [n] fp32 (may alias logits).
Status softmax_ref(const float* logits, int64_t n, float temperature, float* probs);

// log_softmax: out[i] = logits[i] − log Σ_j exp(logits[j]) (fp64 sum). logits, out: [n] fp32.
Status log_softmax_ref(const float* logits, int64_t n, float* out);

// Index of the largest value; ties to the lowest index. NaN logits are refused.
Result<int32_t> argmax_ref(const float* logits, int64_t n);

}  // namespace kascade::ref
