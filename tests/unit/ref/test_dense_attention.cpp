// test_dense_attention.cpp — dense_attention_ref (src/ref/attention_ref.h) against the fp64 and
// naive implementations of attention_problem.h (FA3 rule: error <= 2 x naive error + dtype atol),
// over f32 / f16 / bf16, head dims 8 / 64 / 128, GQA group sizes 1 / 4 / 8, page sizes 1 / 16 /
// contiguous, prefill, chunked prefill, decode and idle sequences; the awkward lengths of DESIGN.md
// §4; layout independence (shuffled pages equal contiguous, bit for bit); decode equal to the last
// query of a prefill; refusal of bad input without writing the output.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "attention_problem.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

using ref::dense_attention_ref;

// (dtype, head_dim, group size, page size; 0 = contiguous)
using SweepParam = std::tuple<DType, int32_t, int32_t, int32_t>;

class DenseAttentionSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(DenseAttentionSweep, MatchesFp64) {
  const auto [dtype, head_dim, group, page_size] = GetParam();
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.dtype = dtype;
  spec.head_dim = head_dim;
  spec.num_kv_heads = 2;
  spec.num_heads = 2 * group;
  spec.page_size = page_size;
  // decode, one-shot prefill, an idle sequence, a chunk whose start is not tile-aligned
  spec.q_lens = {1, 33, 0, 7};
  spec.kv_lens = {37, 33, 5, 70};
  const AttentionProblem problem(spec, rng);
  GuardedOutput out(problem, dtype);
  ASSERT_TRUE(dense_attention_ref(problem.queries(), problem.cache(), problem.params(), out.view()).ok());
  EXPECT_TRUE(matches_reference(problem, out, reference_outputs(problem, dtype, causal_keys(problem))));
}

std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& info) {
  const auto [dtype, head_dim, group, page_size] = info.param;
  return std::string(dtype_name(dtype)) + "_d" + std::to_string(head_dim) + "_g" + std::to_string(group) +
         (page_size ? "_page" + std::to_string(page_size) : std::string("_contiguous"));
}

INSTANTIATE_TEST_SUITE_P(AllShapes, DenseAttentionSweep,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                                            ::testing::Values(8, 64, 128), ::testing::Values(1, 4, 8),
                                            ::testing::Values(1, 16, 0)),
                         sweep_name);

TEST(DenseAttention, AwkwardLengths) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    ProblemSpec spec;
    spec.dtype = dtype;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_dim = 64;
    for (int n : awkward_lengths()) {
      spec.q_lens.push_back(1);  // decode at n
      spec.kv_lens.push_back(n);
      spec.q_lens.push_back(std::min(n, 24));  // the last (up to) 24 queries of a prefill of n
      spec.kv_lens.push_back(n);
    }
    const AttentionProblem problem(spec, rng);
    GuardedOutput out(problem, dtype);
    ASSERT_TRUE(dense_attention_ref(problem.queries(), problem.cache(), problem.params(), out.view()).ok());
    EXPECT_TRUE(matches_reference(problem, out, reference_outputs(problem, dtype, causal_keys(problem))));
  }
}

TEST(DenseAttention, OutputDtypeMayDifferFromInput) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.dtype = DType::kBF16;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.q_lens = {20, 1};
  spec.kv_lens = {100, 129};
  const AttentionProblem problem(spec, rng);
  for (DType out_dtype : {DType::kF32, DType::kF16}) {
    GuardedOutput out(problem, out_dtype);
    ASSERT_TRUE(dense_attention_ref(problem.queries(), problem.cache(), problem.params(), out.view()).ok());
    EXPECT_TRUE(matches_reference(problem, out, reference_outputs(problem, out_dtype, causal_keys(problem))))
        << dtype_name(out_dtype);
  }
}

TEST(DenseAttention, LseMayBeNull) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.q_lens = {5};
  spec.kv_lens = {50};
  const AttentionProblem problem(spec, rng);
  GuardedOutput with_lse(problem, DType::kF32), without_lse(problem, DType::kF32);
  AttentionOutput view = without_lse.view();
  view.lse = nullptr;
  ASSERT_TRUE(dense_attention_ref(problem.queries(), problem.cache(), problem.params(), with_lse.view()).ok());
  ASSERT_TRUE(dense_attention_ref(problem.queries(), problem.cache(), problem.params(), view).ok());
  EXPECT_TRUE(all_close(without_lse.o_as_float(), with_lse.o_as_float(), {problem.o_size()}, {0.0, 0.0}));
  EXPECT_EQ(count_nan(without_lse.lse.span()), problem.lse_size());  // untouched
  EXPECT_TRUE(without_lse.intact());
}

