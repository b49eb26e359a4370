// test_forward_support.h — helpers of the forward-pass tests (tests/unit/model/test_forward_*.cpp):
//   - RandomModel: a model config (parsed from config.json text) with random weights of a dtype,
//     keeping the float value of every tensor for the fp64 reference;
//   - ContiguousAttention: a LayerAttention over a plain per-sequence cache (each sequence owns a
//     contiguous run of pages) that calls ref::dense_attention_ref — the simplest correct
//     attention, independent of the runtime's paged cache and policies;
//   - reference_logits(): a float64 transformer written directly from the Llama / Qwen3
//     equations (HF modeling_llama.py / modeling_qwen3.py), full causal attention per sequence.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kascade/model_config.h"
#include "kascade/weights.h"
#include "model/forward.h"
#include "model/model.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::forward_test {

struct RandomModel {
  ModelConfig config;
  std::map<std::string, std::vector<float>> values;  // name → float values (rounded to the dtype)
  std::shared_ptr<std::vector<std::vector<uint8_t>>> bytes;  // storage the views point into
  std::vector<NamedTensor> tensors;
};

inline RandomModel make_random_model(const std::string& config_json, DType dtype, uint64_t seed) {
  RandomModel m;
  auto config = parse_model_config(config_json);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  m.config = *config;
  auto specs = expected_weights(m.config);
  EXPECT_TRUE(specs.ok()) << specs.status().to_string();
  std::mt19937_64 rng(seed);
  m.bytes = std::make_shared<std::vector<std::vector<uint8_t>>>();
  m.bytes->reserve(specs->size());
  for (const WeightSpec& spec : *specs) {
    int64_t n = 1;
    for (int64_t s : spec.shape) n *= s;
    const bool is_norm = spec.shape.size() == 1;
    std::vector<float> v = is_norm ? testing::random_floats(rng, n, 0.8f, 1.2f, dtype)
                                   : testing::random_floats(rng, n, -0.15f, 0.15f, dtype);
    m.bytes->push_back(testing::pack_as(v, dtype));
    m.tensors.push_back(NamedTensor{spec.name, TensorView{m.bytes->back().data(), dtype, spec.shape}});
    m.values[spec.name] = std::move(v);
  }
  return m;
}

inline std::unique_ptr<Model> build_model(const RandomModel& m, ModelOptions options = {}) {
  auto weights = Weights::from_tensors(m.config, m.tensors, m.bytes);
  EXPECT_TRUE(weights.ok()) << weights.status().to_string();
  auto model = Model::create(std::move(weights).value(), options);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return model.ok() ? std::move(model).value() : nullptr;
}

