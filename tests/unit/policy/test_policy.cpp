// test_policy.cpp — the attention policies end to end on the CPU backend (src/policy):
//   - every policy's rows are duplicate-free sets in range (prefill: j < s_t, oracle: j <= i) of
//     the planned lengths, and every layer's output equals an fp64 softmax restricted to the keys
//     the spec says it attends (rows through the head map ∪ local keys; dense layers all keys);
//   - a saturating budget (rho = 1, or k_min >= n) makes every sparse policy equal dense;
//   - a reuse layer with the identity map and its anchor's q/K/V equals the anchor's output;
//   - head remapping: reuse group g reads anchor row map[l][g] (sparse ref called on the rows);
//   - kascade, kascade-noremap, kascade-pooled and the decode oracle equal references composed
//     from src/ref ops in the test (compose_ref.h); the prefill oracle's rows equal each query
//     head's fp64 top-k (tie-aware);
//   - rolling chunked prefill in multiples of T equals one-shot; an unaligned chunk pools only
//     its own queries; kascade-decode is dense in prefill and kascade in decode;
//   - the decode row width each policy plans (planned_decode_row_width) is the bucket of its widest row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "compose_ref.h"
#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "policy_fixture.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

const std::vector<int32_t> kLens = {1, 31, 32, 33, 100, 129};

// Anchors {0, 2}; a head map for N = 6, G = 2 with remapped and crossed reuse rows.
Schedule test_schedule() {
  Schedule s;
  s.anchors = {0, 2};
  s.head_map = {0, 1,   // 0 anchor
                1, 0,   // 1
                0, 1,   // 2 anchor
                1, 1,   // 3
                0, 0,   // 4
                1, 0};  // 5
  return s;
}

// Anchors {0, 2} for any N and G: reuse layer l, group g reads anchor row (g + l) % G.
Schedule rotating_schedule(int32_t num_layers, int32_t num_kv_heads) {
  Schedule s;
  s.anchors = {0, 2};
  for (int32_t l = 0; l < num_layers; ++l) {
    for (int32_t g = 0; g < num_kv_heads; ++g) s.head_map.push_back(l == 0 || l == 2 ? g : (g + l) % num_kv_heads);
  }
  return s;
}

ProblemShape six_layers() {
  ProblemShape shape;
  shape.num_layers = 6;
  return shape;
}

std::unique_ptr<AttentionPolicy> make(const PolicyConfig& config) {
  auto policy = make_policy(config, make_cpu_backend());
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return policy.ok() ? std::move(policy).value() : nullptr;
}

PolicyConfig configured(const Problem& problem, const std::string& name) {
  PolicyConfig config = config_for(problem, name);
  config.schedule = test_schedule();
  config.quest_page_size = 4;
  return config;
}

// The row that head h reads at a sparse layer, as DESIGN.md §2.4 describes each policy.
int32_t row_read(const PolicyConfig& c, int32_t layer, LayerRole role, int32_t h) {
  const int32_t g = h / (c.num_heads / c.num_kv_heads);
  const std::string& name = c.name;
  if (name == "oracle" || name == "quest") return h;
  if (name == "kascade-pooled" || name == "omnikv" || name == "lessismore" || name == "streaming") return 0;
  if ((name == "kascade" || name == "kascade-decode") && role == LayerRole::kReuse) {
    return c.schedule.head_map[static_cast<size_t>(layer) * c.num_kv_heads + g];
  }
  return g;
}

::testing::AssertionResult is_set_in(const std::vector<int32_t>& row, int64_t lo, int64_t hi) {
  std::set<int32_t> seen;
  for (int32_t j : row) {
    if (j < lo || j >= hi) return ::testing::AssertionFailure() << "entry " << j << " outside [" << lo << ", " << hi << ")";
    if (!seen.insert(j).second) return ::testing::AssertionFailure() << "duplicate entry " << j;
  }
  return ::testing::AssertionSuccess();
}

