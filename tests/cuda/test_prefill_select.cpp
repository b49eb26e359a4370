// tests/cuda/test_prefill_select.cpp — anchor selection in prefill (src/cuda/prefill/prefill_ops.h:
// select_prefill; prefill_stages.h: pooled_scores_wave, topk_wave):
//   - the pooled scores of every tile that needs a selection against
//     ref::pooled_scores_prefill_tile_ref (sum and max pooling, rows of one group and of several);
//   - the Top-k stage on scores written into the scratch by the test (exact ties, -0/+0, negative
//     values, a row of one repeated value) against ref::topk_select_ref, exactly and in ascending order;
//   - select_prefill end to end against ref pooling + ref Top-k with the tie-aware set rule
//     (harness topk_sets_equivalent), over awkward lengths as one-shot prompts and chunks, rolling and
//     fixed budgets, group sizes 1..8 (g = 8 pools 256 rows per tile), several waves and key splits;
//   - all-zero queries (every candidate ties): rows are exactly 0 .. k_t - 1.
// Index buffers start poisoned (-1); the device error word must stay clear. The wgmma variant and
// the warp-specialised LSE pass (PrefillKernels::kWarpSpecialized[Tma]) run on sm_90 devices; with
// kWarpSpecializedTma (and kAuto) on contiguous K/V or 128-key pages the pooled scores run on the
// warp-specialised pooled-score kernel (tests named WarpSpecializedTma*: the stage against the
// reference for sum and max, awkward lengths up to 4097, R = 1 and R = G / 2, g = 1..8); the tests on
// default options run the automatic choice (PrefillKernels::kAuto).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"
#include "cuda/prefill/prefill_stages.h"
#include "cuda_test_support.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "test_prefill_problem.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using testing::DeviceBuffer;
using testing::PrefillCase;
using testing::PrefillProblem;
using testing::PrefillRowsOnDevice;
using testing::PrefillVariant;

constexpr double kScoreEps = 2e-4;  // relative score error of fp32 pooling in another order


// Calls fn(b, tile, slot, s_t) for every tile slot of the call.
template <typename Fn>
void for_each_slot(const ref::PrefillRowPlan& plan, Fn&& fn) {
  for (size_t b = 0; b + 1 < plan.tile_base.size(); ++b) {
    for (int32_t slot = plan.tile_base[b]; slot < plan.tile_base[b + 1]; ++slot) {
      const int64_t tile = plan.tile_first[b] + (slot - plan.tile_base[b]);
      fn(static_cast<int32_t>(b), tile, slot, tile * plan.tile_size);
    }
  }
}

struct SelectSetup {
  ScorePooling pooling;  // num_rows 0: G
  Budget budget;
  bool rolling = true;
  PrefillPlanOptions options;
};

// Runs select_prefill and checks every row against ref pooling + ref Top-k (tie-aware).
void expect_select_matches(const PrefillProblem& p, SelectSetup s) {
  const PrefillCase& c = p.spec();
  if (s.pooling.num_rows == 0) s.pooling.num_rows = c.num_kv_heads;
  const int32_t tile_size = 32;
  PrefillRowsOnDevice rows =
      testing::plan_rows_on_device(c.q_lens, c.kv_lens, tile_size, s.pooling.num_rows, s.budget, s.rolling);
  auto w = testing::make_prefill_workspace(p.shape(tile_size), s.options);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(select_prefill(w->plan, p.device_q(), p.device_kv(), params, s.pooling,
                              rows.view(true, IndexGranularity::kPerKvGroup), w->workspace.data(), nullptr));
  auto errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, 0u) << describe_prefill_errors(*errors);
  EXPECT_TRUE(rows.indices.guards_intact());
  const std::vector<int32_t> got = rows.download_indices();

  EXPECT_TRUE(testing::check_selected_rows(p, rows.plan, got, s.pooling.reduce == ScoreReduce::kMax, kScoreEps));
}

