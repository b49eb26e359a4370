// tests/cuda/test_backend_prefill.cpp — the CUDA backend's prefill ops (src/cuda/backend/) on
// their own and under every policy:
//   - no GPU: the limits the prefill plan cache plans for (planned_total_q against brute-force
//     properties; shape_of covering every call of its key and accepted by the prefill kernels);
//   - on the GPU, every policy of make_policy (the oracle's prefill included) runs a
//     whole layer schedule — prefill in tile-aligned chunks (varlen batches; a sequence leaves the
//     batch when its prompt is done), then decode steps — over the CUDA backend (device views) and
//     the CPU backend (host views of the same bytes), outputs NaN-poisoned before every layer.
//     Cases: f16 and bf16, head dim 64 and 128, GQA groups 1, 4 and 8, prompt lengths 1, 31, 33,
//     127, 129, 1000, shuffled KV pages of 16, 32 and 64. After every layer:
//       rows: the same CSR layout as the CPU backend's; fresh rows (anchors; streaming's at layer 0)
//         equal the CPU backend's as sets — tie-aware (topk_sets_equivalent against fp64 pooled
//         scores) for score-based selections, exactly for host-built rows (streaming, quest), up to
//         near-ties of the per-head scores for lessismore;
//       output: by the FA3 rule (DESIGN.md §4) against an fp64 recomputation over the keys the GPU
//         attended (the causal range, or the GPU's rows through the layer's head map ∪ local keys),
//         and within the dtype tolerance of the CPU backend's output wherever the rows agree; the
//         CPU backend's dense outputs pass the same rule (a check of the recomputation);
//     decode allocates nothing after its first step, and no device error bit is set;
//     the oracle's prefill rows (tile_size 1, per query head, keys j <= i; composed from
//     select_decode) are checked like the others, tie-aware against each head's own fp64 p;
//   - the ops: refusals naming the problem, device errors surfacing at the next host read or after
//     every op (also across a workspace growth), allocations only when a larger plan is needed.
// Run: kascade_cuda_tests --gtest_filter='*CudaBackendPrefill*' (the whole file).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/prefill_plan_cache.h"
#include "cuda/prefill/prefill_plan.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda_test_support.h"
#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "test_backend_stack.h"
#include "test_backend_support.h"
#include "test_prefill_problem.h"
#include "testing/harness.h"
#include "testing/status_assertions.h"