// The most keys a decode row of a sequence of n keys may hold (DESIGN.md §2.4): k(n), up to
// k + page - 1 for Quest's whole pages, k + sinks for LessIsMore (never more than n).
int64_t decode_row_capacity(const PolicyConfig& c, int64_t n) {
  const int64_t k = budget_k(n, c.budget);
  if (c.name == "quest") return std::min<int64_t>(n, k + c.quest_page_size - 1);
  if (c.name == "lessismore") return std::min<int64_t>(n, k + c.lessismore_sinks);
  return k;
}

// Checks every row of a snapshot: sets in range with the planned lengths.
void check_rows(const PolicyConfig& c, const Call& call, const IndexSnapshot& snap, const std::string& where) {
  if (call.mode == ForwardMode::kDecode) {
    for (int32_t b = 0; b < call.batch(); ++b) {
      const int64_t n = call.kv_lens[b];
      const int64_t k = budget_k(n, c.budget);
      const int64_t cap = decode_row_capacity(c, n);
      for (int32_t r = 0; r < snap.num_rows; ++r) {
        const std::vector<int32_t> row = decode_row(snap, b, r);
        EXPECT_TRUE(is_set_in(row, 0, n)) << where << " b " << b << " row " << r;
        EXPECT_GE(static_cast<int64_t>(row.size()), k) << where << " b " << b << " row " << r;
        EXPECT_LE(static_cast<int64_t>(row.size()), cap) << where << " b " << b << " row " << r;
      }
    }
    return;
  }
  for (int32_t b = 0; b < call.batch(); ++b) {
    const int64_t n = call.kv_lens[b];
    for (int64_t p = call.starts[b]; p < n; ++p) {
      if (c.name == "oracle") {
        for (int32_t h = 0; h < c.num_heads; ++h) {
          const std::vector<int32_t> row = prefill_row(snap, b, p, h);
          EXPECT_TRUE(is_set_in(row, 0, p + 1)) << where << " b " << b << " position " << p << " head " << h;
          EXPECT_EQ(static_cast<int64_t>(row.size()), budget_k(p + 1, c.budget)) << where << " position " << p;
        }
        continue;
      }
      const int64_t tile = p / c.tile_size;
      const int64_t s_t = tile * c.tile_size;
      for (int32_t r = 0; r < snap.num_rows; ++r) {
        const std::vector<int32_t> row = prefill_row(snap, b, tile, r);
        EXPECT_TRUE(is_set_in(row, 0, s_t)) << where << " b " << b << " tile " << tile << " row " << r;
        EXPECT_EQ(static_cast<int64_t>(row.size()), tile_budget(s_t, n, c.budget, c.rolling)) << where << " tile " << tile;
      }
    }
  }
}

// The keys (b, position p, head h) attends at a sparse layer, from the snapshot.
std::vector<int32_t> keys_of(const PolicyConfig& c, const Call& call, const IndexSnapshot& snap, int32_t layer,
                             LayerRole role, int32_t b, int64_t p, int32_t h) {
  const int32_t r = row_read(c, layer, role, h);
  if (call.mode == ForwardMode::kDecode) return decode_row(snap, b, r);
  if (c.name == "oracle") return prefill_row(snap, b, p, r);
  const int64_t tile = p / c.tile_size;
  std::vector<int32_t> keys = prefill_row(snap, b, tile, r);
  for (int64_t j = tile * c.tile_size; j <= p; ++j) keys.push_back(static_cast<int32_t>(j));
  return keys;
}

