// src/ref/ops_ref.cpp — dense CPU ops of the forward pass (src/ref/ops_ref.h): RMSNorm, RoPE,
// sgemm-backed linear layers over f32/f16/bf16 weights, SiLU·mul, embedding gather, softmax.
// Threads: one pool, OpenMP's. Linear layers split their output features across the OpenMP threads
// and each thread calls OpenBLAS single-threaded (set once, on the first matmul): two pools (the
// OpenBLAS pthreads and the OpenMP threads of attention) spin against each other on a 2-core
// machine and made decode several times slower (docs/perf.md, CPU section). The element-wise ops
// (norms, RoPE, SiLU, adds) run on one thread: they are memory-bound and small next to the GEMMs,
// and a barrier per op cost more than it saved.
// Tested by tests/unit/ref/test_ops_ref.cpp (fp64 recomputations).
#include "ref/ops_ref.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

// OpenBLAS's thread control; weak so that another CBLAS (without it) still links.
#pragma weak openblas_set_num_threads

namespace kascade::ref {
namespace {

constexpr int64_t kPanelBytes = int64_t{4} << 20;
// Products below this many FLOPs run on one thread (a parallel region costs a few microseconds).
constexpr double kParallelFlops = 2e5;

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
  });
}

// Widens rows [row_begin, row_end) of w into out ([row_end - row_begin, w.cols] fp32); in parallel
// when called outside a parallel region with enough elements.
void widen_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out) {
  const int64_t count = (row_end - row_begin) * w.cols;
  const bool parallel = count > 65536 && !omp_in_parallel();
  const int64_t base = row_begin * w.cols;
  switch (w.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(w.data) + base;
      std::copy(src, src + count, out);
      return;
    }
    case DType::kBF16: {
      const BFloat16* src = static_cast<const BFloat16*>(w.data) + base;
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_float(src[i]);
      return;
    }
    case DType::kF16: {
      const Half* src = static_cast<const Half*>(w.data) + base;
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t i = 0; i < count; ++i) out[i] = half_to_float(src[i]);
      return;
    }
  }
}

Status validate_matrix(const WeightMatrix& w) {
  KC_CHECK_ARG(w.data != nullptr, "weight matrix data is null");
  KC_CHECK_ARG(w.rows > 0 && w.cols > 0, "weight matrix shape [", w.rows, ", ", w.cols, "] must be positive");
  KC_CHECK_ARG(w.rows <= std::numeric_limits<int>::max() && w.cols <= std::numeric_limits<int>::max(),
               "weight matrix shape [", w.rows, ", ", w.cols, "] exceeds the BLAS index range");
  return ok_status();
}

// y[:, col0 : col0 + n] = x · panelᵀ, panel: [n, k] fp32, y row stride ldy.
void sgemm_xwt(const float* x, int64_t m, int64_t k, const float* panel, int64_t n, float* y, int64_t ldy) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), panel, static_cast<int>(k), 0.0f, y,
              static_cast<int>(ldy));
}

}  // namespace

int64_t matmul_panel_rows(int64_t cols) {
  if (cols <= 0) return 1;
  return std::max<int64_t>(16, kPanelBytes / (cols * static_cast<int64_t>(sizeof(float))));
}