TEST(SelectPrefill, AwkwardLengthsPerGroupRolling) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  PrefillCase c;
  c.dtype = DType::kF16;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  for (int n : testing::awkward_lengths()) {
    if (n <= 1000) {
      c.q_lens.push_back(n);
      c.kv_lens.push_back(n);
    }
  }
  const PrefillProblem p(c, rng);
  SelectSetup s;
  s.budget = testing::small_prefill_budget();
  expect_select_matches(p, s);
}

// g = 8 (256 rows per tile), chunks of longer sequences, the default budget without rolling, and a
// plan forced into many small waves with split key ranges.
TEST(SelectPrefill, GroupOfEightChunksManyWavesAndSplits) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kBF16, 16, 2, 64, {33, 129, 64, 1}, {1000, 129, 4097, 700});
  const PrefillProblem p(c, rng);
  SelectSetup s;
  s.budget = Budget{};
  s.rolling = false;
  s.options.tiles_in_flight = 3;
  s.options.key_splits = 3;
  expect_select_matches(p, s);
}

// The sm_90a variants: wgmma (Q·Kᵀ of the LSE pass and the pooling on wgmma) and the
// warp-specialised LSE pass (pooling on mma.sync); g = 4 (one m-tile per warpgroup row block) and
// g = 8 (two), several waves and splits; pages of page_size keys (0: contiguous).
void expect_group_of_four_and_eight(PrefillVariant variant, int32_t page_size = 16) {
  auto rng = testing::rng_for_test();
  for (const int32_t kv_heads : {2, 1}) {
    const PrefillProblem p(testing::make_prefill_case(kv_heads == 2 ? DType::kF16 : DType::kBF16, 8, kv_heads,
                                                      kv_heads == 2 ? 128 : 64, {1000, 33, 129}, {1000, 1000, 129},
                                                      page_size),
                           rng);  // g = 4, then g = 8
    SelectSetup s;
    s.budget = testing::small_prefill_budget();
    s.options = testing::variant_options(variant);
    s.options.tiles_in_flight = 9;
    s.options.key_splits = 2;
    expect_select_matches(p, s);
  }
}

TEST(SelectPrefill, WgmmaPerGroupAndGroupOfEight) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWgmma);
  expect_group_of_four_and_eight(PrefillVariant::kWgmma);
}

TEST(SelectPrefill, WarpSpecializedPerGroupAndGroupOfEight) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_group_of_four_and_eight(PrefillVariant::kWarpSpecialized);
}

// The warp-specialised LSE pass with the TMA K/V producer: contiguous K/V and 128-key pages.
TEST(SelectPrefill, WarpSpecializedTmaPerGroupAndGroupOfEight) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {0, 128}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_group_of_four_and_eight(PrefillVariant::kWarpSpecializedTma, page_size);
  }
}

// kascade-pooled: one row per tile pooled over all heads (R = 1 < G: the Top-k sums the groups).
TEST(SelectPrefill, OneRowPooledOverAllGroups) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kF16, 8, 4, 64, {1000}, {1000});
  const PrefillProblem p(c, rng);
  SelectSetup s;
  s.pooling.num_rows = 1;
  s.budget = testing::small_prefill_budget();
  s.options.tiles_in_flight = 5;
  expect_select_matches(p, s);
}

// Rows pooling two groups each (R = G / 2), g = 3, d = 128.
TEST(SelectPrefill, RowsOfTwoGroupsGroupOfThree) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kBF16, 12, 4, 128, {500}, {500});
  const PrefillProblem p(c, rng);
  SelectSetup s;
  s.pooling.num_rows = 2;
  s.budget = testing::small_prefill_budget();
  expect_select_matches(p, s);
}

// Max pooling (rows start from 0; the Top-k takes the max over groups), MHA (g = 1).
TEST(SelectPrefill, MaxPoolingOneRowMha) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kBF16, 4, 4, 128, {200, 77}, {200, 300});
  const PrefillProblem p(c, rng);
  SelectSetup s;
  s.pooling.num_rows = 1;
  s.pooling.reduce = ScoreReduce::kMax;
  s.budget = testing::small_prefill_budget();
  expect_select_matches(p, s);
}

