// tests/cuda/test_prefill_sparse.cpp — sparse (reuse) prefill over compact index rows
// (src/cuda/prefill/prefill_ops.h: sparse_prefill) against ref::sparse_prefill_ref and an fp64
// recomputation (FA3 rule): random rows in random order planned by ref::plan_prefill_rows (rolling
// and not, several budgets, so k_t covers 0 < k_t < s_t and k_t = s_t), per-KV-group rows read
// through head maps (identity, a permutation, all groups on one row) and per-query-head rows, the
// oracle layout (tile 1, no local keys, rows that leave a query with no key), f16/bf16, head dims
// 64/128, group sizes 1..8 (g = 8 needs two CTAs per tile), awkward lengths as one-shot prompts and
// as chunks. Outputs NaN-poisoned with guards; the device error word must stay clear, and must name
// the fault when rows are bad. The wgmma variant and the warp-specialised kernel (gathered key
// lists, PrefillKernels::kWarpSpecialized[Tma] and kAuto; tests named WarpSpecialized*) run on sm_90
// devices: every shape above plus pages of 16/64/128 keys and contiguous K/V, GQA 1/4/8, d 64/128,
// lengths up to 4097, the oracle layout and bad rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "test_prefill_problem.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using testing::DeviceBuffer;
using testing::PrefillCase;
using testing::PrefillProblem;
using testing::PrefillRowsOnDevice;
using testing::PrefillVariant;

// Fills every row of the plan with a random duplicate-free subset (random order) of its range:
// [0, s_t) with local keys, [0, min(s_t + T, kv_len)) without.
std::vector<int32_t> random_rows(const PrefillProblem& p, const ref::PrefillRowPlan& plan, bool include_local,
                                 std::mt19937_64& rng) {
  std::vector<int32_t> indices(static_cast<size_t>(plan.total_indices()));
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t s = plan.tile_base[b]; s < plan.tile_base[b + 1]; ++s) {
      const int64_t tile = plan.tile_first[b] + (s - plan.tile_base[b]);
      const int64_t start = tile * plan.tile_size;
      const int32_t bound = static_cast<int32_t>(include_local ? start : std::min<int64_t>(start + plan.tile_size, p.kv_len(b)));
      for (int32_t r = 0; r < plan.num_rows; ++r) {
        const int64_t row = int64_t{s} * plan.num_rows + r;
        const int32_t len = static_cast<int32_t>(plan.row_offsets[row + 1] - plan.row_offsets[row]);
        const std::vector<int32_t> subset = testing::random_subset(rng, bound, len, /*sorted=*/false);
        std::copy(subset.begin(), subset.end(), indices.begin() + plan.row_offsets[row]);
      }
    }
  }
  return indices;
}

struct SparseSetup {
  int32_t tile_size = 32;
  int32_t num_rows = 0;  // 0: G (per group) or H (per head)
  bool include_local = true;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
  std::vector<int32_t> head_map;  // [G] or empty
  Budget budget;
  bool rolling = true;
  PrefillVariant variant = PrefillVariant::kMma;  // the plan's kernels (testing::variant_options)
};

