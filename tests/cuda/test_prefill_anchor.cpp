// tests/cuda/test_prefill_anchor.cpp — anchor prefill (src/cuda/prefill/prefill_ops.h:
// anchor_prefill): selection followed by the layer's own output.
//   - layer 0 (AnchorOutput::kDense): o/lse against ref::dense_attention_ref and the fp64
//     recomputation, with and without a caller lse buffer; rows against ref pooling + Top-k;
//   - other anchors (kSparse): rows as above; o/lse against ref::sparse_prefill_ref over the rows the
//     GPU selected and the fp64 recomputation, identity and permuted head maps;
//   - tile-aligned rolling chunked prefill equals one-shot prefill exactly: the same rows per tile
//     and the same o/lse bits, for both output forms.
// Awkward lengths in varlen batches; outputs NaN-poisoned with guards; error word clear. The wgmma
// variant and the warp-specialised kernels (PrefillKernels::kWarpSpecialized[Tma]: dense / LSE pass,
// sparse output over gathered keys, and — on contiguous K/V or 128-key pages, the WarpSpecializedTma*
// tests with a page size — the pooled-score kernel with the TMA producer) run on sm_90 devices; the
// tests on default options run the automatic choice (PrefillKernels::kAuto).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

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

constexpr double kScoreEps = 2e-4;


struct AnchorRun {
  std::vector<float> o, lse;
  std::vector<int32_t> indices;
};

// anchor_prefill on device views q/kv (the problem's, or a chunk's) with rows planned for
// (q_lens, kv_lens); lse_out = false passes out.lse = null.
AnchorRun run_anchor(const PrefillPlan& plan, void* workspace, const QueryBatch& q, const PagedKv& kv, float scale,
                     PrefillRowsOnDevice& rows, AnchorOutput output, const int32_t* head_map, bool lse_out = true) {
  AnchorRun run;
  const size_t q_rows = size_t(q.total_q) * q.num_heads;
  DeviceBuffer o(q_rows * q.head_dim * dtype_size(q.dtype)), lse(q_rows * sizeof(float));
  AttentionParams params;
  params.scale = scale;
  ScorePooling pooling;
  pooling.num_rows = rows.plan.num_rows;
  const Status s = anchor_prefill(plan, q, kv, params, pooling, rows.view(true, IndexGranularity::kPerKvGroup), output,
                                  head_map, {o.data(), q.dtype, lse_out ? lse.as<float>() : nullptr}, workspace, nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  auto errors = read_prefill_errors(plan, workspace, nullptr);
  EXPECT_TRUE(errors.ok());
  if (errors.ok()) {
    EXPECT_EQ(*errors, 0u) << describe_prefill_errors(*errors);
  }
  EXPECT_TRUE(o.guards_intact());
  EXPECT_TRUE(lse.guards_intact());
  EXPECT_TRUE(rows.indices.guards_intact());
  run.o = testing::to_floats(o.download(), q.dtype);
  run.lse = lse.download_as<float>();
  run.indices = rows.download_indices();
  return run;
}

PrefillCase batch_case(DType dtype, int h, int g, int d, int32_t page_size = 16) {
  PrefillCase c;
  c.page_size = page_size;
  c.dtype = dtype;
  c.num_heads = h;
  c.num_kv_heads = g;
  c.head_dim = d;
  for (int n : testing::awkward_lengths()) {
    if (n <= 1000) {
      c.q_lens.push_back(n);
      c.kv_lens.push_back(n);
    }
  }
  c.q_lens.push_back(64);  // a later chunk of a longer sequence
  c.kv_lens.push_back(1024);
  return c;
}

void expect_layer_zero_matches(PrefillVariant variant, int32_t page_size = 16) {
  for (const bool lse_out : {true, false}) {
    SCOPED_TRACE(lse_out ? "caller lse" : "no caller lse");
    auto rng = testing::rng_for_test(lse_out);
    const PrefillProblem p(batch_case(lse_out ? DType::kF16 : DType::kBF16, 8, 2, lse_out ? 128 : 64, page_size), rng);
    const PrefillCase& c = p.spec();
    PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, c.num_kv_heads, testing::small_prefill_budget(), true);
    auto w = testing::make_prefill_workspace(p.shape(), testing::variant_options(variant));
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const AnchorRun run = run_anchor(w->plan, w->workspace.data(), p.device_q(), p.device_kv(), p.scale(), rows,
                                     AnchorOutput::kDense, nullptr, lse_out);
    EXPECT_TRUE(testing::check_selected_rows(p, rows.plan, run.indices, false, kScoreEps));
    const testing::PrefillReference r = testing::recompute_prefill(p, testing::dense_keys(p));
    if (lse_out) {
      EXPECT_TRUE(testing::check_prefill_attention(p, r, run.o, run.lse));
    } else {  // o only: the lse buffer must be untouched (still NaN)
      EXPECT_EQ(testing::count_nan(run.lse), static_cast<int64_t>(run.lse.size()));
      std::vector<float> lse64(r.lse64.begin(), r.lse64.end());
      EXPECT_TRUE(testing::check_prefill_attention(p, r, run.o, lse64));
    }
  }
}