// A LayerAttention over per-sequence contiguous caches (pages [b·P, (b+1)·P) belong to sequence b).
class ContiguousAttention final : public LayerAttention {
 public:
  ContiguousAttention(const ModelConfig& c, int32_t batch, int32_t max_len)
      : G_(static_cast<int32_t>(c.num_key_value_heads)), d_(static_cast<int32_t>(c.head_dim)), batch_(batch),
        pages_per_seq_((max_len + kPage - 1) / kPage), lens_(batch, 0) {
    const size_t per_layer = static_cast<size_t>(batch) * pages_per_seq_ * kPage * G_ * d_;
    k_.assign(c.num_hidden_layers, std::vector<float>(per_layer, 0.0f));
    v_.assign(c.num_hidden_layers, std::vector<float>(per_layer, 0.0f));
    table_.resize(static_cast<size_t>(batch) * pages_per_seq_);
    for (size_t i = 0; i < table_.size(); ++i) table_[i] = static_cast<int32_t>(i);
  }
  // Declares the next call: q_lens[b] new tokens for sequence b (0 = not in the call); the call's
  // packed rows follow the participating sequences in order.
  void begin_call(const std::vector<int32_t>& q_lens) {
    seqs_.clear();
    call_q_lens_.clear();
    for (int32_t b = 0; b < batch_; ++b) {
      if (q_lens[b] == 0) continue;
      seqs_.push_back(b);
      call_q_lens_.push_back(q_lens[b]);
    }
  }
  void end_call() {
    for (size_t i = 0; i < seqs_.size(); ++i) lens_[seqs_[i]] += call_q_lens_[i];
  }
  Status store(int32_t layer, const float* k, const float* v) override {
    int64_t row = 0;
    const int64_t width = static_cast<int64_t>(G_) * d_;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const int32_t b = seqs_[i];
      for (int32_t t = 0; t < call_q_lens_[i]; ++t, ++row) {
        const int64_t pos = lens_[b] + t;
        const int64_t dst = (static_cast<int64_t>(b) * pages_per_seq_ * kPage + pos) * width;
        std::copy_n(k + row * width, width, k_[layer].data() + dst);
        std::copy_n(v + row * width, width, v_[layer].data() + dst);
      }
    }
    return ok_status();
  }
  Status attend(int32_t layer, const QueryBatch& q, float scale, float* out) override {
    std::vector<int32_t> table(seqs_.size() * pages_per_seq_);
    std::vector<int32_t> kv_lens(seqs_.size());
    for (size_t i = 0; i < seqs_.size(); ++i) {
      std::copy_n(table_.data() + static_cast<size_t>(seqs_[i]) * pages_per_seq_, pages_per_seq_,
                  table.data() + i * pages_per_seq_);
      kv_lens[i] = static_cast<int32_t>(lens_[seqs_[i]] + call_q_lens_[i]);
    }
    PagedKv kv;
    kv.k = k_[layer].data();
    kv.v = v_[layer].data();
    kv.dtype = DType::kF32;
    kv.num_pages = static_cast<int32_t>(table_.size());
    kv.page_size = kPage;
    kv.num_kv_heads = G_;
    kv.head_dim = d_;
    kv.block_table = table.data();
    kv.max_pages_per_seq = pages_per_seq_;
    kv.kv_lens = kv_lens.data();
    AttentionParams params;
    params.scale = scale;
    AttentionOutput o;
    o.o = out;
    o.dtype = DType::kF32;
    return ref::dense_attention_ref(q, kv, params, o);
  }
  int64_t length(int32_t b) const { return lens_[b]; }

 private:
  static constexpr int32_t kPage = 16;
  int32_t G_, d_, batch_, pages_per_seq_;
  std::vector<int64_t> lens_;
  std::vector<int32_t> table_;
  std::vector<std::vector<float>> k_, v_;  // [layer][batch·P·page, G, d]
  std::vector<int32_t> seqs_, call_q_lens_;
};

// Runs sequences through `model` in calls: calls[c][b] new tokens of sequence b in call c.
// Returns logits of every token: out[b] = [len_b, vocab] (float).
inline std::vector<std::vector<float>> run_in_calls(const Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                    const std::vector<std::vector<int32_t>>& calls) {
  const ModelConfig& c = model.config();
  int32_t max_len = 0;
  for (const auto& s : seqs) max_len = std::max<int32_t>(max_len, static_cast<int32_t>(s.size()));
  ContiguousAttention attention(c, static_cast<int32_t>(seqs.size()), max_len);
  ForwardWorkspace ws;
  std::vector<std::vector<float>> out(seqs.size());
  for (const auto& call : calls) {
    attention.begin_call(call);
    std::vector<int32_t> tokens, cu = {0}, rows;
    std::vector<int64_t> positions;
    std::vector<int32_t> owners;
    for (size_t b = 0; b < seqs.size(); ++b) {
      if (call[b] == 0) continue;
      const int64_t start = attention.length(static_cast<int32_t>(b));
      for (int32_t t = 0; t < call[b]; ++t) {
        rows.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(seqs[b][start + t]);
        positions.push_back(start + t);
        owners.push_back(static_cast<int32_t>(b));
      }
      cu.push_back(static_cast<int32_t>(tokens.size()));
    }
    std::vector<float> logits(rows.size() * c.vocab_size);
    ForwardInput in{tokens, cu, positions, rows};
    const Status s = forward(model, in, attention, ws, logits.data());
    EXPECT_TRUE(s.ok()) << s.to_string();
    attention.end_call();
    for (size_t r = 0; r < rows.size(); ++r)
      out[owners[r]].insert(out[owners[r]].end(), logits.begin() + r * c.vocab_size,
                            logits.begin() + (r + 1) * c.vocab_size);
  }
  return out;
}