// The result must not depend on where the pages live: the same keys in the same order give the
// same bits, whatever the page size or page order.
TEST(DenseAttention, PagedLayoutEqualsContiguous) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.dtype = DType::kBF16;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.page_size = 0;
  spec.q_lens = {40, 1, 3};
  spec.kv_lens = {40, 300, 129};
  const AttentionProblem contiguous(spec, rng);
  GuardedOutput expected(contiguous, DType::kF32);
  ASSERT_TRUE(dense_attention_ref(contiguous.queries(), contiguous.cache(), contiguous.params(), expected.view()).ok());
  for (auto [page_size, shuffle] : {std::pair{1, true}, std::pair{16, true}, std::pair{16, false}, std::pair{7, true}}) {
    const AttentionProblem paged = contiguous.with_layout(page_size, shuffle, rng);
    GuardedOutput got(paged, DType::kF32);
    ASSERT_TRUE(dense_attention_ref(paged.queries(), paged.cache(), paged.params(), got.view()).ok());
    EXPECT_TRUE(all_close(got.o_as_float(), expected.o_as_float(), {paged.o_size()}, {0.0, 0.0}))
        << "page size " << page_size;
    EXPECT_TRUE(all_close(got.lse.span(), expected.lse.span(), {paged.lse_size()}, {0.0, 0.0}));
    EXPECT_TRUE(got.intact());
  }
}

// A decode at kv_len n sees exactly what the last query of a prefill of n sees.
TEST(DenseAttention, DecodeEqualsLastQueryOfPrefill) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    ProblemSpec spec;
    spec.dtype = dtype;
    spec.num_heads = 8;
    spec.num_kv_heads = 2;
    spec.head_dim = 128;
    spec.q_lens = {97};
    spec.kv_lens = {97};
    const AttentionProblem prefill(spec, rng);
    GuardedOutput prefill_out(prefill, DType::kF32);
    ASSERT_TRUE(dense_attention_ref(prefill.queries(), prefill.cache(), prefill.params(), prefill_out.view()).ok());

    // The decode call: the same cache, only the last query.
    QueryBatch last = prefill.queries();
    const int32_t cu_last[2] = {0, 1};
    last.q = static_cast<const uint8_t*>(last.q) + static_cast<size_t>(96) * spec.num_heads * spec.head_dim *
                                                       dtype_size(dtype);
    last.total_q = 1;
    last.cu_q_lens = cu_last;
    std::vector<float> o(static_cast<size_t>(spec.num_heads) * spec.head_dim), lse(spec.num_heads);
    ASSERT_TRUE(dense_attention_ref(last, prefill.cache(), prefill.params(), {o.data(), DType::kF32, lse.data()}).ok());
    const std::vector<float> all = prefill_out.o_as_float();
    const std::vector<float> expected_o(all.end() - static_cast<int64_t>(o.size()), all.end());
    const std::vector<float> expected_lse(prefill_out.lse.span().end() - spec.num_heads, prefill_out.lse.span().end());
    EXPECT_TRUE(all_close(o, expected_o, {spec.num_heads, spec.head_dim}, tolerance_for(DType::kF32)));
    EXPECT_TRUE(all_close(lse, expected_lse, {spec.num_heads}, tolerance_for(DType::kF32)));
  }
}

TEST(DenseAttention, RefusesBadInputWithoutWriting) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.q_lens = {3};
  spec.kv_lens = {10};
  const AttentionProblem problem(spec, rng);
  GuardedOutput out(problem, DType::kF32);

  AttentionParams no_scale;  // scale 0: forgotten
  Status s = dense_attention_ref(problem.queries(), problem.cache(), no_scale, out.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("params.scale"), std::string::npos) << s.message();

  PagedKv short_kv = problem.cache();
  const int32_t too_short[1] = {2};
  short_kv.kv_lens = too_short;
  s = dense_attention_ref(problem.queries(), short_kv, problem.params(), out.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kv.kv_lens[0] = 2 is smaller than q_len 3"), std::string::npos) << s.message();

  AttentionOutput no_o = out.view();
  no_o.o = nullptr;
  s = dense_attention_ref(problem.queries(), problem.cache(), problem.params(), no_o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("out.o"), std::string::npos) << s.message();

  EXPECT_EQ(count_nan(out.lse.span()), problem.lse_size());
  EXPECT_EQ(count_nan(out.o_as_float()), problem.o_size());
  EXPECT_TRUE(out.intact());
}

}  // namespace
}  // namespace kascade::testing