TEST(AnchorPrefill, LayerZeroDenseOutput) {
  KC_SKIP_WITHOUT_GPU();
  expect_layer_zero_matches(PrefillVariant::kMma);
}

// Layer 0 with the warp-specialised dense kernel (its LSE feeds the pooling).
TEST(AnchorPrefill, WarpSpecializedLayerZeroDenseOutput) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_layer_zero_matches(PrefillVariant::kWarpSpecialized);
}

TEST(AnchorPrefill, WarpSpecializedTmaLayerZeroDenseOutput) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  expect_layer_zero_matches(PrefillVariant::kWarpSpecializedTma);
}

void expect_sparse_anchor_matches(bool permuted, PrefillVariant variant, int32_t page_size = 16);

// Layer 0 with the warp-specialised dense kernel and pooled-score kernel (TMA-readable layouts).
TEST(AnchorPrefill, WarpSpecializedTmaLayerZeroOn128KeyPagesAndContiguous) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {128, 0}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_layer_zero_matches(PrefillVariant::kWarpSpecializedTma, page_size);
  }
}

// Other anchors entirely on the warp-specialised kernels: LSE pass, pooled scores (TMA-readable
// layouts) and the sparse output over the fresh rows; 16-key pages keep the pooling on mma.sync.
TEST(AnchorPrefill, WarpSpecializedTmaSparseOutputOverFreshRows) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {128, 0, 16}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_sparse_anchor_matches(/*permuted=*/page_size != 0, PrefillVariant::kWarpSpecializedTma, page_size);
  }
}

// The automatic choice on the same layouts.
TEST(AnchorPrefill, AutoSparseOutputOverFreshRows_ws) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {128, 16}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_sparse_anchor_matches(/*permuted=*/true, PrefillVariant::kAuto, page_size);
  }
}

TEST(AnchorPrefill, SparseOutputOverFreshRows) {
  KC_SKIP_WITHOUT_GPU();
  for (const bool permuted : {false, true}) {
    SCOPED_TRACE(permuted ? "permuted head map" : "identity");
    expect_sparse_anchor_matches(permuted, PrefillVariant::kMma);
  }
}

TEST(AnchorPrefill, WgmmaSparseOutputOverFreshRows) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWgmma);
  expect_sparse_anchor_matches(/*permuted=*/true, PrefillVariant::kWgmma);
}

// Other anchors with the warp-specialised LSE pass.
TEST(AnchorPrefill, WarpSpecializedSparseOutputOverFreshRows) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_sparse_anchor_matches(/*permuted=*/true, PrefillVariant::kWarpSpecialized);
}