// Every candidate of a tile has the same pooled score (all logits 0): ties go to the lower index,
// so each row is exactly 0 .. k_t - 1.
TEST(SelectPrefill, ZeroQueriesSelectTheLowestIndices) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  PrefillCase c;
  c.dtype = DType::kF16;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.q_lens = {1000, 33};
  c.kv_lens = {1000, 129};
  PrefillProblem p(c, rng);
  p.zero_queries();
  PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, 2, testing::small_prefill_budget(), true);
  auto w = testing::make_prefill_workspace(p.shape(), PrefillPlanOptions{});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  AttentionParams params;
  params.scale = p.scale();
  ScorePooling pooling;
  pooling.num_rows = 2;
  KC_ASSERT_OK(select_prefill(w->plan, p.device_q(), p.device_kv(), params, pooling,
                              rows.view(true, IndexGranularity::kPerKvGroup), w->workspace.data(), nullptr));
  const std::vector<int32_t> got = rows.download_indices();
  for (size_t row = 0; row + 1 < rows.plan.row_offsets.size(); ++row) {
    for (int64_t e = rows.plan.row_offsets[row]; e < rows.plan.row_offsets[row + 1]; ++e) {
      ASSERT_EQ(got[e], e - rows.plan.row_offsets[row]) << "row " << row;
    }
  }
  auto errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, 0u) << describe_prefill_errors(*errors);
}

// The pooled-score stage alone, wave by wave, against the reference scores of each tile.
void expect_pooled_stage_matches(PrefillVariant variant, int32_t page_size) {
  for (const auto& config : {std::pair{ScoreReduce::kSum, 2}, std::pair{ScoreReduce::kMax, 2}}) {
    const ScoreReduce reduce = config.first;
    const int32_t num_rows = config.second;
    auto rng = testing::rng_for_test(static_cast<uint64_t>(reduce));
    PrefillCase c;
    c.dtype = DType::kF16;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.q_lens = {129, 40};
    c.kv_lens = {700, 1000};
    c.page_size = page_size;
    const PrefillProblem p(c, rng);
    PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, num_rows, testing::small_prefill_budget(), true);
    PrefillPlanOptions options = testing::variant_options(variant);
    options.tiles_in_flight = 4;
    options.key_splits = 2;
    auto w = testing::make_prefill_workspace(p.shape(), options);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    AttentionParams params;
    params.scale = p.scale();
    ScorePooling pooling;
    pooling.num_rows = num_rows;
    pooling.reduce = reduce;
    const PrefillIndexRows view = rows.view(true, IndexGranularity::kPerKvGroup);
    float* lse = prefill_lse_scratch(w->plan, w->workspace.data());
    KC_ASSERT_OK(prefill_lse(w->plan, p.device_q(), p.device_kv(), params, lse, w->workspace.data(), nullptr));
    const PrefillPlan& plan = w->plan;
    const size_t wave_floats = size_t(plan.tiles_in_flight) * c.num_kv_heads * plan.score_stride;
    int64_t compared = 0;
    for (int32_t wave = 0; wave < plan.num_waves; ++wave) {
      KC_ASSERT_OK(pooled_scores_wave(plan, p.device_q(), p.device_kv(), params, pooling, view, lse, wave,
                                      w->workspace.data(), nullptr));
      std::vector<float> scratch(wave_floats);
      ASSERT_EQ(cudaMemcpy(scratch.data(), prefill_score_scratch(plan, w->workspace.data()), wave_floats * 4,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      for_each_slot(rows.plan, [&](int32_t b, int64_t tile, int32_t slot, int64_t s_t) {
        if (slot / plan.tiles_in_flight != wave || s_t == 0) return;
        const int64_t k = rows.plan.row_offsets[int64_t{slot} * num_rows + 1] - rows.plan.row_offsets[int64_t{slot} * num_rows];
        if (k == s_t) return;  // saturated rows are not pooled
        // per-group reference scores (R = G), the stage's scratch layout
        std::vector<float> want(size_t(c.num_kv_heads) * s_t);
        ref::PoolingSpec spec;
        spec.num_rows = c.num_kv_heads;
        spec.reduce = reduce == ScoreReduce::kMax ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
        KC_ASSERT_OK(ref::pooled_scores_prefill_tile_ref(p.host_q(), p.host_kv(), params, spec, b, tile, 32,
                                                         want.data(), nullptr));
        for (int32_t g = 0; g < c.num_kv_heads; ++g) {
          const float* mine = scratch.data() + (size_t(slot % plan.tiles_in_flight) * c.num_kv_heads + g) * plan.score_stride;
          EXPECT_TRUE(testing::all_close(std::span<const float>(mine, size_t(s_t)),
                                         std::span<const float>(want.data() + g * s_t, size_t(s_t)), {s_t},
                                         {1e-7, kScoreEps}))
              << "sequence " << b << " tile " << tile << " group " << g;
          compared += s_t;
        }
      });
    }
    EXPECT_GT(compared, 0);
  }
}

TEST(SelectPrefill, PooledScoresStageMatchesReference) {
  KC_SKIP_WITHOUT_GPU();
  expect_pooled_stage_matches(PrefillVariant::kMma, 16);
}

// The warp-specialised pooled-score kernel (TMA producer): contiguous K/V and 128-key pages.
TEST(SelectPrefill, WarpSpecializedTmaPooledScoresStageMatchesReference) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {0, 128}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_pooled_stage_matches(PrefillVariant::kWarpSpecializedTma, page_size);
  }
}