// Every layer's o and lse against the fp64 softmax restricted to the keys it should attend.
void check_outputs(AttentionPolicy& policy, const Problem& problem, const Call& call, const RunResult& run) {
  const PolicyConfig& c = policy.config();
  const int32_t heads = c.num_heads, d = c.head_dim;
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerRole role = *policy.role(l, call.mode);
    const bool dense = role == LayerRole::kDense || role == LayerRole::kDenseAnchor;
    const IndexSnapshot& snap = run.rows[static_cast<size_t>(l)];
    if (role == LayerRole::kAnchor || role == LayerRole::kDenseAnchor) {
      EXPECT_TRUE(snap.valid && snap.producer_layer == l) << c.name << " layer " << l << " did not select";
    }
    if (!dense) {
      ASSERT_TRUE(snap.valid) << c.name << " layer " << l << " attends rows but none exist";
      check_rows(c, call, snap, c.name + " " + forward_mode_name(call.mode) + " layer " + std::to_string(l));
    }
    std::vector<float> got_o, got_lse;
    std::vector<double> ref_o, ref_lse;
    for (int32_t b = 0; b < call.batch(); ++b) {
      for (int32_t i = 0; i < call.q_lens[b]; ++i) {
        const int64_t p = call.starts[b] + i;
        const int64_t row = call.cu_q_lens[b] + i;
        for (int32_t h = 0; h < heads; ++h) {
          std::vector<int32_t> keys;
          if (dense) {
            for (int32_t j = 0; j <= p; ++j) keys.push_back(j);
          } else {
            keys = keys_of(c, call, snap, l, role, b, p, h);
          }
          std::vector<double> o;
          double lse = 0.0;
          restricted_attention_fp64(problem, l, b, static_cast<int32_t>(p), h, keys, &o, &lse);
          ref_o.insert(ref_o.end(), o.begin(), o.end());
          ref_lse.push_back(lse);
          const float* got = run.o[static_cast<size_t>(l)].data() + (row * heads + h) * d;
          got_o.insert(got_o.end(), got, got + d);
          got_lse.push_back(run.lse[static_cast<size_t>(l)][static_cast<size_t>(row * heads + h)]);
        }
      }
    }
    const std::vector<float> ref_o32(ref_o.begin(), ref_o.end());
    const std::vector<float> ref_lse32(ref_lse.begin(), ref_lse.end());
    const CompareOptions tol{2e-5, 1e-4};
    EXPECT_TRUE(all_close(got_o, ref_o32, {call.total_q, heads, d}, tol)) << c.name << " layer " << l << " o";
    EXPECT_TRUE(all_close(got_lse, ref_lse32, {call.total_q, heads}, tol)) << c.name << " layer " << l << " lse";
  }
}

void expect_same_outputs(const RunResult& got, const RunResult& ref, const std::string& what, double tol = 1e-6,
                         int32_t first_layer = 0) {
  ASSERT_EQ(got.o.size(), ref.o.size());
  for (size_t l = static_cast<size_t>(first_layer); l < got.o.size(); ++l) {
    EXPECT_TRUE(all_close(got.o[l], ref.o[l], {static_cast<int64_t>(got.o[l].size())}, {tol, tol}))
        << what << " layer " << l << " o";
    EXPECT_TRUE(all_close(got.lse[l], ref.lse[l], {static_cast<int64_t>(got.lse[l].size())}, {tol, tol}))
        << what << " layer " << l << " lse";
  }
}

TEST(PolicyRows, EveryPolicyAttendsDuplicateFreeRowsInRange) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (const std::string& name : policy_names()) {
    for (const Call& call : {problem.prefill_all(), problem.decode_last()}) {
      SCOPED_TRACE(name + " " + forward_mode_name(call.mode));
      auto policy = make(configured(problem, name));
      ASSERT_NE(policy, nullptr);
      RunResult run;
      ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
      check_outputs(*policy, problem, call, run);
    }
  }
}

// A decode call of one query per sequence with these key counts (no layer runs).
Status begin_decode(AttentionPolicy& policy, const std::vector<int32_t>& kv_lens) {
  const std::vector<int32_t> q_lens(kv_lens.size(), 1);
  ForwardInfo info;
  info.mode = ForwardMode::kDecode;
  info.batch = static_cast<int32_t>(kv_lens.size());
  info.q_lens = q_lens.data();
  info.kv_lens = kv_lens.data();
  return policy.begin_forward(info);
}

