// test_cpu_backend.cpp — the CPU backend's ops (src/policy/cpu_backend.cpp, cpu_select.cpp):
//   - memory: allocation, copies, refusals;
//   - select_decode for every pooling (per group sum, all heads sum, all heads max, per head)
//     against a full sort of the pooled scores (ties to the lower index), -1 padding, row_lens;
//   - select_prefill against a full sort of each tile's pooled scores, and the saturated tile
//     (k_t = s_t) selecting every candidate;
//   - anchor_decode / anchor_prefill (default composition) equal select + dense / sparse, with the
//     fast and with the reference kernels;
//   - bad requests (more indices than candidates, k_max too small, wrong row layout, several
//     queries in decode selection) refused with a Status naming the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "compose_ref.h"
#include "policy/cpu_backend.h"
#include "policy_fixture.h"
#include "ref/attention_ref.h"
#include "ref/prefill_rows.h"
#include "ref/scores_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

const std::vector<int32_t> kLens = {1, 31, 32, 33, 100, 129};

ProblemShape one_layer() {
  ProblemShape shape;
  shape.num_layers = 1;
  return shape;
}

// First k of the full ranking (score descending, index ascending), ascending.
std::vector<int32_t> full_sort_topk(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<int32_t> sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(CpuBackend, AllocatesAndCopies) {
  CpuBackend backend;
  EXPECT_STREQ(backend.name(), "cpu");
  auto buffer = backend.allocate(1000);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->bytes(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u);
  std::vector<uint8_t> in(1000), out(1000, 0);
  std::iota(in.begin(), in.end(), 0);
  ASSERT_TRUE(backend.copy_from_host(buffer->data(), in.data(), in.size()).ok());
  ASSERT_TRUE(backend.copy_to_host(out.data(), buffer->data(), out.size()).ok());
  EXPECT_EQ(in, out);
  BackendBuffer moved = std::move(buffer).value();
  EXPECT_EQ(moved.bytes(), 1000u);
  EXPECT_FALSE(backend.allocate(0).ok());
  EXPECT_FALSE(backend.copy_to_host(nullptr, in.data(), 4).ok());
  AttentionShape bad;
  bad.num_heads = 6;
  bad.num_kv_heads = 4;
  bad.head_dim = 32;
  EXPECT_FALSE(backend.supports(BackendOp::kDense, bad).ok());
}

TEST(CpuBackend, SelectDecodeIsExactTopKOfPooledScoresForEveryPooling) {
  auto rng = rng_for_test();
  const Problem problem(rng, one_layer(), kLens);
  const Call call = problem.decode_last();
  CpuBackend backend;
  AttentionParams params;
  params.scale = problem.scale();
  struct Case {
    int32_t rows;
    ScoreReduce reduce;
  };
  for (const Case c : {Case{2, ScoreReduce::kSum}, Case{1, ScoreReduce::kSum}, Case{1, ScoreReduce::kMax},
                       Case{8, ScoreReduce::kSum}}) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + (c.reduce == ScoreReduce::kMax ? " max" : " sum"));
    const int32_t stride = 129;
    std::vector<float> scores(static_cast<size_t>(call.batch()) * c.rows * stride);
    ref::PoolingSpec spec;
    spec.num_rows = c.rows;
    spec.reduce = c.reduce == ScoreReduce::kMax ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
    ASSERT_TRUE(ref::pooled_scores_decode_ref(problem.queries(call, 0), problem.kv(call, 0), params, spec,
                                              scores.data(), stride)
                    .ok());
    std::vector<int32_t> k(static_cast<size_t>(call.batch()));
    for (int32_t b = 0; b < call.batch(); ++b) k[b] = std::min(call.kv_lens[b], 5 + 3 * b);  // includes k = n
    const int32_t k_max = 25;
    GuardedBuffer<int32_t> indices(static_cast<size_t>(call.batch()) * c.rows * k_max);
    GuardedBuffer<int32_t> lens(static_cast<size_t>(call.batch()) * c.rows);
    DecodeIndexRows rows = decode_rows_view(indices.data(), lens.data(), call.batch(), c.rows, k_max);
    ScorePooling pooling;
    pooling.num_rows = c.rows;
    pooling.reduce = c.reduce;
    ASSERT_TRUE(backend.select_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows).ok());
    EXPECT_TRUE(indices.intact() && lens.intact());
    for (int32_t b = 0; b < call.batch(); ++b) {
      for (int32_t r = 0; r < c.rows; ++r) {
        const size_t row = static_cast<size_t>(b) * c.rows + r;
        ASSERT_EQ(lens.data()[row], k[b]);
        const int32_t* got = indices.data() + row * k_max;
        EXPECT_EQ(sorted(std::vector<int32_t>(got, got + k[b])),
                  full_sort_topk(scores.data() + row * stride, call.kv_lens[b], k[b]))
            << "b " << b << " row " << r;
        for (int32_t e = k[b]; e < k_max; ++e) EXPECT_EQ(got[e], -1) << "padding of b " << b;
      }
    }
  }
}

