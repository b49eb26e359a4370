// test_prefill_rows.cpp — plan_prefill_rows and PrefillIndexSet::view (src/ref/prefill_rows.h):
// per-tile budgets hand-computed at the tile boundaries where the budget changes regime (s_t = 0,
// 32, 96, 128, 1280 = k_min·10, 1312, ...), rolling and non-rolling, chunked calls whose start is
// not a multiple of T, several sequences (tile_base, tile_first, total_indices), k_round, and the
// refusals.
#include <gtest/gtest.h>

#include <numeric>

#include "kascade/budget.h"
#include "ref/prefill_rows.h"

namespace kascade {
namespace {

using ref::plan_prefill_rows;

// Row length of tile start s under the default budget (rho 0.1, k_min 128), written out here.
int64_t default_rolling_k(int64_t s) { return std::min<int64_t>(s, std::max<int64_t>(128, (s + 9) / 10)); }

std::vector<int64_t> row_lengths(const ref::PrefillRowPlan& plan) {
  std::vector<int64_t> lens;
  for (size_t r = 0; r + 1 < plan.row_offsets.size(); ++r) lens.push_back(plan.row_offsets[r + 1] - plan.row_offsets[r]);
  return lens;
}

TEST(PlanPrefillRows, RollingBudgetAtTileBoundaries) {
  const int32_t q_lens[1] = {1400}, kv_lens[1] = {1400};
  auto plan = plan_prefill_rows(q_lens, kv_lens, 1, 32, 2, Budget{}, /*rolling=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->tile_base, (std::vector<int32_t>{0, 44}));  // tiles 0 .. 1399/32 = 43
  EXPECT_EQ(plan->tile_first, (std::vector<int64_t>{0}));
  EXPECT_EQ(plan->num_slots(), 44);
  EXPECT_EQ(plan->num_rows, 2);
  EXPECT_EQ(plan->tile_size, 32);
  const std::vector<int64_t> lens = row_lengths(*plan);
  ASSERT_EQ(lens.size(), 88u);
  // Hand-computed: s_t = 0 → 0; 32 → 32 (all candidates); 96 → 96; 128 → 128; 160 → k_min 128;
  // 1280 → 128 (= ceil(0.1·1280)); 1312 → ceil(131.2) = 132; 1344 → 135; 1376 → 138.
  const std::pair<int, int64_t> hand[] = {{0, 0},     {1, 32},    {3, 96},    {4, 128}, {5, 128},
                                          {40, 128},  {41, 132},  {42, 135},  {43, 138}};
  for (auto [tile, k] : hand) {
    EXPECT_EQ(lens[2 * tile], k) << "tile " << tile;
    EXPECT_EQ(lens[2 * tile + 1], k) << "tile " << tile;
  }
  int64_t total = 0;
  for (int tile = 0; tile < 44; ++tile) {
    EXPECT_EQ(lens[2 * tile], default_rolling_k(32 * tile)) << "tile " << tile;
    total += 2 * default_rolling_k(32 * tile);
  }
  EXPECT_EQ(plan->total_indices(), total);
  EXPECT_EQ(plan->row_offsets.front(), 0);
}

TEST(PlanPrefillRows, NonRollingBudgetUsesTheCallLength) {
  const int32_t q_lens[1] = {1400}, kv_lens[1] = {1400};
  auto plan = plan_prefill_rows(q_lens, kv_lens, 1, 32, 1, Budget{}, /*rolling=*/false);
  ASSERT_TRUE(plan.ok());
  const std::vector<int64_t> lens = row_lengths(*plan);
  // k(1400) = ceil(140) = 140, capped by the candidates s_t.
  const std::pair<int, int64_t> hand[] = {{0, 0}, {1, 32}, {4, 128}, {5, 140}, {41, 140}, {43, 140}};
  for (auto [tile, k] : hand) EXPECT_EQ(lens[tile], k) << "tile " << tile;
}

TEST(PlanPrefillRows, ChunkedCallsOfSeveralSequences) {
  // (q, kv): a one-shot prefill; a chunk starting at 2900 (mid tile 90); one query at 32; an
  // aligned chunk 32..63.
  const int32_t q_lens[4] = {1400, 100, 1, 32}, kv_lens[4] = {1400, 3000, 33, 64};
  for (bool rolling : {true, false}) {
    SCOPED_TRACE(rolling ? "rolling" : "non-rolling");
    auto plan = plan_prefill_rows(q_lens, kv_lens, 4, 32, 3, Budget{}, rolling);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->tile_base, (std::vector<int32_t>{0, 44, 48, 49, 50}));
    EXPECT_EQ(plan->tile_first, (std::vector<int64_t>{0, 90, 1, 1}));
    ASSERT_EQ(plan->row_offsets.size(), 50u * 3 + 1);
    const std::vector<int64_t> lens = row_lengths(*plan);
    // Sequence 1, tiles 90..93 (s_t 2880, 2912, 2944, 2976): rolling ceil(0.1 s_t) = 288, 292, 295,
    // 298; non-rolling k(3000) = 300.
    const std::vector<int64_t> seq1 = rolling ? std::vector<int64_t>{288, 292, 295, 298} : std::vector<int64_t>{300, 300, 300, 300};
    for (int s = 0; s < 4; ++s) {
      for (int r = 0; r < 3; ++r) EXPECT_EQ(lens[(44 + s) * 3 + r], seq1[s]) << "slot " << 44 + s;
    }
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(lens[48 * 3 + r], 32);  // sequences 2 and 3: tile 1, s_t = 32: every candidate
      EXPECT_EQ(lens[49 * 3 + r], 32);
    }
    EXPECT_EQ(plan->total_indices(), std::accumulate(lens.begin(), lens.end(), int64_t{0}));
  }
}

