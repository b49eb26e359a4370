// tests/cuda/test_gpu_runtime_calibration.cpp — the GPU runtime with a host policy and the layer
// observer (src/cuda/model/cuda_session.h), which `kascade calibrate --device cuda` runs on: the
// forward pass on the GPU, the recording policy and the importance observer on host copies.
// kascade-tiny with its real weights (tests/unit/runtime/tiny_model_case.h), all skipped without a GPU.
//
//   GpuHostPolicy.HostDenseMatchesGpuDense: a host policy computing dense attention with
//     ref::dense_attention_ref on the host copies (q, the layer's K/V cache, block table, lengths)
//     must give the GPU dense runtime's logits, teacher-forced over two prompts of different
//     lengths (prefill chunks and 4 decode steps). Both attend the same bf16 q/K/V with fp32
//     accumulation and round the output to bf16; the tolerance is the parity rule of
//     test_gpu_runtime_parity.cpp, bound(L) = 3·u·sqrt(6L) of max |logit| (L = 12: 0.099), with
//     argmax agreement where the margin exceeds twice that. A bridge bug (another layer's cache, a
//     wrong page, a stale or misplaced output) moves logits by O(max |logit|).
//   GpuHostPolicy.ObserverSeesTheCpuResidualStream: the observer's x (residual entering each layer)
//     and attn (attention block output) of a prefill on the GPU against the CPU runtime's, per
//     layer within bound(12) of the layer's max |value| (same rounding argument: the GPU keeps the
//     residual in fp32 and rounds activations to bf16 about six times per layer); every call
//     reports every layer once, in order, with the call's token count.
//   GpuCalibration.CollectsStatisticsOnTheGpu: collect_calibration_stats on the GPU runtime over
//     one ~1K-token prompt and 4 greedy tokens: the same units as on the CPU, valid statistics,
//     sim[l][l][g][g] = 1 (a layer's own Top-k set), sim in [0, 1], and the importance w per layer
//     within 0.2 of max w of the CPU's (w = 1 − cos(x, x + attn) moves by about twice the relative
//     perturbation of attn, bound(12) ≈ 0.1). The similarity deviation is printed, not bounded: a
//     Top-k_cal set flips at near-ties between bf16 and fp32 scores and the statistic takes a
//     minimum over tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kascade/calibration.h"
#include "kascade/runtime.h"
#include "ref/attention_ref.h"
#include "runtime/calibration_collector.h"
#include "unit/runtime/tiny_model_case.h"

namespace kascade::testing {
namespace {

double bound12() { return 3.0 * std::ldexp(1.0, -8) * std::sqrt(6.0 * 12); }

// Dense attention on host views with the reference op: a policy make_policy does not know, so the
// CUDA runtime keeps it on the host.
class HostDensePolicy final : public AttentionPolicy {
 public:
  explicit HostDensePolicy(const ModelConfig& c) {
    config_.name = "host-dense-ref";
    config_.num_layers = static_cast<int32_t>(c.num_hidden_layers);
    config_.num_heads = static_cast<int32_t>(c.num_attention_heads);
    config_.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
    config_.head_dim = static_cast<int32_t>(c.head_dim);
    for (auto& roles : stats_.roles) roles.assign(static_cast<size_t>(config_.num_layers), LayerRole::kDense);
    for (auto& layers : stats_.per_layer) layers.assign(static_cast<size_t>(config_.num_layers), AttendedCount{});
  }
  const PolicyConfig& config() const override { return config_; }
  Status begin_forward(const ForwardInfo&) override { return ok_status(); }
  Status attention(int32_t, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) override {
    ++calls_;
    return ref::dense_attention_ref(q, kv, params, out);
  }
  Result<LayerRole> role(int32_t, ForwardMode) const override { return LayerRole::kDense; }
  const AttendedStatistics& statistics() const override { return stats_; }
  void reset_statistics() override {}
  Result<IndexSnapshot> snapshot_indices() const override { return IndexSnapshot{}; }
  int64_t planned_decode_row_width() const override { return 0; }
  int64_t calls() const { return calls_; }