// The row stride a decode call plans (what a captured CUDA graph bakes in): the bucket
// (decode_row_width: 16, 24, 32, 48, 64, 96, ...) of the widest row of the call — k(n), or up to
// k + page - 1 for Quest's whole pages, k + sinks for LessIsMore — and 0 without rows.
TEST(PolicyRows, PlannedDecodeRowWidthIsTheBucketOfTheWidestRow) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  const std::vector<std::vector<int32_t>> calls = {{1537, 30}, {30, 5000}, {30}, {1920}, {1921}, {3, 7}};
  for (const std::string& name : policy_names()) {
    SCOPED_TRACE(name);
    PolicyConfig config = configured(problem, name);
    config.budget.rho_ppm = 100000;  // k(n) = min(n, max(64, ceil(n / 10))): 1537 -> 154, 5000 -> 500
    config.budget.k_min = 64;
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    EXPECT_EQ(policy->planned_decode_row_width(), 0) << "before any call";
    for (const std::vector<int32_t>& kv_lens : calls) {
      KC_ASSERT_OK(begin_decode(*policy, kv_lens));
      int64_t widest = 1;
      for (int32_t n : kv_lens) widest = std::max(widest, decode_row_capacity(config, n));
      const int64_t expected = name == "dense" ? 0 : decode_row_width(widest);
      EXPECT_EQ(policy->planned_decode_row_width(), expected) << "kv_lens[0] " << kv_lens[0];
    }
    if (name == "kascade") {  // the buckets, written out: decoding 1537 -> 1920 keys keeps one width
      const std::vector<std::pair<std::vector<int32_t>, int64_t>> widths = {
          {{1537, 30}, 192}, {{30, 5000}, 512}, {{30}, 32}, {{1920}, 192}, {{1921}, 256}};
      for (const auto& [kv_lens, width] : widths) {
        KC_ASSERT_OK(begin_decode(*policy, kv_lens));
        EXPECT_EQ(policy->planned_decode_row_width(), width) << "kv_lens[0] " << kv_lens[0];
      }
    }
    const Call prefill = problem.prefill_all();
    KC_ASSERT_OK(policy->begin_forward(prefill.info()));
    EXPECT_EQ(policy->planned_decode_row_width(), 0) << "prefill";
  }
}

TEST(PolicyRows, OtherShapesHeadDimsAndPageSizes) {
  struct Shape {
    int32_t kv_heads, head_dim, page_size;
  };
  for (const Shape shape : {Shape{4, 64, 8}, Shape{1, 16, 32}, Shape{8, 16, 1}}) {
    auto rng = rng_for_test(static_cast<uint64_t>(shape.kv_heads));
    ProblemShape ps = six_layers();
    ps.num_kv_heads = shape.kv_heads;
    ps.head_dim = shape.head_dim;
    ps.page_size = shape.page_size;
    const Problem problem(rng, ps, {1, 33, 70});
    for (const std::string& name : policy_names()) {
      for (const Call& call : {problem.call(ForwardMode::kPrefill, {0, 10, 40}, {1, 33, 70}), problem.decode_last()}) {
        SCOPED_TRACE(name + " " + forward_mode_name(call.mode) + " G " + std::to_string(shape.kv_heads) + " d " +
                     std::to_string(shape.head_dim));
        PolicyConfig config = configured(problem, name);
        config.schedule = rotating_schedule(6, shape.kv_heads);
        auto policy = make(config);
        ASSERT_NE(policy, nullptr);
        RunResult run;
        ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
        check_outputs(*policy, problem, call, run);
      }
    }
  }
}

TEST(PolicyRows, NonRollingPrefillRowsUseTheCallBudget) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), {129, 70});
  for (const std::string name : {"kascade", "streaming"}) {
    SCOPED_TRACE(name);
    PolicyConfig config = configured(problem, name);
    config.rolling = false;
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    const Call call = problem.prefill_all();
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
    check_outputs(*policy, problem, call, run);  // check_rows expects tile_budget(..., rolling = false)
  }
}

TEST(PolicySaturation, SaturatingBudgetMakesEverySparsePolicyDense) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (int variant = 0; variant < 2; ++variant) {
    Budget budget;
    if (variant == 0) {
      budget.rho_ppm = 1000000;  // rho = 1
      budget.k_min = 0;
    } else {
      budget.rho_ppm = 100000;
      budget.k_min = 1000;  // k_min >= n
    }
    for (const Call& call : {problem.prefill_all(), problem.decode_last()}) {
      PolicyConfig dense_config = configured(problem, "dense");
      dense_config.budget = budget;
      RunResult dense;
      auto dense_policy = make(dense_config);
      ASSERT_NE(dense_policy, nullptr);
      ASSERT_TRUE(run_policy(*dense_policy, problem, call, false, &dense));
      for (const std::string& name : policy_names()) {
        SCOPED_TRACE(name + " " + forward_mode_name(call.mode) + (variant ? " k_min" : " rho"));
        PolicyConfig config = configured(problem, name);
        config.budget = budget;
        auto policy = make(config);
        ASSERT_NE(policy, nullptr);
        RunResult run;
        ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
        expect_same_outputs(run, dense, name, 1e-5);
      }
    }
  }
}

