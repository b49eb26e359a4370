// test_baselines.cpp — the baselines' rows (DESIGN.md §2.4) against independent reimplementations
// written here:
//   - streaming: the closed form {0..s-1} ∪ [end - (k - s), end), s = min(4, k), per tile / step;
//   - quest: a brute-force page scorer over the problem's own K (min/max per channel, fp64 score,
//     pages by score then index, whole pages until >= k keys);
//   - omnikv: max over heads of p, full sort, first k;
//   - lessismore: sinks ∪ recent ceil(k/4), then full per-head rankings merged rank by rank.
// p comes from ref::pooled_scores_decode_ref with one row per head (tested in src/ref), so the
// comparison of the selection logic is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "policy_fixture.h"
#include "ref/scores_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

const std::vector<int32_t> kLens = {1, 5, 31, 32, 33, 100, 129};

std::unique_ptr<AttentionPolicy> make(const PolicyConfig& config) {
  auto policy = make_policy(config, make_cpu_backend());
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return policy.ok() ? std::move(policy).value() : nullptr;
}

ProblemShape six_layers() {
  ProblemShape shape;
  shape.num_layers = 6;
  return shape;
}

std::vector<int32_t> sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// p_h[j] of the decode query of every sequence: [batch][H][n].
std::vector<std::vector<std::vector<float>>> per_head_p(const Problem& problem, const Call& call, int32_t layer) {
  const int32_t heads = problem.shape().num_heads;
  const int32_t stride = *std::max_element(call.kv_lens.begin(), call.kv_lens.end());
  std::vector<float> scores(static_cast<size_t>(call.batch()) * heads * stride);
  AttentionParams params;
  params.scale = problem.scale();
  ref::PoolingSpec spec;
  spec.num_rows = heads;
  EXPECT_TRUE(ref::pooled_scores_decode_ref(problem.queries(call, layer), problem.kv(call, layer), params, spec,
                                            scores.data(), stride)
                  .ok());
  std::vector<std::vector<std::vector<float>>> p(static_cast<size_t>(call.batch()));
  for (int32_t b = 0; b < call.batch(); ++b) {
    for (int32_t h = 0; h < heads; ++h) {
      const float* row = scores.data() + (static_cast<size_t>(b) * heads + h) * stride;
      p[b].emplace_back(row, row + call.kv_lens[b]);
    }
  }
  return p;
}

// All keys ranked by score descending, ties to the lower index.
std::vector<int32_t> ranking(const std::vector<float>& s) {
  std::vector<int32_t> order(s.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  return order;
}

std::vector<int32_t> streaming_closed_form(int64_t end, int64_t k, int64_t sinks) {
  const int64_t s = std::min(sinks, k);
  std::vector<int32_t> keys;
  for (int64_t j = 0; j < end; ++j) {
    if (j < s || j >= end - (k - s)) keys.push_back(static_cast<int32_t>(j));
  }
  return keys;
}

TEST(StreamingPolicy, RowsAreSinksPlusMostRecentCandidates) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (int64_t k_min : {8, 2}) {  // k_min 2 gives budgets below the 4 sinks
    for (bool rolling : {true, false}) {
      PolicyConfig config = config_for(problem, "streaming");
      config.budget.k_min = k_min;
      config.rolling = rolling;
      for (const Call& call : {problem.prefill_all(), problem.decode_last(),
                               problem.call(ForwardMode::kPrefill, {0, 2, 10, 31, 32, 40, 64}, kLens)}) {
        SCOPED_TRACE(std::string(forward_mode_name(call.mode)) + " k_min " + std::to_string(k_min) +
                     (rolling ? " rolling" : ""));
        auto policy = make(config);
        ASSERT_NE(policy, nullptr);
        RunResult run;
        ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
        const IndexSnapshot& snap = run.rows[0];
        ASSERT_TRUE(snap.valid);
        EXPECT_EQ(snap.producer_layer, -1);  // made at begin_forward
        for (int32_t b = 0; b < call.batch(); ++b) {
          const int64_t n = call.kv_lens[b];
          if (call.mode == ForwardMode::kDecode) {
            EXPECT_EQ(sorted(decode_row(snap, b, 0)), streaming_closed_form(n, budget_k(n, config.budget), 4))
                << "b " << b;
            continue;
          }
          for (int64_t t = call.starts[b] / config.tile_size; t <= (n - 1) / config.tile_size; ++t) {
            const int64_t s_t = t * config.tile_size;
            const int64_t k_t = tile_budget(s_t, n, config.budget, rolling);
            EXPECT_EQ(sorted(prefill_row(snap, b, t, 0)), streaming_closed_form(s_t, k_t, 4)) << "b " << b << " tile " << t;
          }
        }
      }
    }
  }
}

// Brute-force Quest selection for the decode query of (layer, b, h).
std::vector<int32_t> quest_brute_force(const Problem& problem, int32_t layer, int32_t b, int32_t h, int64_t n,
                                       int64_t k, int32_t page) {
  const int32_t d = problem.shape().head_dim;
  const int32_t g = h / (problem.shape().num_heads / problem.shape().num_kv_heads);
  const float* q = problem.q_at(layer, b, static_cast<int32_t>(n - 1), h);
  const int64_t pages = (n + page - 1) / page;
  std::vector<double> score(static_cast<size_t>(pages));
  for (int64_t pg = 0; pg < pages; ++pg) {
    double s = 0.0;
    for (int32_t c = 0; c < d; ++c) {
      float lo = problem.k_at(layer, b, pg * page, g)[c], hi = lo;
      for (int64_t j = pg * page; j < std::min<int64_t>(n, (pg + 1) * page); ++j) {
        lo = std::min(lo, problem.k_at(layer, b, j, g)[c]);
        hi = std::max(hi, problem.k_at(layer, b, j, g)[c]);
      }
      s += std::max(static_cast<double>(q[c]) * lo, static_cast<double>(q[c]) * hi);
    }
    score[static_cast<size_t>(pg)] = s;
  }
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return score[a] > score[c]; });
  std::set<int32_t> keys;
  for (int64_t pg : order) {
    if (static_cast<int64_t>(keys.size()) >= k) break;
    for (int64_t j = pg * page; j < std::min<int64_t>(n, (pg + 1) * page); ++j) keys.insert(static_cast<int32_t>(j));
  }
  return std::vector<int32_t>(keys.begin(), keys.end());
}