// select_prefill end to end with the warp-specialised pooled-score kernel: every awkward length
// (up to 4097) in one varlen batch, contiguous and 128-key pages, g = 1 and g = 8, rows pooling all
// groups (R = 1) with max pooling, rows of two groups (R = G / 2) with sum pooling, and the
// automatic choice.
TEST(SelectPrefill, WarpSpecializedTmaAwkwardLengthsPoolingsAndGroups) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  auto rng = testing::rng_for_test();
  std::vector<int32_t> lens;
  for (int n : testing::awkward_lengths()) lens.push_back(n);
  const struct {
    int32_t page_size, heads, kv_heads, head_dim, pool_rows;
    ScoreReduce reduce;
    DType dtype;
    PrefillVariant variant;
  } cases[] = {
      {0, 4, 4, 64, 2, ScoreReduce::kSum, DType::kBF16, PrefillVariant::kWarpSpecializedTma},
      {128, 16, 2, 64, 1, ScoreReduce::kMax, DType::kF16, PrefillVariant::kWarpSpecializedTma},
      {128, 8, 2, 64, 2, ScoreReduce::kSum, DType::kBF16, PrefillVariant::kAuto},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE("page " + std::to_string(k.page_size) + ", H " + std::to_string(k.heads) + ", G " +
                 std::to_string(k.kv_heads) + ", R " + std::to_string(k.pool_rows) + ", " +
                 testing::prefill_variant_name(k.variant));
    const PrefillProblem p(testing::make_prefill_case(k.dtype, k.heads, k.kv_heads, k.head_dim, lens, lens, k.page_size),
                           rng);
    SelectSetup s;
    s.pooling.num_rows = k.pool_rows;
    s.pooling.reduce = k.reduce;
    s.budget = testing::small_prefill_budget();
    s.options = testing::variant_options(k.variant);
    s.options.tiles_in_flight = 11;
    expect_select_matches(p, s);
  }
}

