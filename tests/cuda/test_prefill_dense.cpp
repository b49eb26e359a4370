// tests/cuda/test_prefill_dense.cpp — dense causal prefill (src/cuda/prefill/prefill_ops.h:
// dense_prefill) and the anchor's LSE pass (prefill_stages.h: prefill_lse) against
// ref::dense_attention_ref and an fp64 recomputation (FA3 rule), over f16/bf16, head dims 64/128,
// GQA group sizes 1, 2, 3, 4 and 8, paged (shuffled pages, several page sizes) and contiguous K/V,
// varlen batches holding the awkward lengths of DESIGN.md §4 both as one-shot prompts and as later
// chunks of longer sequences, plus one 4097-key prompt. Outputs are NaN-poisoned with canary
// guards; the device error word must stay clear. Chunked prefill in tile multiples must equal the
// one-shot call bit for bit. Every check runs for each kernel family a plan can select
// (testing::PrefillVariant, PrefillPlanOptions::kernels): mma.sync, wgmma and the warp-specialised
// sm_90a mainloop with its cp.async or TMA K/V producer (the sm_90a ones skip off Hopper), and the
// default automatic choice (TMA producer on Hopper for contiguous K/V and 128 / 256-key pages,
// mma.sync for the smaller pages and off Hopper).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"
#include "cuda/prefill/prefill_stages.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "test_prefill_problem.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using testing::DeviceBuffer;
using testing::PrefillCase;
using testing::PrefillProblem;

using testing::PrefillVariant;

struct DenseResult {
  std::vector<float> o, lse;
};