TEST(KascadePolicy, ReuseWithIdentityMapEqualsItsAnchor) {
  auto rng = rng_for_test();
  Problem problem(rng, six_layers(), kLens);
  problem.copy_layer(2, 1);  // layer 2 reuses anchor 1 over identical q, K, V
  PolicyConfig config = configured(problem, "kascade-noremap");
  config.schedule = *identity_schedule({0, 1, 3}, 6, 2);
  for (const Call& call : {problem.prefill_all(), problem.decode_last()}) {
    SCOPED_TRACE(forward_mode_name(call.mode));
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    ASSERT_EQ(*policy->role(1, call.mode), LayerRole::kAnchor);
    ASSERT_EQ(*policy->role(2, call.mode), LayerRole::kReuse);
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
    EXPECT_EQ(run.o[2], run.o[1]);
    EXPECT_EQ(run.lse[2], run.lse[1]);
    // Sanity: layer 1 is sparse, so it differs from dense attention over the same inputs.
    auto dense = make(configured(problem, "dense"));
    RunResult dense_run;
    ASSERT_TRUE(run_policy(*dense, problem, call, false, &dense_run));
    EXPECT_NE(run.o[1], dense_run.o[1]);
  }
}

TEST(KascadePolicy, ReuseGroupReadsTheAnchorRowOfItsHeadMap) {
  auto rng = rng_for_test();
  ProblemShape shape;
  shape.num_layers = 5;
  shape.num_kv_heads = 4;  // H = 8, g = 2
  const Problem problem(rng, shape, kLens);
  PolicyConfig config = config_for(problem, "kascade");
  config.schedule.anchors = {0, 2};
  config.schedule.head_map = {0, 1, 2, 3,  //
                              3, 3, 0, 1,  // layer 1 reads anchor 0
                              0, 1, 2, 3,  //
                              2, 0, 0, 3,  // layer 3 reads anchor 2
                              1, 1, 1, 1};
  AttentionParams params;
  params.scale = problem.scale();
  for (const Call& call : {problem.prefill_all(), problem.decode_last()}) {
    SCOPED_TRACE(forward_mode_name(call.mode));
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
    for (int32_t layer : {1, 3, 4}) {
      const IndexSnapshot& snap = run.rows[static_cast<size_t>(layer)];
      ASSERT_TRUE(snap.valid);
      EXPECT_EQ(snap.producer_layer, layer < 2 ? 0 : 2);
      const int32_t* map = config.schedule.head_map.data() + layer * 4;
      const std::vector<int32_t> identity = {0, 1, 2, 3};
      std::vector<float> o_map(run.o[static_cast<size_t>(layer)].size()), o_identity(o_map.size());
      std::vector<int32_t> indices = snap.indices, lens = snap.row_lens;
      std::vector<int64_t> offsets = snap.row_offsets;
      std::vector<int32_t> tile_base = snap.tile_base;
      for (auto* pair : {&o_map, &o_identity}) {
        AttentionOutput out;
        out.o = pair->data();
        const int32_t* use = pair == &o_map ? map : identity.data();
        Status status;
        if (call.mode == ForwardMode::kDecode) {
          DecodeIndexRows rows;
          rows.indices = indices.data();
          rows.row_lens = lens.data();
          rows.batch = call.batch();
          rows.num_rows = snap.num_rows;
          rows.k_max = snap.k_max;
          status = ref::sparse_decode_ref(problem.queries(call, layer), problem.kv(call, layer), params, rows, use, out);
        } else {
          PrefillIndexRows rows;
          rows.indices = indices.data();
          rows.row_offsets = offsets.data();
          rows.tile_base = tile_base.data();
          rows.batch = call.batch();
          rows.num_rows = snap.num_rows;
          rows.tile_size = snap.tile_size;
          status = ref::sparse_prefill_ref(problem.queries(call, layer), problem.kv(call, layer), params, rows, use, out);
        }
        ASSERT_TRUE(status.ok()) << status.to_string();
      }
      // The policy's backend runs the fast kernels; o_map comes from src/ref over the same rows.
      EXPECT_TRUE(all_close(run.o[static_cast<size_t>(layer)], o_map, {static_cast<int64_t>(o_map.size())}, {1e-5, 1e-4}))
          << "layer " << layer;
      EXPECT_NE(o_map, o_identity) << "layer " << layer << ": the map must matter for this test to mean anything";
    }
  }
}