TEST(CpuBackend, SelectPrefillIsExactTopKOfEachTilesPooledScores) {
  auto rng = rng_for_test();
  const Problem problem(rng, one_layer(), kLens);
  CpuBackend backend;
  AttentionParams params;
  params.scale = problem.scale();
  Budget budget;
  budget.rho_ppm = 150000;
  budget.k_min = 6;
  for (const Call& call :
       {problem.prefill_all(), problem.call(ForwardMode::kPrefill, {0, 3, 31, 32, 50, 100}, kLens)}) {
    auto plan = ref::plan_prefill_rows(call.q_lens.data(), call.kv_lens.data(), call.batch(), 32, 2, budget, true);
    ASSERT_TRUE(plan.ok());
    ref::PrefillIndexSet set;
    set.plan = *plan;
    PrefillIndexRows rows = set.view(true, IndexGranularity::kPerKvGroup);
    ScorePooling pooling;
    pooling.num_rows = 2;
    ASSERT_TRUE(backend.select_prefill(problem.queries(call, 0), problem.kv(call, 0), params, pooling, rows).ok());
    for (int32_t b = 0; b < call.batch(); ++b) {
      for (int64_t t = plan->tile_first[b]; t <= (call.kv_lens[b] - 1) / 32; ++t) {
        const int64_t s_t = t * 32;
        std::vector<float> scores(static_cast<size_t>(2 * s_t) + 1);
        ref::PoolingSpec spec;
        spec.num_rows = 2;
        ASSERT_TRUE(ref::pooled_scores_prefill_tile_ref(problem.queries(call, 0), problem.kv(call, 0), params, spec, b,
                                                        t, 32, scores.data(), nullptr)
                        .ok());
        const int64_t k_t = tile_budget(s_t, call.kv_lens[b], budget, true);
        const int64_t slot = plan->tile_base[b] + (t - plan->tile_first[b]);
        for (int32_t r = 0; r < 2; ++r) {
          const int64_t row = slot * 2 + r;
          ASSERT_EQ(plan->row_offsets[row + 1] - plan->row_offsets[row], k_t);
          std::vector<int32_t> got(set.indices.begin() + plan->row_offsets[row],
                                   set.indices.begin() + plan->row_offsets[row + 1]);
          EXPECT_EQ(sorted(got), full_sort_topk(scores.data() + r * s_t, s_t, k_t)) << "b " << b << " tile " << t;
        }
      }
    }
  }
}

TEST(CpuBackend, AnchorOpsComposeSelectionAndOutput) {
  auto rng = rng_for_test();
  const Problem problem(rng, one_layer(), kLens);
  for (CpuKernels kernels : {CpuKernels::kFast, CpuKernels::kReference}) {
    SCOPED_TRACE(kernels == CpuKernels::kFast ? "fast kernels" : "reference kernels");
    CpuBackend backend(CpuBackendOptions{kernels});
    AttentionParams params;
    params.scale = problem.scale();
    const Call call = problem.decode_last();
    std::vector<int32_t> k(static_cast<size_t>(call.batch()));
    for (int32_t b = 0; b < call.batch(); ++b) k[b] = std::min(call.kv_lens[b], 9);
    const size_t out_size = static_cast<size_t>(call.total_q) * 8 * 32;
    for (AnchorOutput mode : {AnchorOutput::kDense, AnchorOutput::kSparse}) {
      std::vector<int32_t> indices(static_cast<size_t>(call.batch()) * 2 * 9), lens(static_cast<size_t>(call.batch()) * 2);
      DecodeIndexRows rows = decode_rows_view(indices.data(), lens.data(), call.batch(), 2, 9);
      std::vector<float> fused(out_size), composed(out_size);
      AttentionOutput out;
      out.o = fused.data();
      ScorePooling pooling;
      pooling.num_rows = 2;
      ASSERT_TRUE(backend.anchor_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows,
                                        mode, nullptr, out)
                      .ok());
      out.o = composed.data();
      const Status status = mode == AnchorOutput::kDense
                                ? backend.dense(problem.queries(call, 0), problem.kv(call, 0), params, out)
                                : backend.sparse_decode(problem.queries(call, 0), problem.kv(call, 0), params, rows,
                                                        nullptr, out);
      ASSERT_TRUE(status.ok());
      EXPECT_EQ(fused, composed);
    }
  }
}