 private:
  PolicyConfig config_;
  AttendedStatistics stats_;
  int64_t calls_ = 0;
};

std::vector<TeacherForcedInput> inputs(const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<TeacherForcedInput> in(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    in[s].prompt = prompts[s];
    for (size_t i = 0; i < 4; ++i) in[s].continuation.push_back(prompts[s][50 + 7 * i]);
    in[s].first_logit_position = static_cast<int64_t>(prompts[s].size()) - 8;
  }
  return in;
}

TEST(GpuHostPolicy, HostDenseMatchesGpuDense) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  const auto in = inputs(*prompts);
  auto gpu = Runtime::create(tiny::options(Device::kCuda));
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  auto want = (*gpu)->teacher_forced(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto host = Runtime::create(tiny::options(Device::kCuda));
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  auto policy = std::make_unique<HostDensePolicy>((*host)->config());
  const HostDensePolicy* raw = policy.get();
  KC_ASSERT_OK((*host)->set_policy(std::move(policy)));
  auto got = (*host)->teacher_forced(in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(raw->calls(), 0) << "the host policy never ran";
  EXPECT_FALSE((*host)->last_cuda_graph_stats().enabled);
  const double tol = bound12();
  for (size_t s = 0; s < in.size(); ++s) {
    const auto& w = (*want)[s];
    const auto& g = (*got)[s];
    ASSERT_EQ(g.rows, w.rows);
    ASSERT_EQ(g.logits.size(), w.logits.size());
    const double scale = tiny::max_abs(w.logits);
    double worst = 0;
    for (size_t i = 0; i < w.logits.size(); ++i) {
      ASSERT_TRUE(std::isfinite(g.logits[i])) << "sequence " << s << " logit " << i;
      worst = std::max(worst, std::fabs(static_cast<double>(g.logits[i]) - w.logits[i]));
    }
    std::printf("[ measured ] host dense vs GPU dense, sequence %zu: max |dlogit| / max |logit| = %.4g (bound %.4f)\n",
                s, worst / scale, tol);
    EXPECT_LE(worst / scale, tol);
    const int64_t vocab = static_cast<int64_t>(w.logits.size()) / w.rows;
    for (int64_t r = 0; r < w.rows; ++r) {
      const tiny::RowTop2 top = tiny::top2(w.logits.data() + r * vocab, vocab);
      if (top.margin <= 2 * tol * scale) continue;
      EXPECT_EQ(tiny::top2(g.logits.data() + r * vocab, vocab).best, top.best) << "sequence " << s << " row " << r;
    }
  }
}

// Per layer: x and attn of every token of the first prefill call, as the observer saw them.
struct Observed {
  std::vector<std::vector<float>> x, attn;  // [layer][tokens * hidden]
  std::vector<int32_t> order;               // layers in call order
  std::vector<int64_t> tokens;              // token count of each observation
};

Result<Observed> observe_prefill(Device device, const std::vector<int32_t>& prompt) {
  RuntimeOptions o = tiny::options(device);
  o.chunk_size = static_cast<int32_t>((prompt.size() + 31) / 32 * 32);  // the prompt in one call
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(o));
  const int64_t hidden = rt->config().hidden_size;
  const int32_t layers = static_cast<int32_t>(rt->config().num_hidden_layers);
  Observed seen;
  seen.x.resize(static_cast<size_t>(layers));
  seen.attn.resize(static_cast<size_t>(layers));
  rt->set_layer_observer([&](int32_t layer, const float* x, const float* attn, int64_t tokens) {
    seen.order.push_back(layer);
    seen.tokens.push_back(tokens);
    if (seen.x[layer].empty()) {
      seen.x[layer].assign(x, x + tokens * hidden);
      seen.attn[layer].assign(attn, attn + tokens * hidden);
    }
    return ok_status();
  });
  TeacherForcedInput in;
  in.prompt = prompt;
  in.first_logit_position = static_cast<int64_t>(prompt.size()) - 1;
  KC_ASSIGN_OR_RETURN(const auto out, rt->teacher_forced({in}));
  (void)out;
  return seen;
}

double relative_deviation(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size() || want.empty()) return std::nan("");
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::nan("");
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? worst / scale : std::nan("");
}

TEST(GpuHostPolicy, ObserverSeesTheCpuResidualStream) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  const std::vector<int32_t>& prompt = (*prompts)[1];  // ~1K tokens
  auto cpu = observe_prefill(Device::kCpu, prompt);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = observe_prefill(Device::kCuda, prompt);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const int32_t layers = tiny::kLayers;
  ASSERT_EQ(gpu->order.size(), static_cast<size_t>(layers)) << "one prefill call, every layer once";
  for (int32_t l = 0; l < layers; ++l) {
    EXPECT_EQ(gpu->order[l], l);
    EXPECT_EQ(gpu->tokens[l], static_cast<int64_t>(prompt.size()));
    const double dx = relative_deviation(gpu->x[l], cpu->x[l]);
    const double da = relative_deviation(gpu->attn[l], cpu->attn[l]);
    std::printf("[ measured ] layer %d: x %.4g, attn %.4g of max |value| (bound %.4f)\n", l, dx, da, bound12());
    EXPECT_LE(dx, bound12()) << "layer " << l << " (NaN: non-finite or wrong size)";
    EXPECT_LE(da, bound12()) << "layer " << l << " (NaN: non-finite or wrong size)";
  }
}

