// tests/cuda/test_backend_policies.cpp — every attention policy decoding on the GPU: the same
// multi-layer decode problem (random q/K/V per layer in bf16 or f16, H = 8..32, G = 2..8, d = 64 and
// 128, shuffled KV pages or contiguous K/V, a batch of mixed awkward lengths) runs through
// make_policy over the CPU backend (host views) and over the CUDA backend (device views), two
// decode steps with different lengths. After every layer:
//   - fresh rows (anchors, selection layers, streaming's rows) are well formed and equal the CPU
//     backend's: as tie-aware Top-k sets against fp64 pooled scores for the score-based selectors
//     (kascade, kascade-pooled, kascade-noremap, kascade-decode, oracle, omnikv), exactly for quest
//     (same fp64 arithmetic) and streaming (host-built rows), and up to near-ties of the per-head
//     scores for lessismore;
//   - the GPU output (NaN-poisoned before the layer) equals an fp64 recomputation over the keys the
//     layer attends on the GPU (dense range, or the GPU's rows through the layer's head map) by the
//     FA3 rule, and equals the CPU backend's output within the dtype tolerance wherever the rows
//     agree;
//   - the second step allocates nothing on the device (plans sized once for max_seq_len).
// Every policy is made over the CUDA backend itself and begins both forward modes
// (CudaBackendPoliciesBare). Prefill through the policies is tested by test_backend_prefill.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.h"
#include "cuda_test_support.h"
#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "test_backend_support.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

constexpr int32_t kLayers = 8;  // omnikv filters {1, 2, 5}, lessismore selections {1, 3}

struct BackendCase {
  std::string label;
  DType dtype = DType::kBF16;
  int32_t num_heads = 8, num_kv_heads = 2, head_dim = 128;
  int32_t page_size = 16;  // 0: contiguous K/V
  std::vector<int32_t> step1, step2;  // kv_lens of the two decode steps
};

const std::vector<BackendCase>& backend_cases() {
  static const std::vector<BackendCase> cases = {
      {"bf16_h8_g2_d128_page16", DType::kBF16, 8, 2, 128, 16, {1, 33, 129, 1000, 417}, {2, 31, 127, 999, 300}},
      {"f16_h32_g4_d64_page32", DType::kF16, 32, 4, 64, 32, {4097, 31, 127}, {4000, 2, 64}},
      {"bf16_h16_g8_d64_contiguous", DType::kBF16, 16, 8, 64, 0, {32, 500}, {33, 499}},
      {"f16_h8_g8_d128_page64", DType::kF16, 8, 8, 128, 64, {129, 1000, 64, 1}, {130, 700, 65, 3}},
  };
  return cases;
}

// Kascade anchors {0, 3, 5} (rotating head maps on the reuse layers).
PolicyConfig config_for(const BackendCase& c, const std::string& name) {
  return backend_policy_config(name, kLayers, {0, 3, 5}, c.num_heads, c.num_kv_heads, c.head_dim);
}

// The head map layer `layer` reads its rows with, as sparse_key_lists takes it (empty: g·R/G).
std::vector<int32_t> layer_map(const PolicyConfig& config, int32_t layer, LayerRole role) {
  if ((config.name == "kascade" || config.name == "kascade-decode") && role == LayerRole::kReuse) {
    const auto begin = config.schedule.head_map.begin() + static_cast<int64_t>(layer) * config.num_kv_heads;
    return std::vector<int32_t>(begin, begin + config.num_kv_heads);
  }
  return {};
}

bool score_selected(const std::string& name) {
  return name.rfind("kascade", 0) == 0 || name == "oracle" || name == "omnikv";
}