// Runs sparse_prefill with random rows and checks it against src/ref and the fp64 recomputation.
void expect_sparse_matches(const PrefillProblem& p, const SparseSetup& s, std::mt19937_64& rng) {
  const PrefillCase& c = p.spec();
  const int32_t num_rows = s.num_rows > 0 ? s.num_rows
                           : s.granularity == IndexGranularity::kPerKvGroup ? c.num_kv_heads
                                                                             : c.num_heads;
  PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, s.tile_size, num_rows, s.budget, s.rolling);
  const std::vector<int32_t> host_indices = random_rows(p, rows.plan, s.include_local, rng);
  rows.indices.upload(host_indices.data(), host_indices.size() * sizeof(int32_t));
  DeviceBuffer head_map_d;
  if (!s.head_map.empty()) head_map_d = testing::upload_vector(s.head_map);
  const int32_t* head_map = s.head_map.empty() ? nullptr : head_map_d.as<int32_t>();

  PrefillPlanOptions options = testing::variant_options(s.variant);
  options.selection = false;
  auto w = testing::make_prefill_workspace(p.shape(s.tile_size), options);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const size_t q_rows = size_t(p.total_q()) * c.num_heads;
  DeviceBuffer o(q_rows * c.head_dim * dtype_size(c.dtype)), lse(q_rows * sizeof(float));
  AttentionParams params;
  params.scale = p.scale();
  const PrefillIndexRows view = rows.view(s.include_local, s.granularity);
  KC_ASSERT_OK(sparse_prefill(w->plan, p.device_q(), p.device_kv(), params, view, head_map,
                              {o.data(), c.dtype, lse.as<float>()}, w->workspace.data(), nullptr));
  auto errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, 0u) << describe_prefill_errors(*errors);
  EXPECT_TRUE(o.guards_intact());
  EXPECT_TRUE(lse.guards_intact());
  const std::vector<float> got_o = testing::to_floats(o.download(), c.dtype);
  const std::vector<float> got_lse = lse.download_as<float>();

  const testing::PrefillReference r = testing::recompute_prefill(
      p, testing::sparse_keys(p, rows.plan, host_indices, s.include_local, s.granularity, s.head_map));
  EXPECT_TRUE(testing::check_prefill_attention(p, r, got_o, got_lse));

  ref::PrefillIndexSet host_rows;
  host_rows.plan = rows.plan;
  host_rows.indices = host_indices;
  std::vector<float> ref_o(q_rows * c.head_dim), ref_lse(q_rows);
  KC_ASSERT_OK(ref::sparse_prefill_ref(p.host_q(), p.host_kv(), params, host_rows.view(s.include_local, s.granularity),
                                       s.head_map.empty() ? nullptr : s.head_map.data(),
                                       {ref_o.data(), DType::kF32, ref_lse.data()}));
  EXPECT_TRUE(testing::all_close(got_o, ref_o, {p.total_q(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
  EXPECT_TRUE(testing::all_close(got_lse, ref_lse, {p.total_q(), c.num_heads}, {1e-4, 1e-5}));
}


using SparsePrefillTest = testing::PrefillConfigTest;

TEST_P(SparsePrefillTest, AwkwardLengthsRollingIdentityMap) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const std::vector<int32_t> lens = testing::awkward_lengths_up_to(1000);
  const PrefillProblem p(make_case(lens, lens), rng);
  SparseSetup s;
  s.budget = testing::small_prefill_budget();
  expect_sparse_matches(p, s, rng);
}

// The wgmma variant (sm_90a Q·Kᵀ): one-shot awkward lengths and per-query-head rows.
TEST_P(SparsePrefillTest, WgmmaAwkwardLengthsAndPerHeadRows) {
  KC_SKIP_WITHOUT_WGMMA();
  auto rng = testing::rng_for_test();
  const std::vector<int32_t> lens = testing::awkward_lengths_up_to(1000);
  SparseSetup s;
  s.budget = testing::small_prefill_budget();
  s.variant = PrefillVariant::kWgmma;
  expect_sparse_matches(PrefillProblem(make_case(lens, lens), rng), s, rng);
  s.granularity = IndexGranularity::kPerQueryHead;
  expect_sparse_matches(PrefillProblem(make_case({127, 33}, {127, 200}), rng), s, rng);
}

// The warp-specialised kernel (gathered key lists): one-shot awkward lengths in one varlen batch,
// per-query-head rows, chunks of longer sequences (up to 4097 keys) through a permuted head map,
// and every group on one row.
TEST_P(SparsePrefillTest, WarpSpecializedEveryLayout) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  auto rng = testing::rng_for_test();
  const std::vector<int32_t> lens = testing::awkward_lengths_up_to(1000);
  SparseSetup s;
  s.budget = testing::small_prefill_budget();
  s.variant = PrefillVariant::kWarpSpecialized;
  {
    SCOPED_TRACE("awkward lengths, rolling, identity map");
    expect_sparse_matches(PrefillProblem(make_case(lens, lens), rng), s, rng);
  }
  {
    SCOPED_TRACE("per-query-head rows");
    SparseSetup h = s;
    h.granularity = IndexGranularity::kPerQueryHead;
    expect_sparse_matches(PrefillProblem(make_case({127, 33}, {127, 200}), rng), h, rng);
  }
  {
    SCOPED_TRACE("chunks, permuted head map, not rolling");
    const PrefillProblem p(make_case({33, 1, 64, 127}, {1000, 129, 96, 4097}), rng);
    SparseSetup c = s;
    c.budget = Budget{};
    c.rolling = false;
    c.head_map.resize(p.spec().num_kv_heads);
    std::iota(c.head_map.rbegin(), c.head_map.rend(), 0);
    expect_sparse_matches(p, c, rng);
  }
  {
    SCOPED_TRACE("all groups on one row");
    const PrefillProblem p(make_case({129, 31}, {129, 1000}), rng);
    SparseSetup o = s;
    o.num_rows = 1;
    o.head_map.assign(p.spec().num_kv_heads, 0);
    expect_sparse_matches(p, o, rng);
  }
}

TEST_P(SparsePrefillTest, ChunksWithPermutedHeadMapNonRolling) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillProblem p(make_case({33, 1, 64, 127}, {1000, 129, 96, 4097}), rng);
  SparseSetup s;
  s.budget = Budget{};  // rho 0.1, k_min 128
  s.rolling = false;
  s.head_map.resize(p.spec().num_kv_heads);
  std::iota(s.head_map.rbegin(), s.head_map.rend(), 0);  // reversed: group g reads row G-1-g
  expect_sparse_matches(p, s, rng);
}