Result<runtime::CalibrationRunResult> calibrate_on(Device device, const std::vector<int32_t>& prompt) {
  RuntimeOptions o = tiny::options(device);
  o.max_batch = 1;
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(o));
  runtime::CalibrationRunOptions options;
  options.decode_tokens = 4;
  options.stop_at_eos = false;
  return runtime::collect_calibration_stats(*rt, {runtime::CalibrationPrompt{"tiny-1k", prompt}}, options);
}

TEST(GpuCalibration, CollectsStatisticsOnTheGpu) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  const std::vector<int32_t>& prompt = (*prompts)[1];
  auto cpu = calibrate_on(Device::kCpu, prompt);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = calibrate_on(Device::kCuda, prompt);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  EXPECT_EQ(gpu->prefill_units, cpu->prefill_units);
  EXPECT_EQ(gpu->decode_units, cpu->decode_units);
  EXPECT_EQ(gpu->decode_units, 3) << "4 greedy tokens: 3 fed back";
  const calib::CalibrationStats& g = gpu->stats;
  const calib::CalibrationStats& c = cpu->stats;
  KC_ASSERT_OK(calib::validate_stats(g));
  ASSERT_EQ(g.num_layers, c.num_layers);
  ASSERT_EQ(g.num_kv_heads, c.num_kv_heads);
  EXPECT_EQ(g.num_prompts, 1);
  double worst_sim = 0, mean_sim = 0;
  int64_t count = 0;
  for (int32_t a = 0; a < g.num_layers; ++a)
    for (int32_t b = a; b < g.num_layers; ++b)
      for (int32_t ga = 0; ga < g.num_kv_heads; ++ga)
        for (int32_t gb = 0; gb < g.num_kv_heads; ++gb) {
          const double v = g.sim(a, b, ga, gb);
          EXPECT_GE(v, 0.0);
          EXPECT_LE(v, 1.0 + 1e-9) << a << " " << b << " " << ga << " " << gb;
          if (a == b && ga == gb) {
            EXPECT_NEAR(v, 1.0, 1e-9) << "layer " << a << " head " << ga;
          }
          const double d = std::fabs(v - c.sim(a, b, ga, gb));
          worst_sim = std::max(worst_sim, d);
          mean_sim += d;
          ++count;
        }
  std::printf("[ measured ] similarity GPU vs CPU: max |d| %.4f, mean |d| %.4f over %lld entries\n", worst_sim,
              mean_sim / static_cast<double>(count), static_cast<long long>(count));
  const double w_scale = *std::max_element(c.importance.begin(), c.importance.end());
  ASSERT_GT(w_scale, 0.0);
  for (int32_t l = 0; l < g.num_layers; ++l) {
    const double d = std::fabs(g.importance[l] - c.importance[l]);
    std::printf("[ measured ] importance layer %d: GPU %.5f, CPU %.5f\n", l, g.importance[l], c.importance[l]);
    EXPECT_LE(d, 0.2 * w_scale) << "layer " << l;
  }
}

}  // namespace
}  // namespace kascade::testing