// One decode problem per layer, the same lengths.
struct Layers {
  std::vector<std::unique_ptr<DecodeProblem>> layer;
  Layers(const BackendCase& c, std::mt19937_64& rng) {
    DecodeCase dc;
    dc.dtype = c.dtype;
    dc.num_heads = c.num_heads;
    dc.num_kv_heads = c.num_kv_heads;
    dc.head_dim = c.head_dim;
    dc.page_size = c.page_size;
    dc.kv_lens = c.step1;
    dc.max_seq_len = std::max(*std::max_element(c.step1.begin(), c.step1.end()),
                              *std::max_element(c.step2.begin(), c.step2.end()));
    for (int32_t l = 0; l < kLayers; ++l) layer.push_back(std::make_unique<DecodeProblem>(dc, rng));
  }
  void next_step(const std::vector<int32_t>& kv_lens, std::mt19937_64& rng) {
    for (auto& p : layer) {
      p->set_kv_lens(kv_lens);
      p->redraw_q(rng);
    }
  }
};

Result<std::shared_ptr<CudaBackend>> backend_for(const BackendCase& c, const Layers& layers) {
  CudaBackendOptions options;
  options.max_batch = static_cast<int32_t>(c.step1.size());
  options.max_seq_len = layers.layer[0]->max_seq_len();
  options.budget = test_budget();
  return CudaBackend::create(options);
}

// Compares the fresh rows of `layer` (GPU snapshot vs CPU snapshot); returns whether they are equal as sets.
bool compare_fresh_rows(const PolicyConfig& config, const DecodeProblem& p, const IndexSnapshot& gpu,
                        const IndexSnapshot& cpu, bool* all_equal) {
  EXPECT_EQ(gpu.num_rows, cpu.num_rows);
  EXPECT_EQ(gpu.producer_layer, cpu.producer_layer);
  bool equal = true;
  for (int32_t b = 0; b < p.batch(); ++b) {
    const int64_t n = p.kv_lens()[b];
    const std::vector<double> probs = head_probabilities(p, b);
    for (int32_t r = 0; r < cpu.num_rows; ++r) {
      SCOPED_TRACE("sequence " + std::to_string(b) + " (n " + std::to_string(n) + ") row " + std::to_string(r));
      EXPECT_TRUE(well_formed_row(gpu.indices, gpu.row_lens, gpu.num_rows, gpu.k_max, b, r, n));
      const auto got = row_entries(gpu.indices, gpu.row_lens, gpu.num_rows, gpu.k_max, b, r);
      const auto want = row_entries(cpu.indices, cpu.row_lens, cpu.num_rows, cpu.k_max, b, r);
      const bool same = static_cast<bool>(same_set(got, want));
      equal = equal && same;
      if (config.name == "quest" || config.name == "streaming") {
        EXPECT_EQ(got, want) << "rows must equal the CPU backend's exactly (both ascending)";
      } else if (config.name == "lessismore") {
        const int64_t k = budget_k(n, config.budget);
        EXPECT_TRUE(lessismore_rows_equivalent(got, want, probs, config.num_heads, n, k, config.lessismore_sinks, 1e-4));
      } else if (score_selected(config.name)) {
        const bool max = config.name == "omnikv";
        const std::vector<float> pooled = pooled_rows(probs, config.num_heads, n, cpu.num_rows, max);
        const std::vector<float> row(pooled.begin() + r * n, pooled.begin() + (r + 1) * n);
        EXPECT_EQ(static_cast<int64_t>(got.size()), budget_k(n, config.budget));
        EXPECT_TRUE(topk_sets_equivalent(got, want, row, 1e-3));
      } else {
        ADD_FAILURE() << "policy " << config.name << " has no row check";
      }
    }
  }
  *all_equal = *all_equal && equal;
  return equal;
}