TEST(KascadePolicy, DecodeMatchesReferenceComposedFromRefOps) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  const Call call = problem.decode_last();
  for (const std::string name : {"kascade", "kascade-noremap", "kascade-pooled", "kascade-decode"}) {
    SCOPED_TRACE(name);
    const PolicyConfig config = configured(problem, name);
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
    expect_same_outputs(run, compose_kascade(problem, call, config), name);
  }
}

TEST(KascadePolicy, PrefillMatchesReferenceComposedFromRefOps) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (const Call& call : {problem.prefill_all(), problem.call(ForwardMode::kPrefill, {0, 5, 31, 32, 64, 100},
                                                                   {1, 31, 32, 33, 100, 129})}) {
    for (const std::string name : {"kascade", "kascade-noremap", "kascade-pooled"}) {
      SCOPED_TRACE(name);
      const PolicyConfig config = configured(problem, name);
      auto policy = make(config);
      ASSERT_NE(policy, nullptr);
      RunResult run;
      ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
      expect_same_outputs(run, compose_kascade(problem, call, config), name);
    }
  }
}

TEST(KascadePolicy, KascadeDecodeIsDenseInPrefill) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  const Call call = problem.prefill_all();
  auto policy = make(configured(problem, "kascade-decode"));
  auto dense = make(configured(problem, "dense"));
  RunResult run, dense_run;
  ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
  ASSERT_TRUE(run_policy(*dense, problem, call, false, &dense_run));
  expect_same_outputs(run, dense_run, "kascade-decode prefill", 0.0);
  for (int32_t l = 0; l < 6; ++l) EXPECT_EQ(*policy->role(l, ForwardMode::kPrefill), LayerRole::kDense);
}

// Runs one policy over consecutive chunks [bounds[c], bounds[c+1]) of every sequence and stitches
// the per-layer outputs back into one-shot order.
RunResult run_chunked(AttentionPolicy& policy, const Problem& problem, const std::vector<std::vector<int32_t>>& bounds) {
  const ProblemShape& s = problem.shape();
  const Call whole = problem.prefill_all();
  RunResult stitched;
  stitched.o.assign(static_cast<size_t>(s.num_layers),
                    std::vector<float>(static_cast<size_t>(whole.total_q) * s.num_heads * s.head_dim));
  stitched.lse.assign(static_cast<size_t>(s.num_layers), std::vector<float>(static_cast<size_t>(whole.total_q) * s.num_heads));
  for (size_t c = 0; c + 1 < bounds.size(); ++c) {
    const Call chunk = problem.call(ForwardMode::kPrefill, bounds[c], bounds[c + 1]);
    RunResult run;
    if (!run_policy(policy, problem, chunk, false, &run)) return stitched;
    for (int32_t l = 0; l < s.num_layers; ++l) {
      for (int32_t b = 0; b < chunk.batch(); ++b) {
        for (int32_t i = 0; i < chunk.q_lens[b]; ++i) {
          const int64_t from = chunk.cu_q_lens[b] + i;
          const int64_t to = whole.cu_q_lens[b] + chunk.starts[b] + i;
          std::copy_n(run.o[l].data() + from * s.num_heads * s.head_dim, s.num_heads * s.head_dim,
                      stitched.o[l].data() + to * s.num_heads * s.head_dim);
          std::copy_n(run.lse[l].data() + from * s.num_heads, s.num_heads, stitched.lse[l].data() + to * s.num_heads);
        }
      }
    }
  }
  return stitched;
}