TEST(PlanPrefillRows, RoundsTheBudgetUp) {
  const int32_t q_lens[1] = {1400}, kv_lens[1] = {1400};
  Budget budget;
  budget.k_round = 128;
  auto plan = plan_prefill_rows(q_lens, kv_lens, 1, 32, 1, budget, true);
  ASSERT_TRUE(plan.ok());
  const std::vector<int64_t> lens = row_lengths(*plan);
  EXPECT_EQ(lens[40], 128);  // 128 is a multiple already
  EXPECT_EQ(lens[41], 256);  // 132 → 256
  EXPECT_EQ(lens[2], 64);    // capped by the 64 candidates
}

TEST(PlanPrefillRows, TileSizeOneForTheOracle) {
  const int32_t q_lens[1] = {5}, kv_lens[1] = {300};
  Budget budget;
  budget.k_min = 4;
  auto plan = plan_prefill_rows(q_lens, kv_lens, 1, 1, 2, budget, true);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->tile_base, (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(plan->tile_first, (std::vector<int64_t>{295}));
  const std::vector<int64_t> lens = row_lengths(*plan);
  // s_t = 295 .. 299: ceil(29.5) = 30, 30, 30, 30, ceil(29.9) = 30
  for (int64_t len : lens) EXPECT_EQ(len, 30);
}

TEST(PrefillIndexSet, ViewExposesThePlan) {
  const int32_t q_lens[2] = {40, 3}, kv_lens[2] = {40, 200};
  auto plan = plan_prefill_rows(q_lens, kv_lens, 2, 32, 2, Budget{}, true);
  ASSERT_TRUE(plan.ok());
  ref::PrefillIndexSet set{*plan, {}};
  const PrefillIndexRows rows = set.view(/*include_local=*/false, IndexGranularity::kPerQueryHead);
  EXPECT_EQ(static_cast<int64_t>(set.indices.size()), set.plan.total_indices());
  for (int32_t x : set.indices) EXPECT_EQ(x, -1);
  EXPECT_EQ(rows.indices, set.indices.data());
  EXPECT_EQ(rows.row_offsets, set.plan.row_offsets.data());
  EXPECT_EQ(rows.tile_base, set.plan.tile_base.data());
  EXPECT_EQ(rows.batch, 2);
  EXPECT_EQ(rows.num_rows, 2);
  EXPECT_EQ(rows.tile_size, 32);
  EXPECT_FALSE(rows.include_local);
  EXPECT_EQ(rows.granularity, IndexGranularity::kPerQueryHead);
}

TEST(PlanPrefillRows, RefusesBadInput) {
  const int32_t q_lens[2] = {4, 0}, kv_lens[2] = {3, 10};
  struct Case {
    Result<ref::PrefillRowPlan> result;
    std::string message;
  };
  Budget bad_budget;
  bad_budget.rho_ppm = 0;
  const int32_t ok_q[1] = {4}, ok_kv[1] = {10};
  Case cases[] = {
      {plan_prefill_rows(q_lens, kv_lens, 2, 32, 1, Budget{}, true), "kv_lens[0] = 3 is smaller than q_lens[0] = 4"},
      {plan_prefill_rows(q_lens + 1, kv_lens + 1, 1, 32, 1, Budget{}, true), "q_lens[0] is 0"},
      {plan_prefill_rows(ok_q, ok_kv, 1, 0, 1, Budget{}, true), "tile_size is 0"},
      {plan_prefill_rows(ok_q, ok_kv, 1, 32, 0, Budget{}, true), "num_rows is 0"},
      {plan_prefill_rows(ok_q, ok_kv, 0, 32, 1, Budget{}, true), "batch is 0"},
      {plan_prefill_rows(nullptr, ok_kv, 1, 32, 1, Budget{}, true), "q_lens is null"},
      {plan_prefill_rows(ok_q, ok_kv, 1, 32, 1, bad_budget, true), "rho_ppm is 0"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.message;
    EXPECT_EQ(c.result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.result.status().message().find(c.message), std::string::npos) << c.result.status().message();
  }
}

}  // namespace
}  // namespace kascade