Status matmul_many_ref(const float* x, int64_t m, std::span<const WeightMatrix> ws, std::span<float* const> ys,
                       MatmulScratch* scratch) {
  KC_CHECK_ARG(!ws.empty() && ws.size() == ys.size(), "matmul: ", ws.size(), " weight matrices and ", ys.size(),
               " outputs");
  KC_CHECK_ARG(x != nullptr, "matmul: x is null");
  KC_CHECK_ARG(m > 0 && m <= std::numeric_limits<int>::max(), "matmul: m = ", m, " out of range");
  double flops = 0.0;
  for (size_t i = 0; i < ws.size(); ++i) {
    KC_RETURN_IF_ERROR(validate_matrix(ws[i]));
    KC_CHECK_ARG(ws[i].cols == ws[0].cols, "matmul: weight ", i, " has ", ws[i].cols, " input features, weight 0 has ",
                 ws[0].cols);
    KC_CHECK_ARG(ys[i] != nullptr, "matmul: output ", i, " is null");
    KC_CHECK_ARG(static_cast<const void*>(x) != static_cast<const void*>(ys[i]), "matmul: output ", i,
                 " must not alias x");
    flops += 2.0 * static_cast<double>(m) * static_cast<double>(ws[i].rows) * static_cast<double>(ws[i].cols);
  }
  use_single_threaded_blas();
  const int threads = flops >= kParallelFlops && !omp_in_parallel() ? std::max(1, omp_get_max_threads()) : 1;
  // Blocks of output features (rows of a matrix), all matrices in one parallel loop: f32 weights
  // split evenly across the threads; 16-bit weights in panels of at most matmul_panel_rows, widened
  // by the thread that multiplies them.
  struct Block {
    size_t matrix;
    int64_t r0, r1;
  };
  std::vector<Block> blocks;
  int64_t panel_elements = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const WeightMatrix& w = ws[i];
    int64_t block = (w.rows + threads - 1) / threads;
    if (w.dtype != DType::kF32) {
      block = std::min(block, matmul_panel_rows(w.cols));
      panel_elements = std::max(panel_elements, std::min(block, w.rows) * w.cols);
    }
    block = std::max<int64_t>(1, std::min(block, w.rows));
    for (int64_t r0 = 0; r0 < w.rows; r0 += block) blocks.push_back({i, r0, std::min(w.rows, r0 + block)});
  }
  MatmulScratch local;
  MatmulScratch& s = scratch != nullptr ? *scratch : local;
  if (panel_elements > 0) {
    if (static_cast<int>(s.panels.size()) < threads) s.panels.resize(threads);
    for (int t = 0; t < threads; ++t)
      if (static_cast<int64_t>(s.panels[t].size()) < panel_elements) s.panels[t].resize(panel_elements);
  }
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t b = 0; b < num_blocks; ++b) {
    const Block& blk = blocks[b];
    const WeightMatrix& w = ws[blk.matrix];
    const float* panel;
    if (w.dtype == DType::kF32) {
      panel = static_cast<const float*>(w.data) + blk.r0 * w.cols;
    } else {
      float* buffer = s.panels[threads > 1 ? omp_get_thread_num() : 0].data();
      widen_rows(w, blk.r0, blk.r1, buffer);
      panel = buffer;
    }
    sgemm_xwt(x, m, w.cols, panel, blk.r1 - blk.r0, ys[blk.matrix] + blk.r0, w.rows);
  }
  return ok_status();
}

Status matmul_ref(const float* x, int64_t m, const WeightMatrix& w, float* y, MatmulScratch* scratch) {
  float* const outputs[] = {y};
  return matmul_many_ref(x, m, std::span<const WeightMatrix>(&w, 1), outputs, scratch);
}

Status widen_weight_ref(const WeightMatrix& w, float* out) {
  KC_RETURN_IF_ERROR(validate_matrix(w));
  KC_CHECK_ARG(out != nullptr, "widen_weight: out is null");
  widen_rows(w, 0, w.rows, out);
  return ok_status();
}

Status rmsnorm_ref(const float* x, int64_t rows, int32_t dim, const void* weight, DType weight_dtype, float eps,
                   float* out) {
  KC_CHECK_ARG(x != nullptr && out != nullptr && weight != nullptr, "rmsnorm: null pointer");
  KC_CHECK_ARG(rows >= 0 && dim > 0, "rmsnorm: rows = ", rows, ", dim = ", dim, " must be >= 0 and > 0");
  KC_CHECK_ARG(eps >= 0.0f && std::isfinite(eps), "rmsnorm: eps = ", eps, " must be finite and >= 0");
  std::vector<float> w(dim);
  for (int32_t c = 0; c < dim; ++c) w[c] = load_as_float(weight, weight_dtype, c);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    double sum_sq = 0.0;
    for (int32_t c = 0; c < dim; ++c) sum_sq += static_cast<double>(xr[c]) * xr[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + static_cast<double>(eps)));
    for (int32_t c = 0; c < dim; ++c) yr[c] = (xr[c] * inv) * w[c];
  }
  return ok_status();
}

Status apply_rope_ref(float* x, int64_t tokens, int32_t heads, int32_t head_dim, const int64_t* positions,
                      const float* inv_freq, float attention_scaling) {
  KC_CHECK_ARG(x != nullptr && positions != nullptr && inv_freq != nullptr, "rope: null pointer");
  KC_CHECK_ARG(tokens >= 0 && heads > 0, "rope: tokens = ", tokens, ", heads = ", heads);
  KC_CHECK_ARG(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim = ", head_dim, " must be positive and even");
  KC_CHECK_ARG(std::isfinite(attention_scaling), "rope: attention_scaling is not finite");
  for (int64_t t = 0; t < tokens; ++t)
    KC_CHECK_ARG(positions[t] >= 0, "rope: positions[", t, "] = ", positions[t], " is negative");
  const int32_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> cos_a(half), sin_a(half);
    const float pos = static_cast<float>(positions[t]);
    for (int32_t c = 0; c < half; ++c) {
      const float angle = pos * inv_freq[c];  // fp32 product, as HF's rotary embedding computes it
      cos_a[c] = static_cast<float>(std::cos(static_cast<double>(angle))) * attention_scaling;
      sin_a[c] = static_cast<float>(std::sin(static_cast<double>(angle))) * attention_scaling;
    }
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int32_t c = 0; c < half; ++c) {
        const float a = v[c];
        const float b = v[c + half];
        v[c] = a * cos_a[c] - b * sin_a[c];
        v[c + half] = b * cos_a[c] + a * sin_a[c];
      }
    }
  }
  return ok_status();
}