namespace kascade::testing {
namespace {

constexpr int32_t kLayers = 6;       // kascade anchors {0, 3}; omnikv filters {0, 2, 3}; lessismore {0, 2}
constexpr int32_t kDecodeSteps = 3;  // after the prompt
constexpr int32_t kTile = 32;

// ---- no GPU needed: the plan cache's limits ----

TEST(CudaBackendPrefillPlanning, PlannedTotalQIsAFewRoundedSizesCoveringTheCall) {
  struct Limits {
    int32_t heads, max_batch, max_seq_len;
  };
  for (const Limits lim : {Limits{32, 1, 1000}, Limits{8, 4, 100}, Limits{1, 2, 5000}, Limits{1 << 20, 8, 4096}}) {
    SCOPED_TRACE("heads " + std::to_string(lim.heads) + " max_batch " + std::to_string(lim.max_batch) +
                 " max_seq_len " + std::to_string(lim.max_seq_len));
    const int64_t cap = std::min<int64_t>(int64_t{lim.max_batch} * lim.max_seq_len, 0x7fffffff / lim.heads);
    std::set<int32_t> sizes;
    int32_t previous = 0;
    for (int64_t total_q = 0; total_q <= std::min<int64_t>(cap, 12000); ++total_q) {
      const int32_t planned = cuda::planned_total_q(total_q, lim.heads, lim.max_batch, lim.max_seq_len);
      ASSERT_GE(planned, total_q) << "total_q " << total_q;
      ASSERT_LE(planned, std::max<int64_t>(cap, 16)) << "total_q " << total_q;
      ASSERT_GE(planned, previous) << "not monotone at total_q " << total_q;
      const bool power_of_two = planned >= 16 && (planned & (planned - 1)) == 0;
      ASSERT_TRUE(power_of_two || planned == cap) << "total_q " << total_q << " planned " << planned;
      if (power_of_two && planned > 16) {
        ASSERT_GT(std::min<int64_t>(total_q, cap), int64_t{planned} / 2) << "rounded up more than twice";
      }
      sizes.insert(planned);
      previous = planned;
    }
    int32_t log2_cap = 0;
    while ((int64_t{1} << log2_cap) < cap) ++log2_cap;
    EXPECT_LE(static_cast<int32_t>(sizes.size()), log2_cap + 1) << "too many distinct plans";
  }
}

TEST(CudaBackendPrefillPlanning, ShapesCoverEveryCallOfTheirKeyAndAreSupported) {
  cuda::PrefillPlanCache cache(/*max_batch=*/3, /*max_seq_len=*/1000, nullptr);
  for (const int32_t group : {1, 4, 8}) {
    for (const bool selection : {false, true}) {
      for (const int64_t total_q : {0, 1, 17, 64, 65, 999, 1000, 2500, 3000}) {
        cuda::PrefillKey key;
        key.dtype = DType::kBF16;
        key.num_kv_heads = 2;
        key.num_heads = 2 * group;
        key.head_dim = 128;
        key.total_q = total_q;
        key.selection = selection;
        key.tile_size = 32;
        const cuda::PrefillShape s = cache.shape_of(key);
        SCOPED_TRACE("group " + std::to_string(group) + " selection " + std::to_string(selection) + " total_q " +
                     std::to_string(total_q));
        EXPECT_TRUE(cuda::supports_prefill(s).ok()) << cuda::supports_prefill(s).to_string();
        EXPECT_EQ(s.batch, 3);
        EXPECT_EQ(s.max_kv_len, 1000);
        EXPECT_GE(s.max_total_q, total_q);
        EXPECT_GE(s.max_q_len, std::min<int64_t>(total_q, 1000)) << "a sequence's q_len is at most both";
        EXPECT_LE(s.max_q_len, s.max_kv_len);
        EXPECT_EQ(s.tile_size, selection ? 32 : 1);
        auto plan = cuda::layout_prefill_plan(s, {}, 132, 2);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        if (selection) {
          EXPECT_GE(plan->slot_capacity(), cuda::prefill::max_call_slots(3, total_q, std::min<int64_t>(total_q, 1000),
                                                                           32));
        }
      }
    }
  }
  // Dense and sparse plans do not inherit the selection limit on tile_size × group.
  cuda::PrefillKey wide;
  wide.dtype = DType::kF16;
  wide.num_heads = 16;
  wide.num_kv_heads = 2;
  wide.head_dim = 64;
  wide.total_q = 100;
  wide.tile_size = 64;
  EXPECT_TRUE(cuda::supports_prefill(cache.shape_of(wide)).ok());
  wide.selection = true;
  EXPECT_TRUE(refused_naming(cuda::supports_prefill(cache.shape_of(wide)), StatusCode::kUnsupported,
                             "tile_size × group"));
}

// ---- policy schedules, CUDA backend vs CPU backend ----

struct ScheduleCase {
  std::string label;
  DType dtype = DType::kBF16;
  int32_t num_heads = 8, num_kv_heads = 2, head_dim = 64, page_size = 16;
  std::vector<int32_t> prompts;  // prompt length per sequence
  int32_t chunk = 64;            // prefill chunk, a multiple of the tile size (large: one shot)
};

const std::vector<ScheduleCase>& schedule_cases() {
  static const std::vector<ScheduleCase> cases = {
      {"bf16_d128_g1_page16", DType::kBF16, 4, 4, 128, 16, {1000, 33}, 128},
      {"f16_d64_g4_page32", DType::kF16, 8, 2, 64, 32, {129, 1, 31}, 64},
      {"bf16_d64_g8_page16", DType::kBF16, 8, 1, 64, 16, {127, 1000}, 256},
      {"f16_d128_g8_page64", DType::kF16, 16, 2, 128, 64, {33, 129, 1}, 1 << 20},
  };
  return cases;
}

const std::vector<std::string>& cuda_prefill_policies() {
  static const std::vector<std::string> names = {"dense",          "kascade",   "kascade-noremap", "kascade-pooled",
                                                 "kascade-decode", "streaming", "quest",           "omnikv",
                                                 "lessismore",     "oracle"};
  return names;
}

// Kascade anchors {0, 3} (rotating head maps on the reuse layers), prefill tiles of kTile.
PolicyConfig config_for(const ScheduleCase& c, const std::string& name) {
  PolicyConfig config = backend_policy_config(name, kLayers, {0, 3}, c.num_heads, c.num_kv_heads, c.head_dim);
  config.tile_size = kTile;
  return config;
}

uint64_t label_seed(const std::string& label) {
  uint64_t h = 1469598103934665603ull;
  for (const char ch : label) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// One case's inputs, built once for all its policies: the stack (prompts + decode steps), the calls
// (prefill chunks, then decode steps), and the fp64 references of dense layers (which depend on the
// call and layer only).
struct CaseData {
  std::unique_ptr<LayerStack> stack;
  std::vector<std::unique_ptr<StackCall>> calls;
  std::map<std::pair<size_t, int32_t>, StackReference> dense_refs;  // (call, layer)
};

CaseData build_case(const ScheduleCase& c) {
  CaseData data;
  StackShape shape;
  shape.dtype = c.dtype;
  shape.num_layers = kLayers;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.page_size = c.page_size;
  for (int32_t prompt : c.prompts) shape.lens.push_back(prompt + kDecodeSteps);
  std::mt19937_64 rng(label_seed(c.label));
  data.stack = std::make_unique<LayerStack>(shape, rng);
  const int32_t longest = *std::max_element(c.prompts.begin(), c.prompts.end());
  for (int32_t start = 0; start < longest; start += c.chunk) {
    std::vector<int32_t> seqs, starts, ends;
    for (int32_t b = 0; b < static_cast<int32_t>(c.prompts.size()); ++b) {
      if (c.prompts[b] <= start) continue;  // done: not in this call
      seqs.push_back(b);
      starts.push_back(start);
      ends.push_back(std::min(c.prompts[b], start + c.chunk));
    }
    data.calls.push_back(data.stack->call(ForwardMode::kPrefill, seqs, starts, ends));
  }
  for (int32_t step = 0; step < kDecodeSteps; ++step) {
    std::vector<int32_t> seqs, starts, ends;
    for (int32_t b = 0; b < static_cast<int32_t>(c.prompts.size()); ++b) {
      seqs.push_back(b);
      starts.push_back(c.prompts[b] + step);
      ends.push_back(c.prompts[b] + step + 1);
    }
    data.calls.push_back(data.stack->call(ForwardMode::kDecode, seqs, starts, ends));
  }
  return data;
}

int32_t position_of(const StackCall& call, int32_t row) {
  const int32_t b = call.sequence_of(row);
  return call.starts[b] + (row - call.cu_q_lens[b]);
}

// The head map layer `layer` reads its rows with ([G]; empty: identity).
std::vector<int32_t> layer_map(const PolicyConfig& config, int32_t layer, LayerRole role) {
  if ((config.name == "kascade" || config.name == "kascade-decode") && role == LayerRole::kReuse) {
    const auto begin = config.schedule.head_map.begin() + static_cast<int64_t>(layer) * config.num_kv_heads;
    return std::vector<int32_t>(begin, begin + config.num_kv_heads);
  }
  return {};
}

// The row head h reads: its own (per query head), the single row, or its KV group's through the map.
int32_t row_of_head(const IndexSnapshot& snap, const std::vector<int32_t>& map, int32_t h, int32_t group) {
  if (snap.granularity == IndexGranularity::kPerQueryHead) return h;
  if (snap.num_rows == 1) return 0;
  return map.empty() ? h / group : map[static_cast<size_t>(h / group)];
}

// The keys the GPU attended in this layer.
StackKeys attended_keys(const StackCall& call, const IndexSnapshot& snap, bool dense, std::vector<int32_t> map,
                        int32_t group) {
  if (dense) {
    return [&call](int32_t row, int32_t) {
      std::vector<int32_t> keys(static_cast<size_t>(position_of(call, row)) + 1);
      std::iota(keys.begin(), keys.end(), 0);
      return keys;
    };
  }
  if (call.mode == ForwardMode::kDecode) {
    return [&snap, map, group](int32_t row, int32_t h) {
      const int32_t r = row_of_head(snap, map, h, group);
      return row_entries(snap.indices, snap.row_lens, snap.num_rows, snap.k_max, row, r);
    };
  }
  return [&call, &snap, map, group](int32_t row, int32_t h) {
    const int32_t b = call.sequence_of(row), pos = position_of(call, row);
    const int64_t tile = pos / snap.tile_size;
    const int64_t slot = snap.tile_base[b] + (tile - snap.tile_first[b]);
    const int64_t at = slot * snap.num_rows + row_of_head(snap, map, h, group);
    std::vector<int32_t> keys(snap.indices.begin() + snap.row_offsets[at], snap.indices.begin() + snap.row_offsets[at + 1]);
    if (snap.include_local) {
      for (int64_t j = tile * snap.tile_size; j <= pos; ++j) keys.push_back(static_cast<int32_t>(j));
    }
    return keys;
  };
}

struct RowTally {
  int64_t fresh = 0;      // fresh rows compared
  int64_t differing = 0;  // of which differed from the CPU backend's (accepted as near-ties)
};

bool score_selected(const std::string& name) {
  return name.rfind("kascade", 0) == 0 || name == "omnikv" || name == "oracle";
}

// The keys prefill rows of tile `tile` choose from: j < s_t (Kascade rows, with local keys), or
// j < s_t + tile_size without local keys (the oracle: tile_size 1, its own query's keys j <= i).
int64_t candidate_limit(const IndexSnapshot& rows, int64_t tile) {
  const int64_t s_t = tile * rows.tile_size;
  return rows.include_local ? s_t : s_t + rows.tile_size;
}

// fp64 pooled scores of prefill row r of tile `tile` of call sequence b over its candidates
// (candidate_limit), summed over the call's queries of the tile and the row's heads.
std::vector<float> tile_scores(const LayerStack& stack, int32_t layer, const StackCall& call, int32_t b, int64_t tile,
                               int32_t r, const IndexSnapshot& rows) {
  const int32_t heads = stack.shape().num_heads, per_row = heads / rows.num_rows;
  const int64_t s_t = tile * rows.tile_size, limit = candidate_limit(rows, tile);
  std::vector<double> sum(static_cast<size_t>(limit), 0.0);
  const int64_t first = std::max<int64_t>(s_t, call.starts[b]);
  const int64_t last = std::min<int64_t>(s_t + rows.tile_size, call.kv_lens[b]);
  for (int64_t pos = first; pos < last; ++pos) {
    for (int32_t h = r * per_row; h < (r + 1) * per_row; ++h) {
      const std::vector<double> p = probabilities(stack, layer, call.seqs[b], static_cast<int32_t>(pos), h);
      for (int64_t j = 0; j < std::min<int64_t>(limit, static_cast<int64_t>(p.size())); ++j) sum[j] += p[j];
    }
  }
  return std::vector<float>(sum.begin(), sum.end());
}

// Prefill rows of the GPU vs the CPU backend; returns whether every row is equal as a set.
bool compare_prefill_rows(const LayerStack& stack, int32_t layer, const StackCall& call, const PolicyConfig& config,
                          const IndexSnapshot& gpu, const IndexSnapshot& cpu, bool fresh, RowTally* tally) {
  EXPECT_EQ(gpu.tile_base, cpu.tile_base);
  EXPECT_EQ(gpu.row_offsets, cpu.row_offsets);
  EXPECT_EQ(gpu.tile_first, cpu.tile_first);
  EXPECT_EQ(gpu.num_rows, cpu.num_rows);
  EXPECT_EQ(gpu.include_local, cpu.include_local);
  if (gpu.tile_base != cpu.tile_base || gpu.row_offsets != cpu.row_offsets || gpu.tile_first != cpu.tile_first ||
      gpu.num_rows != cpu.num_rows || gpu.indices.size() != cpu.indices.size()) {
    return false;
  }
  bool all_equal = true;
  for (int32_t b = 0; b < call.batch(); ++b) {
    for (int32_t slot = cpu.tile_base[b]; slot < cpu.tile_base[b + 1]; ++slot) {
      const int64_t tile = cpu.tile_first[b] + (slot - cpu.tile_base[b]);
      for (int32_t r = 0; r < cpu.num_rows; ++r) {
        const int64_t at = int64_t{slot} * cpu.num_rows + r;
        const auto begin = cpu.row_offsets[at], end = cpu.row_offsets[at + 1];
        const std::vector<int32_t> got(gpu.indices.begin() + begin, gpu.indices.begin() + end);
        const std::vector<int32_t> want(cpu.indices.begin() + begin, cpu.indices.begin() + end);
        SCOPED_TRACE("sequence " + std::to_string(call.seqs[b]) + " tile " + std::to_string(tile) + " row " +
                     std::to_string(r) + " (" + std::to_string(end - begin) + " keys)");
        const std::set<int32_t> distinct(got.begin(), got.end());
        EXPECT_EQ(distinct.size(), got.size()) << "duplicate entries";
        const int64_t limit = candidate_limit(cpu, tile);
        EXPECT_TRUE(got.empty() || (*distinct.begin() >= 0 && *distinct.rbegin() < limit))
            << "an entry outside the candidates [0, " << limit << ")";
        const bool same = static_cast<bool>(same_set(got, want));
        all_equal = all_equal && same;
        if (!fresh) continue;
        ++tally->fresh;
        if (config.name == "streaming") {
          EXPECT_TRUE(same_set(got, want)) << "host-built rows must come back exactly";
        } else if (!same) {
          ++tally->differing;
          const std::vector<float> scores = tile_scores(stack, layer, call, b, tile, r, cpu);
          EXPECT_TRUE(topk_sets_equivalent(got, want, scores, 1e-3));
        }
      }
    }
  }
  return all_equal;
}

// Decode rows of the GPU vs the CPU backend; returns whether every row is equal as a set.
bool compare_decode_rows(const LayerStack& stack, int32_t layer, const StackCall& call, const PolicyConfig& config,
                         const IndexSnapshot& gpu, const IndexSnapshot& cpu, bool fresh, RowTally* tally) {
  EXPECT_EQ(gpu.num_rows, cpu.num_rows);
  EXPECT_EQ(gpu.k_max, cpu.k_max);
  if (gpu.num_rows != cpu.num_rows || gpu.k_max != cpu.k_max || gpu.indices.size() != cpu.indices.size()) return false;
  const int32_t heads = stack.shape().num_heads;
  bool all_equal = true;
  for (int32_t b = 0; b < call.batch(); ++b) {
    const int32_t n = call.kv_lens[b];
    for (int32_t r = 0; r < cpu.num_rows; ++r) {
      SCOPED_TRACE("sequence " + std::to_string(call.seqs[b]) + " (n " + std::to_string(n) + ") row " +
                   std::to_string(r));
      EXPECT_TRUE(well_formed_row(gpu.indices, gpu.row_lens, gpu.num_rows, gpu.k_max, b, r, n));
      const auto got = row_entries(gpu.indices, gpu.row_lens, gpu.num_rows, gpu.k_max, b, r);
      const auto want = row_entries(cpu.indices, cpu.row_lens, cpu.num_rows, cpu.k_max, b, r);
      const bool same = static_cast<bool>(same_set(got, want));
      all_equal = all_equal && same;
      if (!fresh) continue;
      ++tally->fresh;
      if (config.name == "quest" || config.name == "streaming") {
        EXPECT_EQ(got, want) << "rows must equal the CPU backend's exactly (both ascending)";
        continue;
      }
      if (same) continue;
      ++tally->differing;
      std::vector<double> probs;  // [H, n]
      for (int32_t h = 0; h < heads; ++h) {
        const std::vector<double> p = probabilities(stack, layer, call.seqs[b], n - 1, h);
        probs.insert(probs.end(), p.begin(), p.end());
      }
      const int64_t k = budget_k(n, config.budget);
      if (config.name == "lessismore") {
        EXPECT_TRUE(lessismore_rows_equivalent(got, want, probs, heads, n, k, config.lessismore_sinks, 1e-4));
      } else if (score_selected(config.name)) {
        const std::vector<float> pooled = pooled_rows(probs, heads, n, cpu.num_rows, config.name == "omnikv");
        const std::vector<float> row(pooled.begin() + int64_t{r} * n, pooled.begin() + int64_t{r + 1} * n);
        EXPECT_EQ(static_cast<int64_t>(got.size()), k);
        EXPECT_TRUE(topk_sets_equivalent(got, want, row, 1e-3));
      } else {
        ADD_FAILURE() << "policy " << config.name << " has no decode row check";
      }
    }
  }
  return all_equal;
}

// One forward call of every layer on both backends, checked layer by layer.
void run_call(CaseData& data, size_t call_index, const PolicyConfig& config, AttentionPolicy& cpu_policy,
              AttentionPolicy& gpu_policy, RowTally* tally) {
  const LayerStack& stack = *data.stack;
  const StackCall& call = *data.calls[call_index];
  const StackShape& s = stack.shape();
  const Status cpu_begun = cpu_policy.begin_forward(call.info());
  ASSERT_TRUE(cpu_begun.ok()) << cpu_begun.to_string();
  const Status gpu_begun = gpu_policy.begin_forward(call.info());
  ASSERT_TRUE(gpu_begun.ok()) << gpu_begun.to_string();
  const size_t rows = static_cast<size_t>(call.total_q) * s.num_heads, out_elems = rows * s.head_dim;
  const std::vector<int64_t> o_shape = {call.total_q, s.num_heads, s.head_dim}, lse_shape = {call.total_q, s.num_heads};
  for (int32_t l = 0; l < kLayers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    AttentionParams params;
    params.scale = stack.scale();
    std::vector<float> cpu_o(out_elems), cpu_lse(rows);
    const Status cpu_status = cpu_policy.attention(l, call.host_q(l), call.host_kv(l), params,
                                                   AttentionOutput{cpu_o.data(), DType::kF32, cpu_lse.data()});
    ASSERT_TRUE(cpu_status.ok()) << cpu_status.to_string();
    DeviceBuffer o(std::max<size_t>(out_elems * dtype_size(s.dtype), 1));  // NaN poison
    DeviceBuffer lse(std::max<size_t>(rows * sizeof(float), 1));
    const Status gpu_status = gpu_policy.attention(l, call.device_q(l), call.device_kv(l), params,
                                                   AttentionOutput{o.data(), s.dtype, lse.as<float>()});
    ASSERT_TRUE(gpu_status.ok()) << gpu_status.to_string();
    std::vector<float> got_o = to_floats(o.download(), s.dtype);
    std::vector<float> got_lse = lse.download_as<float>();
    got_o.resize(out_elems);
    got_lse.resize(rows);
    EXPECT_TRUE(o.guards_intact() && lse.guards_intact()) << "wrote outside its output";

    const LayerRole role = *cpu_policy.role(l, call.mode);
    auto gpu_snap = gpu_policy.snapshot_indices();
    auto cpu_snap = cpu_policy.snapshot_indices();
    ASSERT_TRUE(gpu_snap.ok()) << gpu_snap.status().to_string();
    ASSERT_TRUE(cpu_snap.ok()) << cpu_snap.status().to_string();
    ASSERT_EQ(gpu_snap->valid, cpu_snap->valid);
    const bool dense = role == LayerRole::kDense || role == LayerRole::kDenseAnchor;
    bool rows_equal = true;
    if (cpu_snap->valid) {
      EXPECT_EQ(gpu_snap->producer_layer, cpu_snap->producer_layer);
      const bool fresh = cpu_snap->producer_layer == l || (cpu_snap->producer_layer == -1 && l == 0);
      rows_equal = call.mode == ForwardMode::kPrefill
                       ? compare_prefill_rows(stack, l, call, config, *gpu_snap, *cpu_snap, fresh, tally)
                       : compare_decode_rows(stack, l, call, config, *gpu_snap, *cpu_snap, fresh, tally);
    }

    // GPU output against fp64 over the keys it attended (dense references are shared by policies).
    const StackKeys keys = attended_keys(call, *gpu_snap, dense, layer_map(config, l, role), stack.group());
    const StackReference* ref = nullptr;
    StackReference sparse_ref;
    if (dense) {
      const auto key = std::make_pair(call_index, l);
      auto found = data.dense_refs.find(key);
      if (found == data.dense_refs.end()) {
        found = data.dense_refs.emplace(key, recompute_attention(stack, call, l, keys)).first;
        EXPECT_TRUE(matches_reference(stack, call, found->second, cpu_o, cpu_lse))
            << "the CPU backend's dense output vs the fp64 recomputation (a check of the test's reference)";
      }
      ref = &found->second;
    } else {
      sparse_ref = recompute_attention(stack, call, l, keys);
      ref = &sparse_ref;
    }
    EXPECT_TRUE(matches_reference(stack, call, *ref, got_o, got_lse)) << "GPU output vs fp64 over its keys";
    if (dense || rows_equal) {
      EXPECT_TRUE(all_close(got_o, cpu_o, o_shape, tolerance_for(s.dtype))) << "GPU vs CPU backend output";
      EXPECT_TRUE(all_close(got_lse, cpu_lse, lse_shape, {1e-3, 1e-4})) << "GPU vs CPU backend lse";
    }
  }
}

// The inputs of each case, shared by its tests (one per policy) and freed after the suite.
std::map<size_t, std::unique_ptr<CaseData>>& case_cache() {
  static std::map<size_t, std::unique_ptr<CaseData>> cache;
  return cache;
}

CaseData& case_data(size_t index) {
  auto& cache = case_cache();
  auto found = cache.find(index);
  if (found == cache.end()) {
    found = cache.emplace(index, std::make_unique<CaseData>(build_case(schedule_cases()[index]))).first;
  }
  return *found->second;
}

Result<std::shared_ptr<CudaBackend>> backend_for(const ScheduleCase& c, const LayerStack& stack) {
  CudaBackendOptions options;
  options.max_batch = static_cast<int32_t>(c.prompts.size());
  options.max_seq_len = stack.max_seq_len();
  options.budget = test_budget();
  return CudaBackend::create(options);
}

class CudaBackendPrefillSchedules : public ::testing::TestWithParam<std::tuple<size_t, std::string>> {
 public:
  static void TearDownTestSuite() { case_cache().clear(); }
};

TEST_P(CudaBackendPrefillSchedules, ChunkedPrefillThenDecodeMatchesTheCpuBackend) {
  KC_SKIP_WITHOUT_GPU();
  const auto& [case_index, name] = GetParam();
  const ScheduleCase& c = schedule_cases()[case_index];
  CaseData& data = case_data(case_index);
  auto cuda = backend_for(c, *data.stack);
  ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
  const PolicyConfig config = config_for(c, name);
  auto cpu_policy = make_policy(config, make_cpu_backend());
  ASSERT_TRUE(cpu_policy.ok()) << cpu_policy.status().to_string();
  auto gpu_policy = make_policy(config, std::shared_ptr<AttentionBackend>(*cuda));
  ASSERT_TRUE(gpu_policy.ok()) << gpu_policy.status().to_string();
  RowTally tally;
  int64_t allocations_after_first_decode = -1;
  for (size_t i = 0; i < data.calls.size(); ++i) {
    const StackCall& call = *data.calls[i];
    SCOPED_TRACE(std::string(forward_mode_name(call.mode)) + " call " + std::to_string(i) + " (" +
                 std::to_string(call.batch()) + " sequences, " + std::to_string(call.total_q) + " queries)");
    run_call(data, i, config, **cpu_policy, **gpu_policy, &tally);
    if (HasFatalFailure()) return;
    if (call.mode == ForwardMode::kDecode && allocations_after_first_decode < 0) {
      allocations_after_first_decode = (*cuda)->internal_allocations();
    }
  }
  EXPECT_EQ((*cuda)->internal_allocations(), allocations_after_first_decode)
      << "decode steps after the first allocated device memory";
  const Status errors = (*cuda)->check_device_errors();
  EXPECT_TRUE(errors.ok()) << errors.to_string();
  // fp32 near-ties between the GPU's and the CPU's scores are rare.
  EXPECT_LE(tally.differing, std::max<int64_t>(2, tally.fresh / 100))
      << "fresh rows that differed from the CPU backend's (accepted as near-ties) out of " << tally.fresh;
}

std::string schedule_name(const ::testing::TestParamInfo<std::tuple<size_t, std::string>>& info) {
  std::string label = schedule_cases()[std::get<0>(info.param)].label + "__" + std::get<1>(info.param);
  std::replace(label.begin(), label.end(), '-', '_');
  return label;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, CudaBackendPrefillSchedules,
                         ::testing::Combine(::testing::Values<size_t>(0, 1, 2, 3),
                                            ::testing::ValuesIn(cuda_prefill_policies())),
                         schedule_name);

// ---- the ops one by one ----

struct PrefillOps {
  std::unique_ptr<PrefillProblem> problem;
  std::shared_ptr<CudaBackend> cuda;
};

PrefillOps make_prefill_ops(std::mt19937_64& rng, bool check_every_op = false) {
  PrefillCase pc;
  pc.dtype = DType::kBF16;
  pc.num_heads = 8;
  pc.num_kv_heads = 2;
  pc.head_dim = 64;
  pc.page_size = 16;
  pc.q_lens = {100, 33};
  pc.kv_lens = {300, 33};
  PrefillOps ops;
  ops.problem = std::make_unique<PrefillProblem>(pc, rng);
  CudaBackendOptions options;
  options.max_batch = 2;
  options.max_seq_len = ops.problem->max_kv_len();
  options.budget = test_budget();
  options.check_errors_every_op = check_every_op;
  auto created = CudaBackend::create(options);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (created.ok()) ops.cuda = *created;
  return ops;
}

TEST(CudaBackendPrefillOps, RefusesBadCallsNamingTheProblem) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = rng_for_test();
  PrefillOps ops = make_prefill_ops(rng);
  ASSERT_TRUE(ops.cuda);
  const PrefillProblem& p = *ops.problem;
  AttentionParams params;
  params.scale = p.scale();
  DeviceBuffer o(static_cast<size_t>(p.total_q()) * 8 * 64 * 2);
  const AttentionOutput out{o.data(), DType::kBF16, nullptr};
  PrefillRowsOnDevice rows = plan_rows_on_device({100, 33}, {300, 33}, kTile, 2, test_budget(), true);
  const PrefillIndexRows view = rows.view(true, IndexGranularity::kPerKvGroup);
  const ScorePooling pooling{2, ScoreReduce::kSum};

  PagedKv f16_kv = p.device_kv();
  f16_kv.dtype = DType::kF16;
  EXPECT_TRUE(refused_naming(ops.cuda->dense(p.device_q(), f16_kv, params, out), StatusCode::kInvalidArgument,
                             "dense: kv.dtype is f16 but q.dtype is bf16"));
  QueryBatch f32 = p.device_q();
  f32.dtype = DType::kF32;
  EXPECT_TRUE(refused_naming(ops.cuda->sparse_prefill(f32, p.device_kv(), params, view, nullptr, out),
                             StatusCode::kUnsupported, "dtype is f32"));
  QueryBatch too_many = p.device_q();
  too_many.total_q = 2 * 300 + 1;
  EXPECT_TRUE(refused_naming(ops.cuda->dense(too_many, p.device_kv(), params, out), StatusCode::kInvalidArgument,
                             "q.total_q is 601"));
  QueryBatch no_cu = p.device_q();
  no_cu.cu_q_lens = nullptr;
  EXPECT_TRUE(refused_naming(ops.cuda->select_prefill(no_cu, p.device_kv(), params, pooling, view),
                             StatusCode::kInvalidArgument, "q.cu_q_lens is null"));
  PagedKv narrow = p.device_kv();
  narrow.max_pages_per_seq -= 1;
  EXPECT_TRUE(refused_naming(ops.cuda->anchor_prefill(p.device_q(), narrow, params, pooling, view,
                                                      AnchorOutput::kDense, nullptr, out),
                             StatusCode::kInvalidArgument, "created for max_seq_len"));
  EXPECT_TRUE(refused_naming(ops.cuda->select_prefill(p.device_q(), p.device_kv(), params, {3, ScoreReduce::kSum}, view),
                             StatusCode::kInvalidArgument, "pooling.num_rows is 3"));
  PrefillIndexRows wide_tiles = view;
  wide_tiles.tile_size = 128;  // 128 × group 4 = 512 pooled rows per tile; the kernels take 256
  EXPECT_TRUE(refused_naming(ops.cuda->select_prefill(p.device_q(), p.device_kv(), params, pooling, wide_tiles),
                             StatusCode::kUnsupported, "tile_size × group"));
  PrefillIndexRows bad_batch = view;
  bad_batch.batch = 1;
  EXPECT_TRUE(refused_naming(ops.cuda->sparse_prefill(p.device_q(), p.device_kv(), params, bad_batch, nullptr, out),
                             StatusCode::kInvalidArgument, "rows.batch is 1"));
  PrefillIndexRows one_row = view;
  one_row.num_rows = 1;
  EXPECT_TRUE(refused_naming(ops.cuda->sparse_prefill(p.device_q(), p.device_kv(), params, one_row, nullptr, out),
                             StatusCode::kInvalidArgument, "without a head_map"));
  // Kascade-style rows (tiles of 32 with local keys) are not the oracle's (tile_size 1, per query head).
  EXPECT_TRUE(refused_naming(ops.cuda->select_prefill_oracle(p.device_q(), p.device_kv(), params, view),
                             StatusCode::kInvalidArgument, "rows need tile_size 1"));
  const Status errors = ops.cuda->check_device_errors();
  EXPECT_TRUE(errors.ok()) << "refused calls must not launch anything: " << errors.to_string();
}

TEST(CudaBackendPrefillOps, DeviceErrorsSurfaceAtTheNextHostReadOrAfterEveryOp) {
  KC_SKIP_WITHOUT_GPU();
  for (const bool every_op : {false, true}) {
    SCOPED_TRACE(every_op ? "check_errors_every_op" : "default");
    auto rng = rng_for_test(every_op ? 1 : 0);
    PrefillOps ops = make_prefill_ops(rng, every_op);
    ASSERT_TRUE(ops.cuda);
    const PrefillProblem& p = *ops.problem;
    AttentionParams params;
    params.scale = p.scale();
    DeviceBuffer o(static_cast<size_t>(p.total_q()) * 8 * 64 * 2);
    const AttentionOutput out{o.data(), DType::kBF16, nullptr};
    // kv_len 400 > max_seq_len 300 on the device: flagged, the sequence skipped.
    DeviceBuffer lens = upload_vector(std::vector<int32_t>{400, 33});
    PagedKv kv = p.device_kv();
    kv.kv_lens = lens.as<int32_t>();
    const Status ran = ops.cuda->dense(p.device_q(), kv, params, out);
    std::vector<uint8_t> host(o.bytes());
    const Status read = ops.cuda->copy_to_host(host.data(), o.data(), host.size());
    EXPECT_TRUE(refused_naming(every_op ? ran : read, StatusCode::kOutOfRange, "kv_len out of range"));
    if (every_op) {
      EXPECT_TRUE(read.ok()) << "the error word was cleared when the op reported it";
    }
    EXPECT_TRUE(ops.cuda->check_device_errors().ok()) << "a reported error is cleared";

    // tile_base that gives sequence 0 fewer tiles than its call touches.
    PrefillRowsOnDevice rows = plan_rows_on_device({100, 33}, {300, 33}, kTile, 2, test_budget(), true);
    std::vector<int32_t> bad_base = rows.plan.tile_base;
    bad_base[1] -= 1;
    DeviceBuffer bad_base_d = upload_vector(bad_base);
    PrefillIndexRows view = rows.view(true, IndexGranularity::kPerKvGroup);
    view.tile_base = bad_base_d.as<int32_t>();
    const Status selected = ops.cuda->select_prefill(p.device_q(), p.device_kv(), params, {2, ScoreReduce::kSum}, view);
    const Status check = ops.cuda->check_device_errors();
    EXPECT_TRUE(refused_naming(every_op ? selected : check, StatusCode::kOutOfRange, "tile_base inconsistent"));
  }
}

TEST(CudaBackendPrefillOps, AllocatesOnlyForALargerPlanAndKeepsErrorsAcrossAGrowth) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = rng_for_test();
  PrefillOps ops = make_prefill_ops(rng);
  ASSERT_TRUE(ops.cuda);
  const PrefillProblem& p = *ops.problem;  // total_q 133: plans for 256 queries
  AttentionParams params;
  params.scale = p.scale();
  DeviceBuffer o(static_cast<size_t>(p.total_q()) * 8 * 64 * 2);
  const AttentionOutput out{o.data(), DType::kBF16, nullptr};
  const int64_t at_start = ops.cuda->internal_allocations();
  KC_ASSERT_OK(ops.cuda->dense(p.device_q(), p.device_kv(), params, out));
  const int64_t after_first = ops.cuda->internal_allocations();
  EXPECT_EQ(after_first, at_start + 1) << "the first prefill allocates the workspace";
  KC_ASSERT_OK(ops.cuda->dense(p.device_q(), p.device_kv(), params, out));
  // A smaller call (positions 200..219 of sequence 0: another plan) fits the workspace.
  PrefillProblem::Chunk small = p.chunk(200, 220);
  KC_ASSERT_OK(ops.cuda->dense(small.q, small.kv, params, out));
  EXPECT_EQ(ops.cuda->internal_allocations(), after_first) << "a call whose plan fits allocated";