// Runs one decode step of every layer on both backends and checks it.
void run_step(const BackendCase& c, const PolicyConfig& config, AttentionPolicy& cpu_policy, AttentionPolicy& gpu_policy,
              const Layers& layers, int* tie_layers) {
  const DecodeProblem& first = *layers.layer[0];
  const int32_t batch = first.batch(), heads = c.num_heads, d = c.head_dim;
  std::vector<int32_t> q_lens(static_cast<size_t>(batch), 1);
  ForwardInfo info{ForwardMode::kDecode, batch, q_lens.data(), first.kv_lens().data()};
  ASSERT_TRUE(cpu_policy.begin_forward(info).ok());
  const Status begun = gpu_policy.begin_forward(info);
  ASSERT_TRUE(begun.ok()) << begun.to_string();
  const size_t out_elems = static_cast<size_t>(batch) * heads * d;
  for (int32_t l = 0; l < kLayers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const DecodeProblem& p = *layers.layer[l];
    AttentionParams params;
    params.scale = p.scale();
    std::vector<float> cpu_o(out_elems), cpu_lse(static_cast<size_t>(batch) * heads);
    const Status cpu_status = cpu_policy.attention(l, p.host_q(), p.host_kv(), params,
                                                   AttentionOutput{cpu_o.data(), DType::kF32, cpu_lse.data()});
    ASSERT_TRUE(cpu_status.ok()) << cpu_status.to_string();
    DeviceBuffer o(out_elems * dtype_size(c.dtype));  // NaN poison
    DeviceBuffer lse(static_cast<size_t>(batch) * heads * sizeof(float));
    const Status gpu_status =
        gpu_policy.attention(l, p.device_q(), p.device_kv(), params, AttentionOutput{o.data(), c.dtype, lse.as<float>()});
    ASSERT_TRUE(gpu_status.ok()) << gpu_status.to_string();
    const std::vector<float> got_o = to_floats(o.download(), c.dtype);
    const std::vector<float> got_lse = lse.download_as<float>();
    EXPECT_TRUE(o.guards_intact() && lse.guards_intact());

    const LayerRole role = *cpu_policy.role(l, ForwardMode::kDecode);
    auto gpu_snap = gpu_policy.snapshot_indices();
    auto cpu_snap = cpu_policy.snapshot_indices();
    ASSERT_TRUE(gpu_snap.ok() && cpu_snap.ok());
    bool rows_equal = true;
    const bool fresh = cpu_snap->valid && (cpu_snap->producer_layer == l || (cpu_snap->producer_layer == -1 && l == 0));
    ASSERT_EQ(gpu_snap->valid, cpu_snap->valid);
    if (fresh && (role == LayerRole::kAnchor || role == LayerRole::kDenseAnchor || config.name == "streaming")) {
      bool all_equal = true;
      compare_fresh_rows(config, p, *gpu_snap, *cpu_snap, &all_equal);
      if (!all_equal) ++*tie_layers;
    }
    if (cpu_snap->valid) {
      // The rows this layer reads may come from an earlier layer: compare them again as sets.
      for (int32_t b = 0; b < batch && rows_equal; ++b) {
        for (int32_t r = 0; r < cpu_snap->num_rows && rows_equal; ++r) {
          rows_equal = static_cast<bool>(
              same_set(row_entries(gpu_snap->indices, gpu_snap->row_lens, gpu_snap->num_rows, gpu_snap->k_max, b, r),
                       row_entries(cpu_snap->indices, cpu_snap->row_lens, cpu_snap->num_rows, cpu_snap->k_max, b, r)));
        }
      }
    }

    // Output against fp64 over the keys the GPU attended.
    const bool dense = role == LayerRole::kDense || role == LayerRole::kDenseAnchor;
    const KeyLists keys = dense ? dense_key_lists(p)
                                : sparse_key_lists(p, gpu_snap->indices, gpu_snap->row_lens, gpu_snap->num_rows,
                                                   gpu_snap->k_max, gpu_snap->granularity, layer_map(config, l, role));
    EXPECT_TRUE(check_attention(p, keys, got_o, got_lse));
    if (dense || rows_equal) {
      EXPECT_TRUE(all_close(got_o, cpu_o, {batch, heads, d}, tolerance_for(c.dtype))) << "GPU vs CPU backend output";
      EXPECT_TRUE(all_close(got_lse, cpu_lse, {batch, heads}, {1e-3, 1e-4})) << "GPU vs CPU backend lse";
    }
  }
}