// Runs dense_prefill (or, with lse_only, prefill_lse) on the problem's device views with the
// kernels of `variant`.
DenseResult run_dense(const PrefillProblem& p, PrefillVariant variant, bool lse_only = false) {
  DenseResult result;
  auto w = testing::make_prefill_workspace(p.shape(), testing::variant_options(variant));
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return result;
  const PrefillCase& c = p.spec();
  const size_t rows = size_t(p.total_q()) * c.num_heads;
  DeviceBuffer o(std::max<size_t>(1, rows * c.head_dim * dtype_size(c.dtype))), lse(std::max<size_t>(1, rows) * 4);
  AttentionParams params;
  params.scale = p.scale();
  if (lse_only) {
    EXPECT_TRUE(prefill_lse(w->plan, p.device_q(), p.device_kv(), params, lse.as<float>(), w->workspace.data(), nullptr)
                    .ok());
  } else {
    const AttentionOutput out{o.data(), c.dtype, lse.as<float>()};
    const Status s = dense_prefill(w->plan, p.device_q(), p.device_kv(), params, out, w->workspace.data(), nullptr);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  testing::expect_no_prefill_errors(w->plan, w->workspace.data());
  EXPECT_TRUE(o.guards_intact());
  EXPECT_TRUE(lse.guards_intact());
  result.o = testing::to_floats(o.download(), c.dtype);
  result.o.resize(rows * c.head_dim);
  result.lse = lse.download_as<float>();
  result.lse.resize(rows);
  return result;
}

// Checks a dense result against the fp64 recomputation (FA3 rule) and against src/ref.
void expect_dense_matches(const PrefillProblem& p, const DenseResult& got) {
  const PrefillCase& c = p.spec();
  const testing::PrefillReference r = testing::recompute_prefill(p, testing::dense_keys(p));
  EXPECT_TRUE(testing::check_prefill_attention(p, r, got.o, got.lse));
  const size_t rows = size_t(p.total_q()) * c.num_heads;
  std::vector<float> ref_o(rows * c.head_dim), ref_lse(rows);
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(ref::dense_attention_ref(p.host_q(), p.host_kv(), params, {ref_o.data(), DType::kF32, ref_lse.data()}));
  EXPECT_TRUE(testing::all_close(got.o, ref_o, {p.total_q(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
  EXPECT_TRUE(testing::all_close(got.lse, ref_lse, {p.total_q(), c.num_heads}, {1e-4, 1e-5}));
}

// The LSE-only pass gives the dense kernel's LSE (within the reference tolerance).
void expect_lse_pass_matches(const PrefillProblem& p, PrefillVariant variant) {
  const DenseResult got = run_dense(p, variant, /*lse_only=*/true);
  const testing::PrefillReference r = testing::recompute_prefill(p, testing::dense_keys(p));
  ASSERT_EQ(got.lse.size(), r.lse64.size());
  for (size_t i = 0; i < got.lse.size(); ++i) {
    ASSERT_NEAR(got.lse[i], r.lse64[i], 1e-4 + 1e-5 * std::fabs(r.lse64[i])) << "row " << i;
  }
}

// The fp64 / naive recomputation the GPU checks rely on agrees with src/ref, and the rule rejects a
// perturbed output (host only: runs without a GPU).
TEST(DensePrefillReference, RecomputationMatchesSrcRefAndRejectsPerturbation) {
  auto rng = testing::rng_for_test();
  const PrefillProblem p(testing::make_prefill_case(DType::kBF16, 8, 2, 64, {33, 1, 0}, {100, 1, 20}), rng);
  const PrefillCase& c = p.spec();
  const size_t rows = size_t(p.total_q()) * c.num_heads;
  std::vector<float> ref_o(rows * c.head_dim), ref_lse(rows);
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(ref::dense_attention_ref(p.host_q(), p.host_kv(), params, {ref_o.data(), DType::kF32, ref_lse.data()}));
  const testing::PrefillReference r = testing::recompute_prefill(p, testing::dense_keys(p));
  for (size_t i = 0; i < rows; ++i) ASSERT_NEAR(r.lse64[i], ref_lse[i], 1e-4 + 1e-5 * std::fabs(ref_lse[i])) << i;
  std::vector<float> o(r.o64.begin(), r.o64.end()), lse(r.lse64.begin(), r.lse64.end());
  for (float& x : o) x = round_to_dtype(x, c.dtype);
  EXPECT_TRUE(testing::check_prefill_attention(p, r, o, lse));
  EXPECT_TRUE(testing::all_close(o, ref_o, {p.total_q(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
  o[5] += 0.25f;
  EXPECT_FALSE(testing::check_prefill_attention(p, r, o, lse));
  o[5] -= 0.25f;
  lse[3] += 0.01f;
  EXPECT_FALSE(testing::check_prefill_attention(p, r, o, lse));
}

std::string variant_param_name(const ::testing::TestParamInfo<PrefillVariant>& info) {
  switch (info.param) {
    case PrefillVariant::kMma:
      return "mma";
    case PrefillVariant::kWgmma:
      return "wgmma";
    case PrefillVariant::kWarpSpecialized:
      return "ws";
    case PrefillVariant::kWarpSpecializedTma:
      return "ws_tma";
    case PrefillVariant::kAuto:
      return "auto";
  }
  return "unknown";
}

// (shape configuration, kernel variant)
using DenseParam = std::tuple<testing::PrefillConfig, PrefillVariant>;

std::string dense_param_name(const ::testing::TestParamInfo<DenseParam>& info) {
  const PrefillVariant variant = std::get<1>(info.param);
  const std::string shape = testing::prefill_config_name({std::get<0>(info.param), info.index});
  return shape + "_" + variant_param_name({variant, 0});
}

class DensePrefillTest : public ::testing::TestWithParam<DenseParam> {
 protected:
  PrefillVariant variant() const { return std::get<1>(GetParam()); }
  PrefillCase make_case(std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens) const {
    const auto [dtype, h, g, d, page] = std::get<0>(GetParam());
    return testing::make_prefill_case(dtype, h, g, d, std::move(q_lens), std::move(kv_lens), page);
  }
};

// Every awkward length up to 1000 as a one-shot prompt, in one varlen batch.
TEST_P(DensePrefillTest, AwkwardLengthsOneShotInOneBatch) {
  KC_SKIP_WITHOUT_VARIANT(variant());
  auto rng = testing::rng_for_test();
  const std::vector<int32_t> lens = testing::awkward_lengths_up_to(1000);
  const PrefillProblem p(make_case(lens, lens), rng);
  expect_dense_matches(p, run_dense(p, variant()));
}

// Later chunks of longer sequences (q_len < kv_len), unaligned and aligned, mixed with a decode-like
// single query and a sequence with no queries in this call.
TEST_P(DensePrefillTest, ChunksOfLongerSequences) {
  KC_SKIP_WITHOUT_VARIANT(variant());
  auto rng = testing::rng_for_test();
  const PrefillProblem p(make_case({33, 1, 31, 0, 127, 129, 64}, {1000, 4097, 32, 17, 129, 1000, 96}), rng);
  expect_dense_matches(p, run_dense(p, variant()));
}

TEST_P(DensePrefillTest, LsePassMatchesReference) {
  KC_SKIP_WITHOUT_VARIANT(variant());
  auto rng = testing::rng_for_test();
  expect_lse_pass_matches(PrefillProblem(make_case({129, 31, 1, 0}, {129, 1000, 33, 50}), rng), variant());
}

// g = 1, 2, 3, 4, 8; paged with pages of 16, 32, 64 (per-key block-table lookups in the
// warp-specialised producer; mma.sync in the auto variant) and 128 / 256 (one lookup per 128-key
// tile; TMA tiles in the ws_tma variant and, on Hopper, the auto one), and contiguous (page 0: one
// page per sequence; likewise TMA tiles in the ws_tma and auto variants).
INSTANTIATE_TEST_SUITE_P(
    Shapes, DensePrefillTest,
    ::testing::Combine(::testing::Values(testing::PrefillConfig{DType::kF16, 8, 8, 128, 16},
                                         testing::PrefillConfig{DType::kBF16, 8, 4, 64, 16},
                                         testing::PrefillConfig{DType::kF16, 12, 4, 64, 0},
                                         testing::PrefillConfig{DType::kBF16, 16, 4, 128, 32},
                                         testing::PrefillConfig{DType::kF16, 16, 2, 128, 64},
                                         testing::PrefillConfig{DType::kBF16, 8, 1, 64, 16},
                                         testing::PrefillConfig{DType::kBF16, 16, 2, 128, 128},
                                         testing::PrefillConfig{DType::kF16, 8, 8, 64, 0},
                                         testing::PrefillConfig{DType::kBF16, 8, 2, 128, 256}),
                       ::testing::Values(PrefillVariant::kMma, PrefillVariant::kWgmma,
                                         PrefillVariant::kWarpSpecialized, PrefillVariant::kWarpSpecializedTma,
                                         PrefillVariant::kAuto)),
    dense_param_name);

class DensePrefillVariantTest : public ::testing::TestWithParam<PrefillVariant> {};



// The longest awkward length as one prompt (f16, d = 128, g = 4 contiguous; bf16, d = 64, g = 2 paged).
TEST_P(DensePrefillVariantTest, LongPrompt4097) {
  KC_SKIP_WITHOUT_VARIANT(GetParam());
  for (const auto& [dtype, h, g, d, page] :
       {std::tuple{DType::kF16, 4, 1, 128, 0}, std::tuple{DType::kBF16, 4, 2, 64, 16}}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto rng = testing::rng_for_test(static_cast<uint64_t>(d));
    const PrefillProblem p(testing::make_prefill_case(dtype, h, g, d, {4097}, {4097}, page), rng);
    expect_dense_matches(p, run_dense(p, GetParam()));
  }
}

// Chunked prefill in multiples of the tile (and of nothing larger) equals the one-shot call exactly:
// a row's result does not depend on which other rows share its CTA.
TEST_P(DensePrefillVariantTest, ChunkedEqualsOneShotBitForBit) {
  KC_SKIP_WITHOUT_VARIANT(GetParam());
  auto rng = testing::rng_for_test();
  // g = 3: row blocks of 128 rows straddle queries; 128-key pages for the TMA producer (its TMA
  // tiles and cp.async tail tiles; the automatic choice takes it on Hopper), 16-key pages otherwise
  const bool tma = GetParam() == PrefillVariant::kWarpSpecializedTma || GetParam() == PrefillVariant::kAuto;
  const int32_t page = tma ? 128 : 16;
  const PrefillCase c = testing::make_prefill_case(DType::kBF16, 12, 4, 128, {1000}, {1000}, page);
  const PrefillProblem p(c, rng);
  const DenseResult full = run_dense(p, GetParam());
  auto w = testing::make_prefill_workspace(p.shape(), testing::variant_options(GetParam()));
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  AttentionParams params;
  params.scale = p.scale();
  const size_t row_elems = size_t(c.num_heads) * c.head_dim;
  for (const std::vector<int32_t>& cuts : {std::vector<int32_t>{0, 32, 96, 480, 1000}, std::vector<int32_t>{0, 992, 1000}}) {
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int32_t c0 = cuts[k], c1 = cuts[k + 1];
      SCOPED_TRACE("chunk [" + std::to_string(c0) + ", " + std::to_string(c1) + ")");
      const PrefillProblem::Chunk chunk = p.chunk(c0, c1);
      DeviceBuffer o(size_t(c1 - c0) * row_elems * 2), lse(size_t(c1 - c0) * c.num_heads * 4);
      KC_ASSERT_OK(dense_prefill(w->plan, chunk.q, chunk.kv, params, {o.data(), c.dtype, lse.as<float>()},
                                 w->workspace.data(), nullptr));
      const std::vector<float> got_o = testing::to_floats(o.download(), c.dtype);
      const std::vector<float> got_lse = lse.download_as<float>();
      for (size_t i = 0; i < got_o.size(); ++i) {
        ASSERT_EQ(got_o[i], full.o[size_t(c0) * row_elems + i]) << "o element " << i;
      }
      for (size_t i = 0; i < got_lse.size(); ++i) {
        ASSERT_EQ(got_lse[i], full.lse[size_t(c0) * c.num_heads + i]) << "lse element " << i;
      }
    }
  }
  testing::expect_no_prefill_errors(w->plan, w->workspace.data());
}

// The persistent grid of the warp-specialised kernel walks more units than it has CTAs and varlen
// sequences of very different lengths (every CTA takes several units of several sequences).
TEST_P(DensePrefillVariantTest, ManyUnitsPerCta) {
  KC_SKIP_WITHOUT_VARIANT(GetParam());
  auto rng = testing::rng_for_test();
  const PrefillProblem p(
      testing::make_prefill_case(DType::kF16, 32, 8, 64, {2000, 1, 700, 129, 1500}, {2000, 40, 3000, 129, 1500}, 32),
      rng);
  expect_dense_matches(p, run_dense(p, GetParam()));
}

// Lengths past the plan's limits set the error word (and skip the sequence) instead of reading
// outside the plan's buffers.
TEST_P(DensePrefillVariantTest, LengthsPastThePlanSetTheErrorWord) {
  KC_SKIP_WITHOUT_VARIANT(GetParam());
  auto rng = testing::rng_for_test();
  const PrefillCase c = testing::make_prefill_case(DType::kF16, 4, 2, 64, {100}, {200});
  const PrefillProblem p(c, rng);
  AttentionParams params;
  params.scale = p.scale();
  DeviceBuffer o(size_t(100) * 4 * 64 * 2), lse(size_t(100) * 4 * 4);
  for (const auto& [max_q_len, max_kv_len, bit] :
       {std::tuple{50, 200, uint32_t{kPrefillErrorQueries}}, std::tuple{100, 150, uint32_t{kErrorKvLen}}}) {
    PrefillShape shape = p.shape();
    shape.max_q_len = max_q_len;
    shape.max_kv_len = max_kv_len;
    PrefillPlanOptions options = testing::variant_options(GetParam());
    options.selection = false;
    auto w = testing::make_prefill_workspace(shape, options);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    KC_ASSERT_OK(dense_prefill(w->plan, p.device_q(), p.device_kv(), params, {o.data(), c.dtype, lse.as<float>()},
                               w->workspace.data(), nullptr));
    auto errors = read_prefill_errors(w->plan, w->workspace.data(), nullptr);
    ASSERT_TRUE(errors.ok());
    EXPECT_EQ(*errors, bit) << describe_prefill_errors(*errors);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, DensePrefillVariantTest,
                         ::testing::Values(PrefillVariant::kMma, PrefillVariant::kWgmma,
                                           PrefillVariant::kWarpSpecialized, PrefillVariant::kWarpSpecializedTma,
                                           PrefillVariant::kAuto),
                         variant_param_name);

}  // namespace
}  // namespace kascade::cuda
