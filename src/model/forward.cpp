// src/model/forward.cpp — the transformer forward pass (src/model/forward.h) over the ops of
// src/ref/ops_ref.h, attention delegated to a LayerAttention.
// Tested by tests/unit/model/test_forward_reference.cpp and test_forward_hf_parity.cpp.
#include "model/forward.h"

#include <algorithm>
#include <chrono>

namespace kascade {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void ensure(std::vector<float>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
}

Status validate_input(const Model& model, const ForwardInput& in) {
  const ModelConfig& c = model.config();
  KC_CHECK_ARG(in.cu_q_lens.size() >= 2, "forward: cu_q_lens needs batch + 1 >= 2 entries, got ",
               in.cu_q_lens.size());
  KC_CHECK_ARG(in.cu_q_lens.front() == 0, "forward: cu_q_lens[0] is ", in.cu_q_lens.front(), ", expected 0");
  for (size_t b = 1; b < in.cu_q_lens.size(); ++b)
    KC_CHECK_ARG(in.cu_q_lens[b] > in.cu_q_lens[b - 1], "forward: sequence ", b - 1, " has no tokens (cu_q_lens ",
                 in.cu_q_lens[b - 1], " → ", in.cu_q_lens[b], ")");
  const int64_t total = in.cu_q_lens.back();
  KC_CHECK_ARG(static_cast<int64_t>(in.tokens.size()) == total, "forward: ", in.tokens.size(),
               " tokens but cu_q_lens ends at ", total);
  KC_CHECK_ARG(static_cast<int64_t>(in.positions.size()) == total, "forward: ", in.positions.size(),
               " positions for ", total, " tokens");
  for (int64_t i = 0; i < total; ++i) {
    KC_CHECK_ARG(in.tokens[i] >= 0 && in.tokens[i] < c.vocab_size, "forward: token id ", in.tokens[i], " at row ", i,
                 " is outside the vocabulary [0, ", c.vocab_size, ")");
    KC_CHECK_ARG(in.positions[i] >= 0, "forward: position ", in.positions[i], " at row ", i, " is negative");
  }
  for (int32_t r : in.logit_rows)
    KC_CHECK_ARG(r >= 0 && r < total, "forward: logit row ", r, " outside [0, ", total, ")");
  return ok_status();
}

}  // namespace