// float64 reference: logits [n, vocab] of one sequence, every position.
inline std::vector<double> reference_logits(const RandomModel& m, const RopeFrequencies& rope,
                                            const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t D = c.hidden_size, H = c.num_attention_heads, G = c.num_key_value_heads, d = c.head_dim;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  const double eps = c.rms_norm_eps;
  auto W = [&](const std::string& name) -> const std::vector<float>& { return m.values.at(name); };
  auto rmsnorm = [&](const double* x, int64_t dim, const std::vector<float>& w, double* y) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * inv * w[i];
  };
  auto linear = [&](const std::vector<double>& x, int64_t rows, int64_t in, const std::vector<float>& w, int64_t out_f) {
    std::vector<double> y(rows * out_f, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out_f; ++o) {
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
        y[r * out_f + o] = s;
      }
    return y;
  };
  auto rope_apply = [&](std::vector<double>& x, int64_t heads) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < d / 2; ++i) {
          const double angle = static_cast<double>(static_cast<float>(t) * rope.inv_freq[i]);  // HF: fp32 product
          const double cs = std::cos(angle) * rope.attention_scaling, sn = std::sin(angle) * rope.attention_scaling;
          double* v = x.data() + (t * heads + h) * d;
          const double a = v[i], b = v[i + d / 2];
          v[i] = a * cs - b * sn;
          v[i + d / 2] = b * cs + a * sn;
        }
  };
  std::vector<double> x(n * D);
  const auto& embed = W("model.embed_tokens.weight");
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < D; ++i) x[t * D + i] = embed[tokens[t] * D + i];
  std::vector<double> h(n * D);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (int64_t t = 0; t < n; ++t) rmsnorm(&x[t * D], D, W(p + "input_layernorm.weight"), &h[t * D]);
    auto q = linear(h, n, D, W(p + "self_attn.q_proj.weight"), H * d);
    auto k = linear(h, n, D, W(p + "self_attn.k_proj.weight"), G * d);
    auto v = linear(h, n, D, W(p + "self_attn.v_proj.weight"), G * d);
    if (c.qk_norm) {
      for (int64_t r = 0; r < n * H; ++r) rmsnorm(&q[r * d], d, W(p + "self_attn.q_norm.weight"), &q[r * d]);
      for (int64_t r = 0; r < n * G; ++r) rmsnorm(&k[r * d], d, W(p + "self_attn.k_norm.weight"), &k[r * d]);
    }
    rope_apply(q, H);
    rope_apply(k, G);
    std::vector<double> attn(n * H * d, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / G);
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[(t * H + hh) * d + i] * k[(j * G + g) * d + i];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= t; ++j) z += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < d; ++i) attn[(t * H + hh) * d + i] += s[j] / z * v[(j * G + g) * d + i];
      }
    auto o = linear(attn, n, H * d, W(p + "self_attn.o_proj.weight"), D);
    for (int64_t i = 0; i < n * D; ++i) x[i] += o[i];
    for (int64_t t = 0; t < n; ++t) rmsnorm(&x[t * D], D, W(p + "post_attention_layernorm.weight"), &h[t * D]);
    auto gate = linear(h, n, D, W(p + "mlp.gate_proj.weight"), I);
    auto up = linear(h, n, D, W(p + "mlp.up_proj.weight"), I);
    for (int64_t i = 0; i < n * I; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    auto down = linear(gate, n, I, W(p + "mlp.down_proj.weight"), D);
    for (int64_t i = 0; i < n * D; ++i) x[i] += down[i];
  }
  for (int64_t t = 0; t < n; ++t) rmsnorm(&x[t * D], D, W("model.norm.weight"), &h[t * D]);
  const auto& head = c.tie_word_embeddings ? W("model.embed_tokens.weight") : W("lm_head.weight");
  return linear(h, n, D, head, V);
}

}  // namespace kascade::forward_test