class CudaBackendPolicies : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBackendPolicies, DecodeMatchesTheCpuBackend) {
  KC_SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  int tie_layers = 0;
  for (size_t ci = 0; ci < backend_cases().size(); ++ci) {
    const BackendCase& c = backend_cases()[ci];
    SCOPED_TRACE("case " + c.label);
    auto rng = rng_for_test(ci);
    Layers layers(c, rng);
    auto cuda = backend_for(c, layers);
    ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
    const PolicyConfig config = config_for(c, name);
    auto cpu_policy = make_policy(config, make_cpu_backend());
    ASSERT_TRUE(cpu_policy.ok()) << cpu_policy.status().to_string();
    auto gpu_policy = make_policy(config, std::shared_ptr<AttentionBackend>(*cuda));
    ASSERT_TRUE(gpu_policy.ok()) << gpu_policy.status().to_string();

    run_step(c, config, **cpu_policy, **gpu_policy, layers, &tie_layers);
    if (HasFatalFailure()) return;
    const int64_t allocations = (*cuda)->internal_allocations();
    layers.next_step(c.step2, rng);
    {
      SCOPED_TRACE("step 2");
      run_step(c, config, **cpu_policy, **gpu_policy, layers, &tie_layers);
    }
    EXPECT_EQ((*cuda)->internal_allocations(), allocations) << "the second decode step allocated device memory";
    const Status errors = (*cuda)->check_device_errors();
    EXPECT_TRUE(errors.ok()) << errors.to_string();
  }
  // Near-ties between the GPU's and the CPU's fp32 scores are rare: most selecting layers must agree exactly.
  EXPECT_LE(tie_layers, 2) << "selecting layers whose rows differed from the CPU backend's (tie-aware accepted)";
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, CudaBackendPolicies,
                         ::testing::Values("dense", "kascade", "kascade-pooled", "kascade-noremap", "kascade-decode",
                                           "oracle", "streaming", "quest", "omnikv", "lessismore"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string label = info.param;
                           std::replace(label.begin(), label.end(), '-', '_');
                           return label;
                         });

// Over the bare CUDA backend every policy is made and begins a prefill and a decode call (the
// oracle's prefill included: select_prefill_oracle composes select_decode).
TEST(CudaBackendPoliciesBare, EveryPolicyIsMadeAndBeginsBothModes) {
  KC_SKIP_WITHOUT_GPU();
  const BackendCase& c = backend_cases()[0];
  CudaBackendOptions options;
  options.max_batch = 4;
  options.max_seq_len = 1024;
  auto cuda = make_cuda_backend(options);
  ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
  const std::vector<int32_t> q_lens = {40, 1}, kv_lens = {40, 100}, ones = {1, 1};
  for (const char* name : {"dense", "kascade", "kascade-pooled", "kascade-noremap", "kascade-decode", "oracle",
                           "streaming", "quest", "omnikv", "lessismore"}) {
    auto policy = make_policy(config_for(c, name), *cuda);
    ASSERT_TRUE(policy.ok()) << name << ": " << policy.status().to_string();
    const Status prefill = (*policy)->begin_forward({ForwardMode::kPrefill, 2, q_lens.data(), kv_lens.data()});
    EXPECT_TRUE(prefill.ok()) << name << ": " << prefill.to_string();
    const Status decode = (*policy)->begin_forward({ForwardMode::kDecode, 2, ones.data(), kv_lens.data()});
    EXPECT_TRUE(decode.ok()) << name << ": " << decode.to_string();
  }
  // Shapes no kernel is built for are refused at creation, naming the value for both modes.
  BackendCase odd = c;
  odd.head_dim = 96;
  auto refused = make_policy(config_for(odd, "kascade"), *cuda);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("can run in no forward mode on the cuda backend"), std::string::npos)
      << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("head_dim is 96"), std::string::npos) << refused.status().to_string();
}

}  // namespace
}  // namespace kascade::testing
