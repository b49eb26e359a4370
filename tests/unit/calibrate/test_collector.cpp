// test_collector.cpp — the recording policy of src/calibrate/collector.h driven directly (no model)
// on random queries, keys and values in a paged cache: a prompt of two prefill chunks and two decode
// steps, two layers.
//   - statistics: sim against the fp64 recomputation of test_collector_reference.h, w against fp64
//     cosines of the observed rows;
//   - outputs: dense attention in fp64; the sparse stats forward's rows (Top-k_cal per KV group,
//     tie-aware) and outputs over rows ∪ local keys;
//   - unit and token counts per prompt;
//   - refusals: calls outside a prompt, batches of several sequences, a prefill chunk that starts
//     inside a tile, layers out of order, bad configs; a prompt whose importance rows are
//     incomplete is discarded from both accumulators.
#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/collector.h"
#include "testing/harness.h"
#include "unit/calibrate/test_collector_reference.h"

namespace kascade::calib {
namespace {

constexpr int32_t N = 2, H = 4, G = 2, D = 8, T = 4, kPage = 4, kMaxKeys = 16;
constexpr int64_t kCal = 3;
constexpr int64_t kHidden = 6;

// Random K/V of every layer for kMaxKeys positions, in pages of 4 laid out in reverse order.
struct Cache {
  std::vector<float> k[N], v[N];  // [num_pages, page, G, D]
  std::vector<int32_t> block_table;
  explicit Cache(std::mt19937_64& rng) {
    for (int32_t l = 0; l < N; ++l) {
      k[l] = testing::random_floats(rng, static_cast<size_t>(kMaxKeys) * G * D, -1.5f, 1.5f);
      v[l] = testing::random_floats(rng, static_cast<size_t>(kMaxKeys) * G * D, -1.0f, 1.0f);
    }
    for (int32_t p = 0; p < kMaxKeys / kPage; ++p) block_table.push_back(kMaxKeys / kPage - 1 - p);
  }
  PagedKv view(int32_t layer, const int32_t* kv_len) const {
    PagedKv kv;
    kv.k = k[layer].data();
    kv.v = v[layer].data();
    kv.num_pages = kMaxKeys / kPage;
    kv.page_size = kPage;
    kv.num_kv_heads = G;
    kv.head_dim = D;
    kv.block_table = block_table.data();
    kv.max_pages_per_seq = kMaxKeys / kPage;
    kv.kv_lens = kv_len;
    return kv;
  }
};

// One forward call of one sequence through every layer; returns what each layer saw and wrote.
Result<std::vector<testing::CapturedLayer>> run_call(AttentionPolicy& policy, const Cache& cache, ForwardMode mode,
                                                     int32_t q_len, int32_t kv_len, std::mt19937_64& rng) {
  const int32_t q_lens[1] = {q_len};
  const int32_t kv_lens[1] = {kv_len};
  KC_RETURN_IF_ERROR(policy.begin_forward(ForwardInfo{mode, 1, q_lens, kv_lens}));
  const int32_t cu[2] = {0, q_len};
  std::vector<testing::CapturedLayer> captured;
  for (int32_t l = 0; l < N; ++l) {
    const std::vector<float> q = testing::random_floats(rng, static_cast<size_t>(q_len) * H * D, -1.5f, 1.5f);
    std::vector<float> o(q.size(), std::nanf(""));
    QueryBatch qb{q.data(), DType::kF32, 1, q_len, H, D, cu};
    const PagedKv kv = cache.view(l, kv_lens);
    const AttentionParams params{0.35f};
    const AttentionOutput out{o.data(), DType::kF32, nullptr};
    KC_RETURN_IF_ERROR(policy.attention(l, qb, kv, params, out));
    testing::CapturedLayer c = testing::capture_layer(mode, l, qb, kv, params, out);
    KC_ASSIGN_OR_RETURN(c.rows, policy.snapshot_indices());
    captured.push_back(std::move(c));
  }
  return captured;
}

// Random importance rows for `tokens` tokens of every layer; returns Σ(1 − cos) per layer.
std::vector<double> observe_all(StatsCollector& c, int64_t tokens, std::mt19937_64& rng) {
  std::vector<double> sums;
  for (int32_t l = 0; l < N; ++l) {
    const auto x = testing::random_floats(rng, static_cast<size_t>(tokens * kHidden), -1.0f, 1.0f);
    const auto a = testing::random_floats(rng, static_cast<size_t>(tokens * kHidden), -1.0f, 1.0f);
    EXPECT_TRUE(c.observe(l, x.data(), a.data(), tokens).ok());
    sums.push_back(testing::reference_importance_sum(x, a, kHidden));
  }
  return sums;
}

CollectorConfig config(StatsForward forward) { return CollectorConfig{N, H, G, D, kHidden, kCal, T, forward}; }

// Prompt: prefill 8 tokens (tiles 0, 1), prefill 3 more (tile 2, partial), decode at kv 12 and 13.
struct PromptRun {
  std::vector<testing::CapturedLayer> layers;
  std::vector<double> importance;  // [N] per-prompt mean of 1 − cos
};
PromptRun run_prompt(StatsCollector& c, AttentionPolicy& policy, const Cache& cache, std::mt19937_64& rng) {
  PromptRun run;
  EXPECT_TRUE(c.begin_prompt("p").ok());
  std::vector<double> sums(N, 0.0);
  const auto add = [&](const std::vector<double>& s) {
    for (int32_t l = 0; l < N; ++l) sums[static_cast<size_t>(l)] += s[static_cast<size_t>(l)];
  };
  const struct {
    ForwardMode mode;
    int32_t q_len, kv_len;
  } calls[] = {{ForwardMode::kPrefill, 8, 8},
               {ForwardMode::kPrefill, 3, 11},
               {ForwardMode::kDecode, 1, 12},
               {ForwardMode::kDecode, 1, 13}};
  for (const auto& call : calls) {
    auto layers = run_call(policy, cache, call.mode, call.q_len, call.kv_len, rng);
    EXPECT_TRUE(layers.ok()) << layers.status().to_string();
    if (!layers.ok()) return run;
    for (auto& l : *layers) run.layers.push_back(std::move(l));
    add(observe_all(c, call.q_len, rng));
  }
  for (double s : sums) run.importance.push_back(s / 13.0);
  return run;
}

std::vector<double> expected_similarity(const PromptRun& run) {
  std::vector<testing::ReferenceUnit> units;
  for (const auto& c : run.layers)
    for (auto& u : testing::reference_units(c, T)) units.push_back(std::move(u));
  return testing::prompt_similarity(units, N, G, kCal);
}

TEST(StatsCollector, DenseForwardStatisticsAndOutputsMatchFp64) {
  auto rng = testing::rng_for_test();
  const Cache cache(rng);
  auto collector = StatsCollector::create(config(StatsForward::kDense));
  ASSERT_TRUE(collector.ok());
  auto policy = (*collector)->make_policy();
  EXPECT_EQ(policy->config().num_layers, N);
  std::vector<PromptRun> runs;
  for (int p = 0; p < 2; ++p) {
    runs.push_back(run_prompt(**collector, *policy, cache, rng));
    auto units = (*collector)->end_prompt();
    ASSERT_TRUE(units.ok()) << units.status().to_string();
    EXPECT_EQ(units->prefill_tiles, 2);  // tiles 1 and 2
    EXPECT_EQ(units->decode_steps, 2);
    EXPECT_EQ(units->prefill_tokens, 11);
    EXPECT_EQ(units->decode_tokens, 2);
  }
  auto stats = (*collector)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  const auto s0 = expected_similarity(runs[0]);
  const auto s1 = expected_similarity(runs[1]);
  for (size_t i = 0; i < s0.size(); ++i) EXPECT_NEAR(stats->similarity[i], (s0[i] + s1[i]) / 2, 1e-5) << i;
  for (int32_t l = 0; l < N; ++l)
    EXPECT_NEAR(stats->importance[l], (runs[0].importance[l] + runs[1].importance[l]) / 2, 1e-12);
  // Dense outputs, and dense counts: every key of the causal range.
  for (const auto& c : runs[0].layers) {
    EXPECT_FALSE(c.rows.valid);
    for (int32_t qi = 0; qi < c.q_len; ++qi) {
      std::vector<int64_t> keys;
      for (int64_t j = 0; j <= c.start() + qi; ++j) keys.push_back(j);
      for (int32_t h = 0; h < H; ++h) {
        const auto o = testing::reference_attention(c, qi, h, keys);
        for (int32_t e = 0; e < D; ++e) EXPECT_NEAR(c.out[(static_cast<size_t>(qi) * H + h) * D + e], o[e], 1e-5);
      }
    }
  }
  const auto& st = policy->statistics();
  EXPECT_EQ(st.total(ForwardMode::kPrefill).attended, st.total(ForwardMode::kPrefill).causal);
  // Two prompts x two layers x H heads x Σ_{p<11} (p + 1).
  EXPECT_EQ(st.total(ForwardMode::kPrefill).causal, 2 * N * H * 66);
  EXPECT_EQ(policy->role(1, ForwardMode::kDecode).value(), LayerRole::kDense);
}

TEST(StatsCollector, SparseForwardAttendsTopKCalPlusLocalKeys) {
  auto rng = testing::rng_for_test();
  const Cache cache(rng);
  auto collector = StatsCollector::create(config(StatsForward::kSparse));
  ASSERT_TRUE(collector.ok());
  auto policy = (*collector)->make_policy();
  const PromptRun run = run_prompt(**collector, *policy, cache, rng);
  ASSERT_TRUE((*collector)->end_prompt().ok());
  auto stats = (*collector)->stats();
  ASSERT_TRUE(stats.ok());
  const auto sim = expected_similarity(run);
  for (size_t i = 0; i < sim.size(); ++i) EXPECT_NEAR(stats->similarity[i], sim[i], 1e-5) << i;
  int64_t attended = 0;
  for (const auto& c : run.layers) {
    ASSERT_TRUE(c.rows.valid);
    EXPECT_EQ(c.rows.producer_layer, c.layer);
    const auto units = testing::reference_units(c, T);
    const int64_t first_tile = c.start() / T;
    for (int32_t qi = 0; qi < c.q_len; ++qi) {
      const int64_t pos = c.start() + qi;
      const int64_t t = c.mode == ForwardMode::kDecode ? 0 : pos / T;
      for (int32_t g = 0; g < G; ++g) {
        std::vector<int32_t> row;
        const double* scores = nullptr;
        int64_t n = 0;
        if (c.mode == ForwardMode::kDecode) {
          row.assign(c.rows.indices.begin() + g * c.rows.k_max, c.rows.indices.begin() + (g + 1) * c.rows.k_max);
          n = c.kv_len;
          scores = units[0].scores.data() + static_cast<size_t>(g) * n;
        } else {
          const size_t r = static_cast<size_t>((t - first_tile) * G + g);
          row.assign(c.rows.indices.begin() + c.rows.row_offsets[r],
                     c.rows.indices.begin() + c.rows.row_offsets[r + 1]);
          for (const auto& u : units) {
            if (u.id == t) {
              n = u.num_candidates;
              scores = u.scores.data() + static_cast<size_t>(g) * n;
            }
          }
        }
        ASSERT_EQ(static_cast<int64_t>(row.size()), std::min(kCal, c.mode == ForwardMode::kDecode ? n : t * T));
        if (scores != nullptr) {
          const auto want64 = testing::reference_topk(scores, n, static_cast<int64_t>(row.size()));
          const std::vector<int32_t> want(want64.begin(), want64.end());
          const std::vector<float> as_float(scores, scores + n);
          EXPECT_TRUE(testing::topk_sets_equivalent(row, want, as_float, 1e-5));
        }
        std::vector<int64_t> keys(row.begin(), row.end());
        if (c.mode == ForwardMode::kPrefill)
          for (int64_t j = t * T; j <= pos; ++j) keys.push_back(j);
        for (int32_t h = g * (H / G); h < (g + 1) * (H / G); ++h) {
          attended += static_cast<int64_t>(keys.size());
          const auto o = testing::reference_attention(c, qi, h, keys);
          for (int32_t e = 0; e < D; ++e) EXPECT_NEAR(c.out[(static_cast<size_t>(qi) * H + h) * D + e], o[e], 1e-5);
        }
      }
    }
  }
  // The policy's attended counts are the key sets checked above.
  const auto& st = policy->statistics();
  EXPECT_EQ(st.total(ForwardMode::kPrefill).attended + st.total(ForwardMode::kDecode).attended, attended);
  EXPECT_LT(st.total(ForwardMode::kPrefill).attended, st.total(ForwardMode::kPrefill).causal);
  EXPECT_EQ(policy->role(0, ForwardMode::kPrefill).value(), LayerRole::kAnchor);
}

TEST(StatsCollector, RefusesCallsItCannotAttributeAndDiscardsIncompletePrompts) {
  auto rng = testing::rng_for_test();
  const Cache cache(rng);
  auto collector = StatsCollector::create(config(StatsForward::kDense));
  ASSERT_TRUE(collector.ok());
  StatsCollector& c = **collector;
  auto policy = c.make_policy();
  // Outside a prompt.
  auto outside = run_call(*policy, cache, ForwardMode::kPrefill, 4, 4, rng);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside a calibration prompt"), std::string::npos);
  const float row[kHidden] = {1, 0, 0, 0, 0, 0};
  EXPECT_FALSE(c.observe(0, row, row, 1).ok());

  ASSERT_TRUE(c.begin_prompt("q").ok());
  // Two sequences in one call.
  const int32_t q2[2] = {4, 4}, kv2[2] = {4, 4};
  EXPECT_FALSE(policy->begin_forward(ForwardInfo{ForwardMode::kPrefill, 2, q2, kv2}).ok());
  // A prefill chunk starting inside a tile.
  auto unaligned = run_call(*policy, cache, ForwardMode::kPrefill, 3, 9, rng);
  ASSERT_FALSE(unaligned.ok());
  EXPECT_NE(unaligned.status().message().find("multiples of the tile size"), std::string::npos);
  // Layers out of order.
  const int32_t q1[1] = {8}, kv1[1] = {8}, cu[2] = {0, 8};
  ASSERT_TRUE(policy->begin_forward(ForwardInfo{ForwardMode::kPrefill, 1, q1, kv1}).ok());
  std::vector<float> q(8 * H * D, 0.5f), o(q.size());
  const QueryBatch qb{q.data(), DType::kF32, 1, 8, H, D, cu};
  const Status skipped = policy->attention(1, qb, cache.view(1, kv1), AttentionParams{0.35f},
                                           AttentionOutput{o.data(), DType::kF32, nullptr});
  ASSERT_FALSE(skipped.ok());
  EXPECT_NE(skipped.message().find("expected layer 0"), std::string::npos);
  c.discard_prompt();

  // A complete prompt counts; one whose layer 1 has fewer observed tokens is discarded entirely.
  (void)run_prompt(c, *policy, cache, rng);
  ASSERT_TRUE(c.end_prompt().ok());
  auto before = c.stats();
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(c.begin_prompt("incomplete").ok());
  ASSERT_TRUE(run_call(*policy, cache, ForwardMode::kPrefill, 8, 8, rng).ok());
  const auto x = testing::random_floats(rng, 8 * kHidden, -1.0f, 1.0f);
  ASSERT_TRUE(c.observe(0, x.data(), x.data(), 8).ok());
  ASSERT_TRUE(c.observe(1, x.data(), x.data(), 7).ok());
  EXPECT_FALSE(c.end_prompt().ok());
  EXPECT_FALSE(c.in_prompt());
  EXPECT_EQ(c.num_prompts(), 1);
  auto after = c.stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);

  // Bad configs.
  EXPECT_FALSE(StatsCollector::create(CollectorConfig{N, 3, 2, D, kHidden, kCal, T, StatsForward::kDense}).ok());
  EXPECT_FALSE(StatsCollector::create(CollectorConfig{N, H, G, D, kHidden, 0, T, StatsForward::kDense}).ok());
  EXPECT_FALSE(StatsCollector::create(CollectorConfig{N, H, G, D, kHidden, kCal, 0, StatsForward::kDense}).ok());
  EXPECT_FALSE(StatsCollector::create(CollectorConfig{0, H, G, D, kHidden, kCal, T, StatsForward::kDense}).ok());
}

}  // namespace
}  // namespace kascade::calib