TEST(KascadePolicy, RollingChunkedPrefillInTileMultiplesEqualsOneShot) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), {129, 100, 96});
  for (const std::string name : {"kascade", "kascade-pooled", "streaming"}) {
    SCOPED_TRACE(name);
    auto policy = make(configured(problem, name));
    ASSERT_NE(policy, nullptr);
    RunResult one_shot;
    ASSERT_TRUE(run_policy(*policy, problem, problem.prefill_all(), false, &one_shot));
    // Chunk boundaries at multiples of T = 32 (the last chunk ends at each sequence's length).
    const RunResult chunked = run_chunked(*policy, problem, {{0, 0, 0}, {32, 32, 32}, {96, 64, 64}, {129, 100, 96}});
    expect_same_outputs(chunked, one_shot, name);
  }
}

TEST(KascadePolicy, UnalignedChunkPoolsSelectsAndAttendsOverItsOwnQueries) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), {129, 100});
  const PolicyConfig config = configured(problem, "kascade");
  auto policy = make(config);
  ASSERT_NE(policy, nullptr);
  RunResult first, second;
  ASSERT_TRUE(run_policy(*policy, problem, problem.call(ForwardMode::kPrefill, {0, 0}, {40, 45}), false, &first));
  const Call tail = problem.call(ForwardMode::kPrefill, {40, 45}, {129, 100});
  ASSERT_TRUE(run_policy(*policy, problem, tail, true, &second));
  // The split tile 1 (positions 32..63) is pooled over the second call's queries only: the
  // reference composed over exactly this call's queries must match.
  expect_same_outputs(second, compose_kascade(problem, tail, config), "second chunk");
  const Call tail_first = problem.call(ForwardMode::kPrefill, {0, 0}, {40, 45});
  expect_same_outputs(first, compose_kascade(problem, tail_first, config), "first chunk");
}

TEST(OraclePolicy, DecodeMatchesReferenceComposedFromRefOps) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  const Call call = problem.decode_last();
  const PolicyConfig config = configured(problem, "oracle");
  auto policy = make(config);
  ASSERT_NE(policy, nullptr);
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, call, false, &run));
  expect_same_outputs(run, compose_oracle_decode(problem, call, config), "oracle decode");
}

TEST(OraclePolicy, PrefillRowsAreEachQueryHeadsOwnTopK) {
  auto rng = rng_for_test();
  ProblemShape shape = six_layers();
  shape.num_layers = 2;
  const Problem problem(rng, shape, {100, 33});
  const PolicyConfig config = configured(problem, "oracle");
  auto policy = make(config);
  ASSERT_NE(policy, nullptr);
  const Call call = problem.prefill_all();
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
  const IndexSnapshot& snap = run.rows[1];
  ASSERT_TRUE(snap.valid);
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  for (int32_t b = 0; b < call.batch(); ++b) {
    for (int32_t p = 0; p < call.kv_lens[b]; ++p) {
      for (int32_t h = 0; h < shape.num_heads; ++h) {
        // fp64 post-softmax weights of this query head over j <= p.
        std::vector<double> logits;
        for (int32_t j = 0; j <= p; ++j) {
          double dot = 0.0;
          const float* q = problem.q_at(1, b, p, h);
          const float* k = problem.k_at(1, b, j, h / group);
          for (int32_t c = 0; c < shape.head_dim; ++c) dot += static_cast<double>(q[c]) * k[c];
          logits.push_back(dot * problem.scale());
        }
        const double m = *std::max_element(logits.begin(), logits.end());
        double sum = 0.0;
        for (double x : logits) sum += std::exp(x - m);
        std::vector<float> p_h;
        for (double x : logits) p_h.push_back(static_cast<float>(std::exp(x - m) / sum));
        std::vector<int32_t> order(p_h.size());
        for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int32_t>(j);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return p_h[a] > p_h[c]; });
        order.resize(static_cast<size_t>(budget_k(p + 1, config.budget)));
        EXPECT_TRUE(topk_sets_equivalent(prefill_row(snap, b, p, h), order, p_h, 1e-4))
            << "b " << b << " position " << p << " head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace kascade::testing