  // A device error, then a selecting call whose plan needs a larger workspace: the bit survives
  // the replacement of the workspace that holds it.
  DeviceBuffer lens = upload_vector(std::vector<int32_t>{3000, 33});
  PagedKv bad = p.device_kv();
  bad.kv_lens = lens.as<int32_t>();
  KC_ASSERT_OK(ops.cuda->dense(p.device_q(), bad, params, out));
  PrefillRowsOnDevice rows = plan_rows_on_device({100, 33}, {300, 33}, kTile, 2, test_budget(), true);
  KC_ASSERT_OK(ops.cuda->select_prefill(p.device_q(), p.device_kv(), params, {2, ScoreReduce::kSum},
                                        rows.view(true, IndexGranularity::kPerKvGroup)));
  EXPECT_EQ(ops.cuda->internal_allocations(), after_first + 1) << "the selection plan needs a larger workspace";
  EXPECT_TRUE(refused_naming(ops.cuda->check_device_errors(), StatusCode::kOutOfRange, "kv_len out of range"));
  EXPECT_TRUE(ops.cuda->check_device_errors().ok());
  const int64_t grown = ops.cuda->internal_allocations();
  KC_ASSERT_OK(ops.cuda->select_prefill(p.device_q(), p.device_kv(), params, {2, ScoreReduce::kSum},
                                        rows.view(true, IndexGranularity::kPerKvGroup)));
  KC_ASSERT_OK(ops.cuda->dense(p.device_q(), p.device_kv(), params, out));
  EXPECT_EQ(ops.cuda->internal_allocations(), grown);
  EXPECT_TRUE(ops.cuda->check_device_errors().ok());
}

}  // namespace
}  // namespace kascade::testing