TEST_P(SparsePrefillTest, AllGroupsReadOneRow) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillProblem p(make_case({129, 31}, {129, 1000}), rng);
  SparseSetup s;
  s.num_rows = 1;
  s.head_map.assign(p.spec().num_kv_heads, 0);
  s.budget = testing::small_prefill_budget();
  expect_sparse_matches(p, s, rng);
}

TEST_P(SparsePrefillTest, PerQueryHeadRows) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillProblem p(make_case({127, 33}, {127, 200}), rng);
  SparseSetup s;
  s.granularity = IndexGranularity::kPerQueryHead;
  s.budget = testing::small_prefill_budget();
  expect_sparse_matches(p, s, rng);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparsePrefillTest,
    ::testing::Values(testing::PrefillConfig{DType::kF16, 8, 2, 128, 16}, testing::PrefillConfig{DType::kBF16, 8, 8, 64, 16},
                      testing::PrefillConfig{DType::kBF16, 16, 2, 128, 32}, testing::PrefillConfig{DType::kF16, 12, 4, 64, 0},
                      testing::PrefillConfig{DType::kF16, 32, 8, 128, 16}),
    testing::prefill_config_name);

// The warp-specialised kernel over the page sizes its gather serves (16, 64, 128 keys; 0 =
// contiguous), with GQA 1, 4 and 8, both head dims and dtypes, the longest awkward length (4097) and
// a 1-query chunk, and the automatic choice (kAuto, which picks it on sm_90a builds on Hopper).
TEST(SparsePrefill, WarpSpecializedPageSizesGroupsAndAuto) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  auto rng = testing::rng_for_test();
  const struct {
    int32_t page_size, heads, kv_heads, head_dim;
    DType dtype;
  } layouts[] = {{16, 8, 8, 64, DType::kBF16},  {64, 8, 2, 128, DType::kF16}, {128, 16, 2, 64, DType::kF16},
                 {0, 8, 1, 128, DType::kBF16}, {128, 4, 4, 128, DType::kBF16}};
  for (const auto& l : layouts) {
    SCOPED_TRACE("page " + std::to_string(l.page_size) + ", H " + std::to_string(l.heads) + ", G " +
                 std::to_string(l.kv_heads) + ", d " + std::to_string(l.head_dim));
    const PrefillProblem p(testing::make_prefill_case(l.dtype, l.heads, l.kv_heads, l.head_dim, {4097, 1, 32},
                                                      {4097, 300, 32}, l.page_size),
                           rng);
    for (const PrefillVariant variant : {PrefillVariant::kWarpSpecialized, PrefillVariant::kAuto}) {
      SCOPED_TRACE(testing::prefill_variant_name(variant));
      SparseSetup s;
      s.budget = testing::small_prefill_budget();
      s.variant = variant;
      expect_sparse_matches(p, s, rng);
    }
  }
}

// The oracle layout: one tile per query, rows of keys j <= position drawn from [0, s_t + 1), no
// local keys; the rows of position 0 are empty (k(0) = 0): o = 0, lse = -inf.
void expect_oracle_layout_matches(PrefillVariant variant) {
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kBF16, 4, 2, 64, {31, 1, 5}, {40, 33, 5});
  const PrefillProblem p(c, rng);
  SparseSetup s;
  s.tile_size = 1;
  s.include_local = false;
  s.granularity = IndexGranularity::kPerQueryHead;
  s.budget.rho_ppm = 200000;
  s.budget.k_min = 0;  // k(p) = ceil(0.2 p): 0 at p = 0
  s.rolling = true;
  s.variant = variant;
  expect_sparse_matches(p, s, rng);
}

TEST(SparsePrefill, OracleLayoutWithEmptyRows) {
  KC_SKIP_WITHOUT_GPU();
  expect_oracle_layout_matches(PrefillVariant::kMma);
}

TEST(SparsePrefill, WarpSpecializedOracleLayoutWithEmptyRows) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_oracle_layout_matches(PrefillVariant::kWarpSpecialized);
}