// The Top-k stage alone on scores the test writes: exact sets (ties to the lower index), ascending.
TEST(SelectPrefill, TopkStageIsExactOnTies) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kF16, 4, 2, 64, {300, 45, 64}, {300, 1000, 4097});
  const PrefillProblem p(c, rng);
  for (const auto& config : {std::pair{2, ScoreReduce::kSum}, std::pair{1, ScoreReduce::kSum},
                             std::pair{1, ScoreReduce::kMax}}) {
    const int32_t num_rows = config.first;
    const ScoreReduce reduce = config.second;
    SCOPED_TRACE("R = " + std::to_string(num_rows) + (reduce == ScoreReduce::kMax ? " max" : " sum"));
    PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, num_rows, testing::small_prefill_budget(), true);
    auto w = testing::make_prefill_workspace(p.shape(), PrefillPlanOptions{});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const PrefillPlan& plan = w->plan;
    ASSERT_EQ(plan.num_waves, 1) << "the test writes one wave of scores";
    // Scores with many exact ties: small integers, ±0, negatives; sequence 2's rows hold one value.
    std::vector<float> scratch(size_t(plan.tiles_in_flight) * c.num_kv_heads * plan.score_stride, 0.0f);
    std::uniform_int_distribution<int> small(-3, 12);
    for (size_t i = 0; i < scratch.size(); ++i) {
      const int v = small(rng);
      scratch[i] = v == 0 ? ((i & 1) ? -0.0f : 0.0f) : static_cast<float>(v) * 0.25f;
    }
    for_each_slot(rows.plan, [&](int32_t b, int64_t, int32_t slot, int64_t s_t) {
      if (b != 2) return;
      for (int32_t g = 0; g < c.num_kv_heads; ++g) {
        float* row = scratch.data() + (size_t(slot) * c.num_kv_heads + g) * plan.score_stride;
        std::fill(row, row + s_t, 1.5f);
      }
    });
    ASSERT_EQ(cudaMemcpy(prefill_score_scratch(plan, w->workspace.data()), scratch.data(), scratch.size() * 4,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ScorePooling pooling;
    pooling.num_rows = num_rows;
    pooling.reduce = reduce;
    KC_ASSERT_OK(topk_wave(plan, p.device_q(), p.device_kv(), pooling, rows.view(true, IndexGranularity::kPerKvGroup),
                           0, w->workspace.data(), nullptr));
    auto errors = read_prefill_errors(plan, w->workspace.data(), nullptr);
    ASSERT_TRUE(errors.ok());
    EXPECT_EQ(*errors, 0u) << describe_prefill_errors(*errors);
    const std::vector<int32_t> got = rows.download_indices();
    const int32_t groups = c.num_kv_heads / num_rows;
    for_each_slot(rows.plan, [&](int32_t, int64_t tile, int32_t slot, int64_t s_t) {
      for (int32_t r = 0; r < num_rows; ++r) {
        const int64_t row = int64_t{slot} * num_rows + r;
        const int64_t begin = rows.plan.row_offsets[row], k = rows.plan.row_offsets[row + 1] - begin;
        std::vector<float> combined(static_cast<size_t>(s_t));
        for (int64_t j = 0; j < s_t; ++j) {  // the kernel's order: group 0, then + group 1 ...
          const float* base = scratch.data() + (size_t(slot) * c.num_kv_heads + r * groups) * plan.score_stride;
          float v = base[j];
          for (int32_t u = 1; u < groups; ++u) {
            const float x = base[u * plan.score_stride + j];
            v = reduce == ScoreReduce::kMax ? std::max(v, x) : v + x;
          }
          combined[j] = v;
        }
        std::vector<int32_t> expected(static_cast<size_t>(k));
        if (k == s_t) {
          std::iota(expected.begin(), expected.end(), 0);
        } else if (k > 0) {
          KC_ASSERT_OK(ref::topk_select_ref(combined.data(), s_t, k, expected.data()));
        }
        const std::vector<int32_t> mine(got.begin() + begin, got.begin() + begin + k);
        ASSERT_EQ(mine, expected) << "tile " << tile << " row " << r << " (k = " << k << " of " << s_t << ")";
      }
    });
  }
}

}  // namespace
}  // namespace kascade::cuda
