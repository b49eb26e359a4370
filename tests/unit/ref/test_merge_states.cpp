// test_merge_states.cpp — merge_states_ref (src/ref/attention_ref.h): hand-computed values; a state
// split over two disjoint key sets (computed with sparse_decode_ref) merges into the unsplit result
// and into the fp64 attention over the union; empty states (one or both, whatever o they hold);
// output aliasing input a; refusal of bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attention_problem.h"
#include "index_rows_builder.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

using ref::merge_states_ref;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(MergeStates, HandComputed) {
  // State a: denominator 1, o = (1, -2); state b: denominator 3, o = (5, 2).
  // Union: denominator 4, o = (1·1 + 5·3) / 4 = 4, (-2·1 + 2·3) / 4 = 1.
  const float o_a[2] = {1.0f, -2.0f}, o_b[2] = {5.0f, 2.0f};
  const float lse_a[1] = {0.0f}, lse_b[1] = {std::log(3.0f)};
  float o[2], lse[1];
  ASSERT_TRUE(merge_states_ref(o_a, lse_a, o_b, lse_b, 1, 2, o, lse).ok());
  EXPECT_NEAR(o[0], 4.0f, 1e-6);
  EXPECT_NEAR(o[1], 1.0f, 1e-6);
  EXPECT_NEAR(lse[0], std::log(4.0f), 1e-6);
}

// Keys of each decode row split at random into two disjoint halves, each attended sparsely, then
// merged: equal to the unsplit sparse result and to fp64 over the union.
TEST(MergeStates, SplitStateEqualsUnsplit) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    ProblemSpec spec;
    spec.dtype = dtype;
    spec.num_heads = 8;
    spec.num_kv_heads = 2;
    spec.head_dim = 128;
    spec.kv_lens = {1, 64, 333, 1000};
    spec.q_lens.assign(4, 1);
    const AttentionProblem p(spec, rng);
    std::vector<std::vector<std::vector<int32_t>>> whole(4), part_a(4), part_b(4);
    for (int32_t b = 0; b < 4; ++b) {
      for (int32_t r = 0; r < 2; ++r) {
        const auto set = random_subset(rng, 0, p.kv_len(b), std::min(p.kv_len(b), 200));
        const size_t cut = static_cast<size_t>(rng() % (set.size() + 1));  // may leave a part empty
        whole[b].push_back(set);
        part_a[b].emplace_back(set.begin(), set.begin() + static_cast<int64_t>(cut));
        part_b[b].emplace_back(set.begin() + static_cast<int64_t>(cut), set.end());
      }
    }
    DecodeRowsHolder rows_whole(whole, 200, IndexGranularity::kPerKvGroup);
    DecodeRowsHolder rows_a(part_a, 200, IndexGranularity::kPerKvGroup);
    DecodeRowsHolder rows_b(part_b, 200, IndexGranularity::kPerKvGroup);
    GuardedOutput out_whole(p, DType::kF32), out_a(p, DType::kF32), out_b(p, DType::kF32);
    ASSERT_TRUE(ref::sparse_decode_ref(p.queries(), p.cache(), p.params(), rows_whole.view(), nullptr, out_whole.view()).ok());
    ASSERT_TRUE(ref::sparse_decode_ref(p.queries(), p.cache(), p.params(), rows_a.view(), nullptr, out_a.view()).ok());
    ASSERT_TRUE(ref::sparse_decode_ref(p.queries(), p.cache(), p.params(), rows_b.view(), nullptr, out_b.view()).ok());

    GuardedOutput merged(p, DType::kF32);
    ASSERT_TRUE(merge_states_ref(reinterpret_cast<const float*>(out_a.o.data()), out_a.lse.data(),
                                 reinterpret_cast<const float*>(out_b.o.data()), out_b.lse.data(), p.lse_size(),
                                 p.dim(), reinterpret_cast<float*>(merged.o.data()), merged.lse.data())
                    .ok());
    EXPECT_TRUE(all_close(merged.o_as_float(), out_whole.o_as_float(), {p.lse_size(), p.dim()}, {2e-6, 1e-5}));
    EXPECT_TRUE(all_close(merged.lse.span(), out_whole.lse.span(), {p.lse_size()}, {2e-6, 1e-6}));
    EXPECT_TRUE(matches_reference(p, merged, reference_outputs(p, DType::kF32, rows_whole.keys(p, {}))));
  }
}