// The budget k(s_t) saturates for every tile (k_min >= n): sparse prefill over all candidates plus
// the local keys equals dense prefill.
TEST(SparsePrefill, SaturatedRowsEqualDense) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kF16, 8, 2, 128, {300}, {300});
  const PrefillProblem p(c, rng);
  Budget saturated;
  saturated.k_min = 1 << 20;  // k(s_t) = s_t for every tile
  PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, 2, saturated, true);
  std::vector<int32_t> host_indices(static_cast<size_t>(rows.plan.total_indices()));
  for (size_t row = 0; row + 1 < rows.plan.row_offsets.size(); ++row) {  // rows hold 0 .. s_t - 1
    std::iota(host_indices.begin() + rows.plan.row_offsets[row], host_indices.begin() + rows.plan.row_offsets[row + 1], 0);
  }
  rows.indices.upload(host_indices.data(), host_indices.size() * sizeof(int32_t));
  auto w = testing::make_prefill_workspace(p.shape(), PrefillPlanOptions{false});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const size_t q_rows = size_t(p.total_q()) * c.num_heads;
  DeviceBuffer o(q_rows * c.head_dim * 2), lse(q_rows * 4), o_dense(q_rows * c.head_dim * 2), lse_dense(q_rows * 4);
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(sparse_prefill(w->plan, p.device_q(), p.device_kv(), params,
                              rows.view(true, IndexGranularity::kPerKvGroup), nullptr,
                              {o.data(), c.dtype, lse.as<float>()}, w->workspace.data(), nullptr));
  KC_ASSERT_OK(dense_prefill(w->plan, p.device_q(), p.device_kv(), params, {o_dense.data(), c.dtype, lse_dense.as<float>()},
                             w->workspace.data(), nullptr));
  const std::vector<float> a = testing::to_floats(o.download(), c.dtype), b = testing::to_floats(o_dense.download(), c.dtype);
  EXPECT_TRUE(testing::all_close(a, b, {p.total_q(), c.num_heads, c.head_dim}, {1e-3, 1e-3}));
  EXPECT_TRUE(testing::all_close(lse.download_as<float>(), lse_dense.download_as<float>(), {p.total_q(), c.num_heads},
                                 {1e-5, 1e-5}));
}

// Bad rows set the error word and are skipped, never read out of bounds.
void expect_bad_rows_reported(PrefillVariant variant) {
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kF16, 4, 2, 64, {200}, {200});
  const PrefillProblem p(c, rng);
  PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, 2, testing::small_prefill_budget(), true);
  std::vector<int32_t> host_indices = random_rows(p, rows.plan, true, rng);
  PrefillPlanOptions options = testing::variant_options(variant);
  options.selection = false;
  auto w = testing::make_prefill_workspace(p.shape(), options);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  DeviceBuffer o(size_t(200) * 4 * 64 * 2), lse(size_t(200) * 4 * 4);
  AttentionParams params;
  params.scale = p.scale();
  const AttentionOutput out{o.data(), c.dtype, lse.as<float>()};

  // An entry at s_t of its tile (a local key, not a candidate).
  const int64_t last_row = static_cast<int64_t>(rows.plan.row_offsets.size()) - 2;
  std::vector<int32_t> bad = host_indices;
  bad[rows.plan.row_offsets[last_row]] = static_cast<int32_t>((rows.plan.tile_first[0] + rows.plan.num_slots() - 1) * 32);
  rows.indices.upload(bad.data(), bad.size() * sizeof(int32_t));
  KC_ASSERT_OK(sparse_prefill(w->plan, p.device_q(), p.device_kv(), params, rows.view(true, IndexGranularity::kPerKvGroup),
                              nullptr, out, w->workspace.data(), nullptr));
  auto errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, uint32_t{kErrorIndex}) << describe_prefill_errors(*errors);

  // A head map entry outside [0, num_rows).
  rows.indices.upload(host_indices.data(), host_indices.size() * sizeof(int32_t));
  DeviceBuffer map = testing::upload_vector(std::vector<int32_t>{0, 2});
  KC_ASSERT_OK(sparse_prefill(w->plan, p.device_q(), p.device_kv(), params, rows.view(true, IndexGranularity::kPerKvGroup),
                              map.as<int32_t>(), out, w->workspace.data(), nullptr));
  errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, uint32_t{kErrorHeadMap}) << describe_prefill_errors(*errors);

  // tile_base that gives the sequence one tile too few.
  std::vector<int32_t> tile_base = rows.plan.tile_base;
  tile_base[1] -= 1;
  rows.tile_base.upload(tile_base.data(), tile_base.size() * sizeof(int32_t));
  KC_ASSERT_OK(sparse_prefill(w->plan, p.device_q(), p.device_kv(), params, rows.view(true, IndexGranularity::kPerKvGroup),
                              nullptr, out, w->workspace.data(), nullptr));
  errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, uint32_t{kPrefillErrorTileBase}) << describe_prefill_errors(*errors);
}

TEST(SparsePrefill, BadRowsSetTheErrorWord) {
  KC_SKIP_WITHOUT_GPU();
  expect_bad_rows_reported(PrefillVariant::kMma);
}

TEST(SparsePrefill, WarpSpecializedBadRowsSetTheErrorWord) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_bad_rows_reported(PrefillVariant::kWarpSpecialized);
}

}  // namespace
}  // namespace kascade::cuda