Status forward(const Model& model, const ForwardInput& in, LayerAttention& attention, ForwardWorkspace& ws,
               float* logits, ForwardObserver* observer) {
  KC_RETURN_IF_ERROR(validate_input(model, in));
  KC_CHECK_ARG(logits != nullptr || in.logit_rows.empty(), "forward: logits is null");
  const auto call_start = Clock::now();
  const double matmul_before = ws.timings.matmul_s, attention_before = ws.timings.attention_s;
  // ys[i][m, ws[i].rows] = x[m, cols] · ws[i]ᵀ in one parallel loop, timed.
  const auto matmul_many = [&ws](const float* x, int64_t m, std::span<const ref::WeightMatrix> weights,
                                 std::span<float* const> ys) {
    const auto start = Clock::now();
    Status s = ref::matmul_many_ref(x, m, weights, ys, &ws.scratch);
    ws.timings.matmul_s += seconds_since(start);
    for (const ref::WeightMatrix& w : weights)
      ws.timings.matmul_flops += 2.0 * static_cast<double>(m) * static_cast<double>(w.rows) * static_cast<double>(w.cols);
    return s;
  };
  const auto matmul = [&matmul_many](const float* x, int64_t m, const ref::WeightMatrix& w, float* y) {
    float* const outs[] = {y};
    return matmul_many(x, m, std::span<const ref::WeightMatrix>(&w, 1), outs);
  };
  const ModelConfig& c = model.config();
  const int64_t T = in.cu_q_lens.back();
  const int32_t hidden = static_cast<int32_t>(c.hidden_size);
  const int32_t H = static_cast<int32_t>(c.num_attention_heads);
  const int32_t G = static_cast<int32_t>(c.num_key_value_heads);
  const int32_t d = static_cast<int32_t>(c.head_dim);
  const int64_t inter = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);

  ensure(ws.x, T * hidden);
  ensure(ws.h, T * hidden);
  ensure(ws.q, T * H * d);
  ensure(ws.k, T * G * d);
  ensure(ws.v, T * G * d);
  ensure(ws.attn, T * H * d);
  ensure(ws.o, T * hidden);
  ensure(ws.gate, T * inter);
  ensure(ws.up, T * inter);

  const TensorView& embed = model.embed_tokens();
  KC_RETURN_IF_ERROR(
      ref::embedding_gather_ref(embed.data, embed.dtype, c.vocab_size, hidden, in.tokens.data(), T, ws.x.data()));

  QueryBatch qb;
  qb.q = ws.q.data();
  qb.dtype = DType::kF32;
  qb.batch = static_cast<int32_t>(in.cu_q_lens.size() - 1);
  qb.total_q = static_cast<int32_t>(T);
  qb.num_heads = H;
  qb.head_dim = d;
  qb.cu_q_lens = in.cu_q_lens.data();

  const RopeFrequencies& rope = model.rope();
  for (int32_t l = 0; l < static_cast<int32_t>(c.num_hidden_layers); ++l) {
    const ModelLayer& w = model.layer(l);
    // Attention block.
    KC_RETURN_IF_ERROR(ref::rmsnorm_ref(ws.x.data(), T, hidden, w.input_layernorm.data, w.input_layernorm.dtype, eps,
                                        ws.h.data()));
    {
      const ref::WeightMatrix qkv[] = {w.q_proj, w.k_proj, w.v_proj};
      float* const outs[] = {ws.q.data(), ws.k.data(), ws.v.data()};
      KC_RETURN_IF_ERROR(matmul_many(ws.h.data(), T, qkv, outs));
    }
    if (c.qk_norm) {
      KC_RETURN_IF_ERROR(ref::rmsnorm_ref(ws.q.data(), T * H, d, w.q_norm.data, w.q_norm.dtype, eps, ws.q.data()));
      KC_RETURN_IF_ERROR(ref::rmsnorm_ref(ws.k.data(), T * G, d, w.k_norm.data, w.k_norm.dtype, eps, ws.k.data()));
    }
    KC_RETURN_IF_ERROR(ref::apply_rope_ref(ws.q.data(), T, H, d, in.positions.data(), rope.inv_freq.data(),
                                           rope.attention_scaling));
    KC_RETURN_IF_ERROR(ref::apply_rope_ref(ws.k.data(), T, G, d, in.positions.data(), rope.inv_freq.data(),
                                           rope.attention_scaling));
    const auto attention_start = Clock::now();
    Status s = attention.store(l, ws.k.data(), ws.v.data());
    if (!s.ok()) return s.with_context("layer " + std::to_string(l));
    s = attention.attend(l, qb, model.attention_scale(), ws.attn.data());
    if (!s.ok()) return s.with_context("layer " + std::to_string(l));
    ws.timings.attention_s += seconds_since(attention_start);
    KC_RETURN_IF_ERROR(matmul(ws.attn.data(), T, w.o_proj, ws.o.data()));
    if (observer != nullptr) {
      s = observer->on_attention(l, ws.x.data(), ws.o.data(), T);
      if (!s.ok()) return s.with_context("observer, layer " + std::to_string(l));
    }
    KC_RETURN_IF_ERROR(ref::add_inplace_ref(ws.x.data(), ws.o.data(), T * hidden));
    // MLP block.
    KC_RETURN_IF_ERROR(ref::rmsnorm_ref(ws.x.data(), T, hidden, w.post_attention_layernorm.data,
                                        w.post_attention_layernorm.dtype, eps, ws.h.data()));
    {
      const ref::WeightMatrix gate_up[] = {w.gate_proj, w.up_proj};
      float* const outs[] = {ws.gate.data(), ws.up.data()};
      KC_RETURN_IF_ERROR(matmul_many(ws.h.data(), T, gate_up, outs));
    }
    KC_RETURN_IF_ERROR(ref::silu_mul_ref(ws.gate.data(), ws.up.data(), T * inter, ws.gate.data()));
    KC_RETURN_IF_ERROR(matmul(ws.gate.data(), T, w.down_proj, ws.o.data()));
    KC_RETURN_IF_ERROR(ref::add_inplace_ref(ws.x.data(), ws.o.data(), T * hidden));
  }

  // Everything but the linear layers and attention of this call counts as "other".
  const auto close_timings = [&]() {
    ws.timings.other_s += seconds_since(call_start) - (ws.timings.matmul_s - matmul_before) -
                          (ws.timings.attention_s - attention_before);
  };
  if (in.logit_rows.empty()) {
    close_timings();
    return ok_status();
  }
  const int64_t rows = static_cast<int64_t>(in.logit_rows.size());
  ensure(ws.final_rows, rows * hidden);
  for (int64_t i = 0; i < rows; ++i)
    std::copy_n(ws.x.data() + static_cast<int64_t>(in.logit_rows[i]) * hidden, hidden,
                ws.final_rows.data() + i * hidden);
  const TensorView& norm = model.final_norm();
  KC_RETURN_IF_ERROR(
      ref::rmsnorm_ref(ws.final_rows.data(), rows, hidden, norm.data, norm.dtype, eps, ws.final_rows.data()));
  KC_RETURN_IF_ERROR(matmul(ws.final_rows.data(), rows, model.lm_head(), logits));
  close_timings();
  return ok_status();
}

}  // namespace kascade