void expect_sparse_anchor_matches(bool permuted, PrefillVariant variant, int32_t page_size) {
  {
    auto rng = testing::rng_for_test(permuted);
    const PrefillProblem p(batch_case(permuted ? DType::kBF16 : DType::kF16, 16, 4, permuted ? 64 : 128, page_size),
                           rng);
    const PrefillCase& c = p.spec();
    PrefillRowsOnDevice rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, c.num_kv_heads, testing::small_prefill_budget(), true);
    std::vector<int32_t> head_map;
    DeviceBuffer head_map_d;
    if (permuted) {
      head_map = {2, 0, 3, 1};
      head_map_d = testing::upload_vector(head_map);
    }
    PrefillPlanOptions options = testing::variant_options(variant);
    options.tiles_in_flight = 7;
    auto w = testing::make_prefill_workspace(p.shape(), options);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const AnchorRun run = run_anchor(w->plan, w->workspace.data(), p.device_q(), p.device_kv(), p.scale(), rows,
                                     AnchorOutput::kSparse, permuted ? head_map_d.as<int32_t>() : nullptr);
    EXPECT_TRUE(testing::check_selected_rows(p, rows.plan, run.indices, false, kScoreEps));

    const testing::PrefillReference r = testing::recompute_prefill(
        p, testing::sparse_keys(p, rows.plan, run.indices, true, IndexGranularity::kPerKvGroup, head_map));
    EXPECT_TRUE(testing::check_prefill_attention(p, r, run.o, run.lse));
    ref::PrefillIndexSet host_rows;
    host_rows.plan = rows.plan;
    host_rows.indices = run.indices;
    const size_t q_rows = size_t(p.total_q()) * c.num_heads;
    std::vector<float> ref_o(q_rows * c.head_dim), ref_lse(q_rows);
    AttentionParams params;
    params.scale = p.scale();
    KC_ASSERT_OK(ref::sparse_prefill_ref(p.host_q(), p.host_kv(), params,
                                         host_rows.view(true, IndexGranularity::kPerKvGroup),
                                         head_map.empty() ? nullptr : head_map.data(),
                                         {ref_o.data(), DType::kF32, ref_lse.data()}));
    EXPECT_TRUE(testing::all_close(run.o, ref_o, {p.total_q(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
    EXPECT_TRUE(testing::all_close(run.lse, ref_lse, {p.total_q(), c.num_heads}, {1e-4, 1e-5}));
  }
}

// Rolling chunked prefill in multiples of the tile equals one-shot prefill exactly (DESIGN.md §2.3).
void expect_chunks_equal_one_shot(PrefillVariant variant, int32_t page_size = 16) {
  for (const AnchorOutput output : {AnchorOutput::kSparse, AnchorOutput::kDense}) {
    SCOPED_TRACE(output == AnchorOutput::kSparse ? "sparse output" : "dense output");
    auto rng = testing::rng_for_test(static_cast<uint64_t>(output));
    const PrefillCase c = testing::make_prefill_case(DType::kF16, 8, 2, 128, {1000}, {1000}, page_size);
    const PrefillProblem p(c, rng);
    PrefillPlanOptions options = testing::variant_options(variant);
    options.tiles_in_flight = 4;
    auto w = testing::make_prefill_workspace(p.shape(), options);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    PrefillRowsOnDevice full_rows = testing::plan_rows_on_device(c.q_lens, c.kv_lens, 32, 2, Budget{}, true);
    const AnchorRun full =
        run_anchor(w->plan, w->workspace.data(), p.device_q(), p.device_kv(), p.scale(), full_rows, output, nullptr);
    const size_t row_elems = size_t(c.num_heads) * c.head_dim;
    const std::vector<int32_t> cuts = {0, 64, 320, 352, 960, 1000};
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int32_t c0 = cuts[k], c1 = cuts[k + 1];
      SCOPED_TRACE("chunk [" + std::to_string(c0) + ", " + std::to_string(c1) + ")");
      const PrefillProblem::Chunk chunk = p.chunk(c0, c1);
      PrefillRowsOnDevice rows = testing::plan_rows_on_device({c1 - c0}, {c1}, 32, 2, Budget{}, true);
      const AnchorRun part = run_anchor(w->plan, w->workspace.data(), chunk.q, chunk.kv, p.scale(), rows, output, nullptr);
      // rows: slot s of the chunk is slot c0/32 + s of the one-shot call
      for (int32_t slot = 0; slot < rows.plan.num_slots(); ++slot) {
        for (int32_t r = 0; r < 2; ++r) {
          const int64_t row = int64_t{slot} * 2 + r, full_row = int64_t{c0 / 32 + slot} * 2 + r;
          const std::vector<int32_t> a(part.indices.begin() + rows.plan.row_offsets[row],
                                       part.indices.begin() + rows.plan.row_offsets[row + 1]);
          const std::vector<int32_t> b(full.indices.begin() + full_rows.plan.row_offsets[full_row],
                                       full.indices.begin() + full_rows.plan.row_offsets[full_row + 1]);
          ASSERT_EQ(a, b) << "tile " << c0 / 32 + slot << " row " << r;
        }
      }
      for (size_t i = 0; i < part.o.size(); ++i) ASSERT_EQ(part.o[i], full.o[size_t(c0) * row_elems + i]) << "o " << i;
      for (size_t i = 0; i < part.lse.size(); ++i) {
        ASSERT_EQ(part.lse[i], full.lse[size_t(c0) * c.num_heads + i]) << "lse " << i;
      }
    }
  }
}

TEST(AnchorPrefill, TileAlignedChunksEqualOneShot) {
  KC_SKIP_WITHOUT_GPU();
  expect_chunks_equal_one_shot(PrefillVariant::kMma);
}

TEST(AnchorPrefill, WgmmaTileAlignedChunksEqualOneShot) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWgmma);
  expect_chunks_equal_one_shot(PrefillVariant::kWgmma);
}

TEST(AnchorPrefill, WarpSpecializedTileAlignedChunksEqualOneShot) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecialized);
  expect_chunks_equal_one_shot(PrefillVariant::kWarpSpecialized);
}

TEST(AnchorPrefill, WarpSpecializedTmaTileAlignedChunksEqualOneShot) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  expect_chunks_equal_one_shot(PrefillVariant::kWarpSpecializedTma);
}

// The same with the warp-specialised pooled-score kernel (TMA-readable layouts) and gathered sparse output.
TEST(AnchorPrefill, WarpSpecializedTmaTileAlignedChunksEqualOneShotOnTmaLayouts) {
  KC_SKIP_WITHOUT_VARIANT(PrefillVariant::kWarpSpecializedTma);
  for (const int32_t page_size : {128, 0}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    expect_chunks_equal_one_shot(PrefillVariant::kWarpSpecializedTma, page_size);
  }
}

}  // namespace
}  // namespace kascade::cuda