Status silu_mul_ref(const float* gate, const float* up, int64_t n, float* out) {
  KC_CHECK_ARG(gate != nullptr && up != nullptr && out != nullptr, "silu_mul: null pointer");
  KC_CHECK_ARG(n >= 0, "silu_mul: n = ", n, " is negative");
  for (int64_t i = 0; i < n; ++i) {
    const float z = gate[i];
    out[i] = z / (1.0f + std::exp(-z)) * up[i];
  }
  return ok_status();
}

Status add_inplace_ref(float* x, const float* y, int64_t n) {
  KC_CHECK_ARG(x != nullptr && y != nullptr, "add_inplace: null pointer");
  KC_CHECK_ARG(n >= 0, "add_inplace: n = ", n, " is negative");
  KC_CHECK_ARG(static_cast<const float*>(x) != y, "add_inplace: x and y must not alias");
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  return ok_status();
}

Status embedding_gather_ref(const void* table, DType table_dtype, int64_t vocab, int32_t hidden,
                            const int32_t* tokens, int64_t n, float* out) {
  KC_CHECK_ARG(table != nullptr && tokens != nullptr && out != nullptr, "embedding: null pointer");
  KC_CHECK_ARG(vocab > 0 && hidden > 0 && n >= 0, "embedding: vocab = ", vocab, ", hidden = ", hidden, ", n = ", n);
  for (int64_t t = 0; t < n; ++t)
    KC_CHECK_ARG(tokens[t] >= 0 && tokens[t] < vocab, "embedding: token id ", tokens[t], " at position ", t,
                 " is outside the vocabulary [0, ", vocab, ")");
  for (int64_t t = 0; t < n; ++t) {
    const WeightMatrix row{static_cast<const uint8_t*>(table) +
                               static_cast<int64_t>(tokens[t]) * hidden * static_cast<int64_t>(dtype_size(table_dtype)),
                           table_dtype, 1, hidden};
    widen_rows(row, 0, 1, out + t * hidden);
  }
  return ok_status();
}

Status softmax_ref(const float* logits, int64_t n, float temperature, float* probs) {
  KC_CHECK_ARG(logits != nullptr && probs != nullptr, "softmax: null pointer");
  KC_CHECK_ARG(n > 0, "softmax: n = ", n, " must be positive");
  KC_CHECK_ARG(temperature > 0.0f && std::isfinite(temperature), "softmax: temperature = ", temperature,
               " must be finite and > 0");
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    KC_CHECK_ARG(!std::isnan(logits[i]), "softmax: logit ", i, " is NaN");
    max_logit = std::max(max_logit, static_cast<double>(logits[i]));
  }
  KC_CHECK_ARG(std::isfinite(max_logit), "softmax: the largest logit is ", max_logit);
  std::vector<double> e(n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    e[i] = std::exp((static_cast<double>(logits[i]) - max_logit) / temperature);
    sum += e[i];
  }
  for (int64_t i = 0; i < n; ++i) probs[i] = static_cast<float>(e[i] / sum);
  return ok_status();
}

Status log_softmax_ref(const float* logits, int64_t n, float* out) {
  KC_CHECK_ARG(logits != nullptr && out != nullptr, "log_softmax: null pointer");
  KC_CHECK_ARG(n > 0, "log_softmax: n = ", n, " must be positive");
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    KC_CHECK_ARG(!std::isnan(logits[i]), "log_softmax: logit ", i, " is NaN");
    max_logit = std::max(max_logit, static_cast<double>(logits[i]));
  }
  KC_CHECK_ARG(std::isfinite(max_logit), "log_softmax: the largest logit is ", max_logit);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  const double log_z = max_logit + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
  return ok_status();
}

Result<int32_t> argmax_ref(const float* logits, int64_t n) {
  KC_CHECK_ARG(logits != nullptr, "argmax: logits is null");
  KC_CHECK_ARG(n > 0 && n <= std::numeric_limits<int32_t>::max(), "argmax: n = ", n, " out of range");
  int32_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    KC_CHECK_ARG(!std::isnan(logits[i]), "argmax: logit ", i, " is NaN");
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace kascade::ref