TEST(MergeStates, EmptyStatesContributeNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: a empty (holding garbage), b not; row 1: b empty; row 2: both empty.
  const float o_a[6] = {nan, nan, 0.25f, -1.5f, 7.0f, 7.0f};
  const float lse_a[3] = {kNegInf, 1.75f, kNegInf};
  const float o_b[6] = {0.5f, 3.0f, nan, nan, 7.0f, 7.0f};
  const float lse_b[3] = {-2.5f, kNegInf, kNegInf};
  GuardedBuffer<float> o(6), lse(3);
  ASSERT_TRUE(merge_states_ref(o_a, lse_a, o_b, lse_b, 3, 2, o.data(), lse.data()).ok());
  const std::vector<float> expected_o = {0.5f, 3.0f, 0.25f, -1.5f, 0.0f, 0.0f};
  const std::vector<float> expected_lse = {-2.5f, 1.75f, kNegInf};
  EXPECT_TRUE(all_close(o.span(), expected_o, {3, 2}, {0.0, 0.0}));
  EXPECT_TRUE(all_close(lse.span(), expected_lse, {3}, {0.0, 0.0}));
  EXPECT_TRUE(o.intact() && lse.intact());
}

TEST(MergeStates, OutputMayAliasFirstInput) {
  auto rng = rng_for_test();
  const int64_t rows = 5;
  const int32_t d = 64;
  std::vector<float> o_a = random_floats(rng, rows * d, -1, 1), o_b = random_floats(rng, rows * d, -1, 1);
  std::vector<float> lse_a = random_floats(rng, rows, -3, 3), lse_b = random_floats(rng, rows, -3, 3);
  lse_a[2] = kNegInf;
  std::vector<float> o_sep(rows * d), lse_sep(rows);
  ASSERT_TRUE(merge_states_ref(o_a.data(), lse_a.data(), o_b.data(), lse_b.data(), rows, d, o_sep.data(), lse_sep.data()).ok());
  ASSERT_TRUE(merge_states_ref(o_a.data(), lse_a.data(), o_b.data(), lse_b.data(), rows, d, o_a.data(), lse_a.data()).ok());
  EXPECT_TRUE(all_close(o_a, o_sep, {rows, d}, {0.0, 0.0}));
  EXPECT_TRUE(all_close(lse_a, lse_sep, {rows}, {0.0, 0.0}));
  // Row 2, where a is empty, is b exactly.
  for (int32_t c = 0; c < d; ++c) EXPECT_EQ(o_sep[2 * d + c], o_b[2 * d + c]);
  EXPECT_EQ(lse_sep[2], lse_b[2]);
}

TEST(MergeStates, MatchesFp64OnRandomStates) {
  auto rng = rng_for_test();
  const int64_t rows = 40;
  const int32_t d = 128;
  const std::vector<float> o_a = random_floats(rng, rows * d, -1, 1), o_b = random_floats(rng, rows * d, -1, 1);
  const std::vector<float> lse_a = random_floats(rng, rows, -20, 20), lse_b = random_floats(rng, rows, -20, 20);
  std::vector<float> o(rows * d), lse(rows);
  ASSERT_TRUE(merge_states_ref(o_a.data(), lse_a.data(), o_b.data(), lse_b.data(), rows, d, o.data(), lse.data()).ok());
  std::vector<float> o_ref(rows * d), lse_ref(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const double a = lse_a[r], b = lse_b[r], m = std::max(a, b);
    const double wa = std::exp(a - m), wb = std::exp(b - m);
    lse_ref[r] = static_cast<float>(m + std::log(wa + wb));
    for (int32_t c = 0; c < d; ++c) {
      o_ref[r * d + c] = static_cast<float>((o_a[r * d + c] * wa + o_b[r * d + c] * wb) / (wa + wb));
    }
  }
  EXPECT_TRUE(all_close(o, o_ref, {rows, d}, {1e-6, 1e-5}));
  EXPECT_TRUE(all_close(lse, lse_ref, {rows}, {1e-6, 1e-6}));
}

TEST(MergeStates, RefusesBadArguments) {
  float o[4] = {}, lse[2] = {};
  Status s = merge_states_ref(nullptr, lse, o, lse, 2, 2, o, lse);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("o_a is null"), std::string::npos) << s.message();
  s = merge_states_ref(o, lse, o, lse, 2, 0, o, lse);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("head_dim is 0"), std::string::npos) << s.message();
  s = merge_states_ref(o, lse, o, lse, -1, 2, o, lse);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rows is -1"), std::string::npos) << s.message();
  EXPECT_TRUE(merge_states_ref(nullptr, nullptr, nullptr, nullptr, 0, 2, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace kascade::testing