TEST(QuestPolicy, RowsMatchBruteForcePageScoring) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (int32_t page : {4, 16}) {
    SCOPED_TRACE("page " + std::to_string(page));
    PolicyConfig config = config_for(problem, "quest");
    config.quest_page_size = page;
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    const Call call = problem.decode_last();
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
    EXPECT_FALSE(run.rows[1].valid);  // layers 0–1 dense, nothing selected yet
    for (int32_t layer = 2; layer < 6; ++layer) {
      const IndexSnapshot& snap = run.rows[static_cast<size_t>(layer)];
      ASSERT_TRUE(snap.valid);
      ASSERT_EQ(snap.num_rows, 8);
      for (int32_t b = 0; b < call.batch(); ++b) {
        const int64_t n = call.kv_lens[b];
        for (int32_t h = 0; h < 8; ++h) {
          EXPECT_EQ(sorted(decode_row(snap, b, h)),
                    quest_brute_force(problem, layer, b, h, n, budget_k(n, config.budget), page))
              << "layer " << layer << " b " << b << " head " << h;
        }
      }
    }
  }
}

TEST(OmniKvPolicy, FilterRowsAreTopKOfMaxOverHeads) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  const PolicyConfig config = config_for(problem, "omnikv");
  auto policy = make(config);
  ASSERT_NE(policy, nullptr);
  const Call call = problem.decode_last();
  RunResult run;
  ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
  // N = 6: filters at round(6·{2,8,18}/32) = {0, 2, 3}.
  for (int32_t layer : {0, 2, 3}) {
    const IndexSnapshot& snap = run.rows[static_cast<size_t>(layer)];
    ASSERT_TRUE(snap.valid);
    EXPECT_EQ(snap.producer_layer, layer);
    const auto p = per_head_p(problem, call, layer);
    for (int32_t b = 0; b < call.batch(); ++b) {
      const int64_t n = call.kv_lens[b];
      std::vector<float> max_p(static_cast<size_t>(n), 0.0f);
      for (const auto& head : p[b]) {
        for (int64_t j = 0; j < n; ++j) max_p[j] = std::max(max_p[j], head[j]);
      }
      std::vector<int32_t> expected = ranking(max_p);
      expected.resize(static_cast<size_t>(budget_k(n, config.budget)));
      EXPECT_EQ(sorted(decode_row(snap, b, 0)), sorted(expected)) << "layer " << layer << " b " << b;
    }
  }
  EXPECT_EQ(run.rows[5].producer_layer, 3);  // layer 5 reads filter 3's row
}

// LessIsMore selection written straightforwardly: sinks, recent window, then rank-by-rank union.
std::vector<int32_t> lessismore_reference(const std::vector<std::vector<float>>& p_heads, int64_t n, int64_t k) {
  const int64_t recent = (k + 3) / 4;
  std::set<int32_t> keys;
  for (int64_t j = 0; j < std::min<int64_t>(4, n); ++j) keys.insert(static_cast<int32_t>(j));
  for (int64_t j = n - recent; j < n; ++j) keys.insert(static_cast<int32_t>(j));
  std::vector<std::vector<int32_t>> ranks;
  for (const auto& head : p_heads) ranks.push_back(ranking(head));
  int64_t added = 0;
  for (int64_t r = 0; r < n && added < k - recent; ++r) {
    for (const auto& list : ranks) {
      if (added == k - recent) break;
      if (keys.insert(list[static_cast<size_t>(r)]).second) ++added;
    }
  }
  return std::vector<int32_t>(keys.begin(), keys.end());
}

TEST(LessIsMorePolicy, RowsMatchRankByRankMergeWithSinksAndRecentWindow) {
  auto rng = rng_for_test();
  const Problem problem(rng, six_layers(), kLens);
  for (int64_t k_min : {8, 40}) {
    SCOPED_TRACE("k_min " + std::to_string(k_min));
    PolicyConfig config = config_for(problem, "lessismore");
    config.budget.k_min = k_min;
    auto policy = make(config);
    ASSERT_NE(policy, nullptr);
    const Call call = problem.decode_last();
    RunResult run;
    ASSERT_TRUE(run_policy(*policy, problem, call, true, &run));
    // N = 6: selection layers at round(6·{2,13}/32) = {0, 2}.
    for (int32_t layer : {0, 2}) {
      const IndexSnapshot& snap = run.rows[static_cast<size_t>(layer)];
      ASSERT_TRUE(snap.valid);
      EXPECT_EQ(snap.producer_layer, layer);
      const auto p = per_head_p(problem, call, layer);
      for (int32_t b = 0; b < call.batch(); ++b) {
        const int64_t n = call.kv_lens[b];
        EXPECT_EQ(sorted(decode_row(snap, b, 0)), lessismore_reference(p[b], n, budget_k(n, config.budget)))
            << "layer " << layer << " b " << b;
      }
    }
    EXPECT_EQ(run.rows[5].producer_layer, 2);
  }
}

}  // namespace
}  // namespace kascade::testing