TEST(CpuBackend, RefusesMoreIndicesThanCandidatesAndBadLayouts) {
  auto rng = rng_for_test();
  const Problem problem(rng, one_layer(), {10, 20});
  CpuBackend backend;
  AttentionParams params;
  params.scale = problem.scale();
  const Call call = problem.decode_last();
  std::vector<int32_t> indices(2 * 2 * 16), lens(4);
  DecodeIndexRows rows = decode_rows_view(indices.data(), lens.data(), 2, 2, 16);
  ScorePooling pooling;
  pooling.num_rows = 2;
  std::vector<int32_t> k = {11, 5};
  Status s = backend.select_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("asks for 11 indices out of 10 candidates"), std::string::npos) << s.to_string();
  k = {5, 17};
  s = backend.select_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("rows hold k_max = 16"), std::string::npos) << s.to_string();
  k = {5, 5};
  pooling.num_rows = 3;
  s = backend.select_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("must divide the 8 query heads"), std::string::npos) << s.to_string();
  pooling.num_rows = 1;
  s = backend.select_decode(problem.queries(call, 0), problem.kv(call, 0), params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("rows.num_rows is 2; expected 1"), std::string::npos) << s.to_string();
  // Decode selection with several queries per sequence.
  const Call prefill = problem.prefill_all();
  pooling.num_rows = 2;
  s = backend.select_decode(problem.queries(prefill, 0), problem.kv(prefill, 0), params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("exactly one query per sequence"), std::string::npos) << s.to_string();
  // Quest rows too short for whole pages.
  rows.num_rows = 8;
  rows.granularity = IndexGranularity::kPerQueryHead;
  std::vector<int32_t> quest_indices(2 * 8 * 8), quest_lens(16);
  rows.indices = quest_indices.data();
  rows.row_lens = quest_lens.data();
  rows.k_max = 8;
  s = backend.select_quest_decode(problem.queries(call, 0), problem.kv(call, 0), 16, k.data(), rows);
  EXPECT_NE(s.message().find("may select up to 10 keys (whole pages)"), std::string::npos) << s.to_string();
  // Prefill rows longer than the tile's candidates.
  Budget budget;
  budget.k_min = 4;
  auto plan = ref::plan_prefill_rows(prefill.q_lens.data(), prefill.kv_lens.data(), 2, 8, 2, budget, true);
  ASSERT_TRUE(plan.ok());
  ref::PrefillIndexSet set;
  set.plan = *plan;
  for (size_t r = 2; r < set.plan.row_offsets.size(); ++r) set.plan.row_offsets[r] += 1;  // tile 0 row 1 gets a key
  PrefillIndexRows prows = set.view(true, IndexGranularity::kPerKvGroup);
  s = backend.select_prefill(problem.queries(prefill, 0), problem.kv(prefill, 0), params, pooling, prows);
  EXPECT_NE(s.message().find("tile 0 row 1 holds 1 indices, more than its 0 candidates"), std::string::npos)
      << s.to_string();
  prows.include_local = false;
  s = backend.select_prefill(problem.queries(prefill, 0), problem.kv(prefill, 0), params, pooling, prows);
  EXPECT_NE(s.message().find("include_local"), std::string::npos) << s.to_string();
  s = backend.select_prefill_oracle(problem.queries(prefill, 0), problem.kv(prefill, 0), params, prows);
  EXPECT_NE(s.message().find("tile_size 1"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace kascade::testing
