// test_cpu_fast_kernels.cpp — the CPU backend's fast kernels (src/policy/cpu_fast_core.cpp,
// cpu_fast_attention.cpp, cpu_fast_select.cpp) against the src/ref reference ops, on random
// problems with shuffled pages, varlen batches of awkward lengths (1, 31, 32, 33, 127, 129, 1000),
// GQA group sizes 1 / 4 / 8 and head dims 64 / 128:
//   - exp_inplace against std::exp (ulp bound, underflow, -inf, NaN);
//   - fast_topk equal to ref::topk_select_ref (same total order) on tied and random scores;
//   - dense (one-shot, chunked, decode), sparse decode (per group with a head map, per query head),
//     sparse prefill (CSR rows ∪ local keys; oracle-style rows without local keys) all_close to ref;
//   - select_decode / select_prefill rows tie-aware equal to the reference backend's rows, judged on
//     ref's pooled scores;
//   - every result bit-identical with 1 and 2 OpenMP threads;
//   - CpuBackendOptions: the reference option runs src/ref bit-exactly, the default the fast kernels;
//     every policy gives the same outputs on both backends;
//   - bad rows refused by the fast ops with ref's status code.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "policy/cpu_backend.h"
#include "policy/cpu_fast_attention.h"
#include "policy/cpu_fast_core.h"
#include "policy/cpu_fast_select.h"
#include "policy_fixture.h"
#include "ref/attention_ref.h"
#include "ref/prefill_rows.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

const CompareOptions kTol{2e-5, 1e-4};

// Runs fn with `threads` OpenMP threads, then restores the previous setting.
template <typename Fn>
void with_threads(int threads, Fn&& fn) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  fn();
  omp_set_num_threads(before);
}

struct Outputs {
  std::vector<float> o;    // [total_q, H, d]
  std::vector<float> lse;  // [total_q, H]
};

// Runs an attention op (op(out) -> Status) into NaN-poisoned buffers.
template <typename Op>
Outputs run_attention(const Call& call, const ProblemShape& shape, Op&& op) {
  Outputs r;
  r.o.assign(static_cast<size_t>(call.total_q) * shape.num_heads * shape.head_dim,
             std::numeric_limits<float>::quiet_NaN());
  r.lse.assign(static_cast<size_t>(call.total_q) * shape.num_heads, std::numeric_limits<float>::quiet_NaN());
  AttentionOutput out;
  out.o = r.o.data();
  out.lse = r.lse.data();
  const Status status = op(out);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return r;
}

// Fast op with 1 and with 2 threads (bit-identical) against the reference op (all_close).
template <typename FastOp, typename RefOp>
void expect_matches_reference(const Call& call, const ProblemShape& shape, FastOp&& fast_op, RefOp&& ref_op,
                              const std::string& what) {
  Outputs one, two;
  with_threads(1, [&] { one = run_attention(call, shape, fast_op); });
  with_threads(2, [&] { two = run_attention(call, shape, fast_op); });
  const Outputs ref = run_attention(call, shape, ref_op);
  const std::vector<int64_t> o_shape = {call.total_q, shape.num_heads, shape.head_dim};
  EXPECT_TRUE(all_close(one.o, ref.o, o_shape, kTol)) << what << " o";
  EXPECT_TRUE(all_close(one.lse, ref.lse, {call.total_q, shape.num_heads}, kTol)) << what << " lse";
  EXPECT_EQ(one.o, two.o) << what << ": o differs between 1 and 2 threads";
  EXPECT_EQ(one.lse, two.lse) << what << ": lse differs between 1 and 2 threads";
}

struct ShapeCase {
  int32_t heads;
  int32_t kv_heads;
  int32_t d;
  std::vector<int32_t> lens;
};

// GQA 1 / 4 / 8, d 64 / 128, the awkward lengths; 1000 in one case (the reference is slow under ASan).
std::vector<ShapeCase> shape_cases() {
  const std::vector<int32_t> small = {1, 31, 32, 33, 127, 129};
  return {{8, 2, 64, {1000, 33}}, {4, 4, 64, small}, {8, 1, 128, small}, {8, 2, 128, {129, 1, 32}}};
}

ProblemShape shape_of(const ShapeCase& c) {
  ProblemShape shape;
  shape.num_layers = 1;
  shape.num_heads = c.heads;
  shape.num_kv_heads = c.kv_heads;
  shape.head_dim = c.d;
  shape.page_size = 16;
  return shape;
}

std::string name_of(const ShapeCase& c) {
  return "H" + std::to_string(c.heads) + " G" + std::to_string(c.kv_heads) + " d" + std::to_string(c.d);
}

// Runs fn(case, shape, problem, params, rng) for every shape case, each on its own Problem drawn
// from rng_for_test(case index) (the rng continues after the problem's draws).
template <typename Fn>
void for_each_shape_case(Fn&& fn) {
  int salt = 0;
  for (const ShapeCase& c : shape_cases()) {
    auto rng = rng_for_test(static_cast<uint64_t>(salt++));
    const ProblemShape shape = shape_of(c);
    const Problem problem(rng, shape, c.lens);
    AttentionParams params;
    params.scale = problem.scale();
    fn(c, shape, problem, params, rng);
  }
}

// A prefill call of every sequence's second half (a chunk at an unaligned start).
Call second_halves(const Problem& problem) {
  std::vector<int32_t> starts;
  for (int32_t n : problem.lens()) starts.push_back(n / 2);
  return problem.call(ForwardMode::kPrefill, starts, problem.lens());
}

TEST(FastCore, ExpIsWithinTwoUlpOfStdExp) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.01953125f) x.push_back(v);
  auto rng = rng_for_test();
  const std::vector<float> r = random_floats(rng, 4097, -30.0f, 5.0f);
  x.insert(x.end(), r.begin(), r.end());
  std::vector<float> y = x;
  policy::fast::exp_inplace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    ASSERT_LE(std::abs(y[i] - want), 2.0 * std::numeric_limits<float>::epsilon() * want) << "exp(" << x[i] << ")";
  }
  std::vector<float> edge = {-std::numeric_limits<float>::infinity(), -1000.0f, -88.0f, 0.0f,
                             std::numeric_limits<float>::quiet_NaN()};
  policy::fast::exp_inplace(edge.data(), static_cast<int64_t>(edge.size()));
  EXPECT_EQ(edge[0], 0.0f);
  EXPECT_EQ(edge[1], 0.0f);
  EXPECT_LE(edge[2], 1e-37f);
  EXPECT_EQ(edge[3], 1.0f);
  EXPECT_TRUE(std::isnan(edge[4]));
}

TEST(FastTopk, EqualsReferenceOnRandomAndTiedScores) {
  auto rng = rng_for_test();
  std::vector<float> scratch;
  for (int n : {1, 31, 32, 33, 127, 129, 1000, 4097}) {
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<float> s = random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
      if (variant == 1) {
        for (float& v : s) v = std::round(v * 3.0f);  // 7 distinct values: heavy ties
      } else if (variant == 2) {
        for (size_t i = 0; i < s.size(); i += 3) s[i] = i % 2 ? -0.0f : 0.0f;
        s[0] = std::numeric_limits<float>::infinity();
        s.back() = -std::numeric_limits<float>::infinity();
      }
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{n / 3}, int64_t{n - 1}, int64_t{n}}) {
        if (k < 0) continue;
        std::vector<int32_t> got(static_cast<size_t>(k), -7), want(static_cast<size_t>(k), -9);
        ASSERT_TRUE(policy::fast_topk(s.data(), n, k, got.data(), scratch).ok());
        ASSERT_TRUE(ref::topk_select_ref(s.data(), n, k, want.data()).ok());
        EXPECT_EQ(got, want) << "n " << n << " k " << k << " variant " << variant;
      }
    }
  }
  std::vector<float> s = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  std::vector<int32_t> out(3);
  const Status nan = policy::fast_topk(s.data(), 3, 1, out.data(), scratch);
  EXPECT_NE(nan.message().find("scores[1] is NaN"), std::string::npos) << nan.to_string();
  const Status too_many = policy::fast_topk(s.data(), 3, 4, out.data(), scratch);
  EXPECT_NE(too_many.message().find("exceeds the number of candidates"), std::string::npos) << too_many.to_string();
}

TEST(FastAttention, DenseMatchesReferenceInPrefillChunksAndDecode) {
  for_each_shape_case([&](const ShapeCase& c, const ProblemShape& shape, const Problem& problem,
                          const AttentionParams& params, std::mt19937_64&) {
    for (const Call& call : {problem.prefill_all(), second_halves(problem), problem.decode_last()}) {
      const QueryBatch q = problem.queries(call, 0);
      const PagedKv kv = problem.kv(call, 0);
      expect_matches_reference(
          call, shape, [&](const AttentionOutput& out) { return policy::fast_dense_attention(q, kv, params, out); },
          [&](const AttentionOutput& out) { return ref::dense_attention_ref(q, kv, params, out); },
          name_of(c) + " total_q " + std::to_string(call.total_q));
    }
  });
}

// Random duplicate-free subsets, in random order.
std::vector<int32_t> random_subset(std::mt19937_64& rng, int64_t candidates, int64_t k) {
  std::vector<int32_t> all(static_cast<size_t>(candidates));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(k));
  return all;
}

TEST(FastAttention, SparseDecodeMatchesReferencePerGroupAndPerHead) {
  for_each_shape_case([&](const ShapeCase& c, const ProblemShape& shape, const Problem& problem,
                          const AttentionParams& params, std::mt19937_64& rng) {
    const Call call = problem.decode_last();
    const QueryBatch q = problem.queries(call, 0);
    const PagedKv kv = problem.kv(call, 0);
    for (IndexGranularity granularity : {IndexGranularity::kPerKvGroup, IndexGranularity::kPerQueryHead}) {
      const int32_t num_rows = granularity == IndexGranularity::kPerKvGroup ? c.kv_heads : c.heads;
      const int32_t k_max = 300;
      std::vector<int32_t> indices(static_cast<size_t>(call.batch()) * num_rows * k_max, -1);
      std::vector<int32_t> lens(static_cast<size_t>(call.batch()) * num_rows);
      for (int32_t b = 0; b < call.batch(); ++b) {
        for (int32_t r = 0; r < num_rows; ++r) {
          const int64_t n = call.kv_lens[b];
          const int64_t k = std::uniform_int_distribution<int64_t>(0, std::min<int64_t>(n, k_max))(rng);
          const std::vector<int32_t> keys = random_subset(rng, n, k);
          const size_t row = static_cast<size_t>(b) * num_rows + r;
          std::copy(keys.begin(), keys.end(), indices.begin() + static_cast<int64_t>(row) * k_max);
          lens[row] = static_cast<int32_t>(k);
        }
      }
      const DecodeIndexRows rows =
          decode_rows_view(indices.data(), lens.data(), call.batch(), num_rows, k_max, granularity);
      std::vector<int32_t> head_map(static_cast<size_t>(c.kv_heads));
      for (int32_t g = 0; g < c.kv_heads; ++g) head_map[g] = (g + 1) % c.kv_heads;  // a permutation
      const int32_t* map = granularity == IndexGranularity::kPerKvGroup ? head_map.data() : nullptr;
      expect_matches_reference(
          call, shape,
          [&](const AttentionOutput& out) { return policy::fast_sparse_decode(q, kv, params, rows, map, out); },
          [&](const AttentionOutput& out) { return ref::sparse_decode_ref(q, kv, params, rows, map, out); },
          name_of(c) + (map ? " per group" : " per head"));
    }
  });
}

TEST(FastAttention, SparsePrefillMatchesReferenceWithAndWithoutLocalKeys) {
  for_each_shape_case([&](const ShapeCase& c, const ProblemShape& shape, const Problem& problem,
                          const AttentionParams& params, std::mt19937_64& rng) {
    for (const Call& call : {problem.prefill_all(), second_halves(problem)}) {
      const QueryBatch q = problem.queries(call, 0);
      const PagedKv kv = problem.kv(call, 0);
      for (bool local : {true, false}) {
        // Kascade rows (tile 32, per KV group, local keys) or oracle-style rows (tile 1, per head).
        const int32_t tile = local ? 32 : 1;
        const int32_t num_rows = local ? c.kv_heads : c.heads;
        Budget budget;
        budget.rho_ppm = 200000;
        budget.k_min = 5;
        auto plan = ref::plan_prefill_rows(call.q_lens.data(), call.kv_lens.data(), call.batch(), tile, num_rows,
                                           budget, true);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        ref::PrefillIndexSet set;
        set.plan = *plan;
        PrefillIndexRows rows = set.view(local, local ? IndexGranularity::kPerKvGroup : IndexGranularity::kPerQueryHead);
        for (int32_t b = 0; b < call.batch(); ++b) {
          for (int32_t s = 0; s < plan->tile_base[b + 1] - plan->tile_base[b]; ++s) {
            const int64_t t = plan->tile_first[b] + s;
            const int64_t candidates = local ? t * tile : std::min<int64_t>(t * tile + tile, call.kv_lens[b]);
            for (int32_t r = 0; r < num_rows; ++r) {
              const int64_t row = (plan->tile_base[b] + s) * int64_t{num_rows} + r;
              const int64_t len = plan->row_offsets[row + 1] - plan->row_offsets[row];
              const std::vector<int32_t> keys = random_subset(rng, candidates, std::min(len, candidates));
              std::copy(keys.begin(), keys.end(), set.indices.begin() + plan->row_offsets[row]);
            }
          }
        }
        std::vector<int32_t> head_map(static_cast<size_t>(c.kv_heads));
        for (int32_t g = 0; g < c.kv_heads; ++g) head_map[g] = c.kv_heads - 1 - g;
        const int32_t* map = local ? head_map.data() : nullptr;
        expect_matches_reference(
            call, shape,
            [&](const AttentionOutput& out) { return policy::fast_sparse_prefill(q, kv, params, rows, map, out); },
            [&](const AttentionOutput& out) { return ref::sparse_prefill_ref(q, kv, params, rows, map, out); },
            name_of(c) + (local ? " kascade rows" : " oracle rows") + " total_q " + std::to_string(call.total_q));
      }
    }
  });
}

struct PoolingCase {
  int32_t rows;
  ScoreReduce reduce;
};

std::vector<PoolingCase> pooling_cases(const ShapeCase& c) {
  return {{c.kv_heads, ScoreReduce::kSum}, {1, ScoreReduce::kSum}, {1, ScoreReduce::kMax}, {c.heads, ScoreReduce::kSum}};
}

ref::PoolingSpec to_spec(const PoolingCase& p) {
  ref::PoolingSpec spec;
  spec.num_rows = p.rows;
  spec.reduce = p.reduce == ScoreReduce::kMax ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
  return spec;
}

// Scores within this relative distance of the k-th are interchangeable (fp32 accumulation in two
// different orders, n <= 1000 terms).
constexpr double kTieEps = 1e-4;

TEST(FastSelect, SelectDecodeRowsAreTheReferenceTopKUpToTies) {
  for_each_shape_case([&](const ShapeCase& c, const ProblemShape&, const Problem& problem,
                          const AttentionParams& params, std::mt19937_64&) {
    const Call call = problem.decode_last();
    const QueryBatch q = problem.queries(call, 0);
    const PagedKv kv = problem.kv(call, 0);
    CpuBackend reference(CpuBackendOptions{CpuKernels::kReference});
    for (const PoolingCase& p : pooling_cases(c)) {
      std::vector<int32_t> k(static_cast<size_t>(call.batch()));
      for (int32_t b = 0; b < call.batch(); ++b) k[b] = std::min(call.kv_lens[b], 7 + 50 * b);  // includes k = n
      const int32_t k_max = *std::max_element(k.begin(), k.end()) + 3;
      const size_t size = static_cast<size_t>(call.batch()) * p.rows * k_max;
      std::vector<int32_t> got1(size), got2(size), want(size), len1(size), len2(size), want_len(size);
      auto rows_of = [&](std::vector<int32_t>& idx, std::vector<int32_t>& lens) {
        return decode_rows_view(idx.data(), lens.data(), call.batch(), p.rows, k_max);
      };
      ScorePooling pooling{p.rows, p.reduce};
      with_threads(1, [&] {
        ASSERT_TRUE(policy::fast_select_decode(q, kv, params, pooling, k.data(), rows_of(got1, len1)).ok());
      });
      with_threads(2, [&] {
        ASSERT_TRUE(policy::fast_select_decode(q, kv, params, pooling, k.data(), rows_of(got2, len2)).ok());
      });
      ASSERT_TRUE(reference.select_decode(q, kv, params, pooling, k.data(), rows_of(want, want_len)).ok());
      EXPECT_EQ(got1, got2) << "1 vs 2 threads";
      EXPECT_EQ(len1, want_len);
      const int32_t stride = *std::max_element(call.kv_lens.begin(), call.kv_lens.end());
      std::vector<float> scores(static_cast<size_t>(call.batch()) * p.rows * stride);
      ASSERT_TRUE(ref::pooled_scores_decode_ref(q, kv, params, to_spec(p), scores.data(), stride).ok());
      for (int32_t b = 0; b < call.batch(); ++b) {
        for (int32_t r = 0; r < p.rows; ++r) {
          const size_t row = static_cast<size_t>(b) * p.rows + r;
          const std::span<const int32_t> g(got1.data() + row * k_max, static_cast<size_t>(k[b]));
          const std::span<const int32_t> w(want.data() + row * k_max, static_cast<size_t>(k[b]));
          EXPECT_TRUE(topk_sets_equivalent(g, w, std::span<const float>(scores.data() + row * stride,
                                                                        static_cast<size_t>(call.kv_lens[b])),
                                           kTieEps))
              << name_of(c) << " pooling rows " << p.rows << " b " << b << " r " << r;
          for (int32_t e = k[b]; e < k_max; ++e) EXPECT_EQ(got1[row * k_max + e], -1);
        }
      }
    }
  });
}

TEST(FastSelect, SelectPrefillRowsAreTheReferenceTopKUpToTies) {
  for_each_shape_case([&](const ShapeCase& c, const ProblemShape&, const Problem& problem,
                          const AttentionParams& params, std::mt19937_64&) {
    CpuBackend reference(CpuBackendOptions{CpuKernels::kReference});
    // The 1000-token case (its per-tile reference scores are slow under ASan) runs one-shot with
    // the per-group pooling only.
    const bool long_case = *std::max_element(c.lens.begin(), c.lens.end()) >= 1000;
    std::vector<Call> calls = {problem.prefill_all()};
    if (!long_case) calls.push_back(second_halves(problem));
    std::vector<PoolingCase> poolings = pooling_cases(c);
    if (long_case) poolings.resize(1);
    for (const Call& call : calls) {
      const QueryBatch q = problem.queries(call, 0);
      const PagedKv kv = problem.kv(call, 0);
      for (const PoolingCase& p : poolings) {
        Budget budget;
        budget.rho_ppm = 100000;
        budget.k_min = 8;
        auto plan = ref::plan_prefill_rows(call.q_lens.data(), call.kv_lens.data(), call.batch(), 32, p.rows, budget,
                                           true);
        ASSERT_TRUE(plan.ok());
        ref::PrefillIndexSet one, two, want;
        one.plan = two.plan = want.plan = *plan;
        ScorePooling pooling{p.rows, p.reduce};
        with_threads(1, [&] {
          ASSERT_TRUE(policy::fast_select_prefill(q, kv, params, pooling, one.view(true, IndexGranularity::kPerKvGroup)).ok());
        });
        with_threads(2, [&] {
          ASSERT_TRUE(policy::fast_select_prefill(q, kv, params, pooling, two.view(true, IndexGranularity::kPerKvGroup)).ok());
        });
        ASSERT_TRUE(reference.select_prefill(q, kv, params, pooling, want.view(true, IndexGranularity::kPerKvGroup)).ok());
        EXPECT_EQ(one.indices, two.indices) << "1 vs 2 threads";
        for (int32_t b = 0; b < call.batch(); ++b) {
          for (int32_t s = 0; s < plan->tile_base[b + 1] - plan->tile_base[b]; ++s) {
            const int64_t t = plan->tile_first[b] + s;
            const int64_t s_t = t * 32;
            std::vector<float> scores(static_cast<size_t>(p.rows * s_t) + 1);
            ASSERT_TRUE(ref::pooled_scores_prefill_tile_ref(q, kv, params, to_spec(p), b, t, 32, scores.data(), nullptr).ok());
            for (int32_t r = 0; r < p.rows; ++r) {
              const int64_t row = (plan->tile_base[b] + s) * int64_t{p.rows} + r;
              const int64_t at = plan->row_offsets[row];
              const size_t len = static_cast<size_t>(plan->row_offsets[row + 1] - at);
              EXPECT_TRUE(topk_sets_equivalent(std::span<const int32_t>(one.indices.data() + at, len),
                                               std::span<const int32_t>(want.indices.data() + at, len),
                                               std::span<const float>(scores.data() + r * s_t, static_cast<size_t>(s_t)),
                                               kTieEps))
                  << name_of(c) << " pooling rows " << p.rows << " b " << b << " tile " << t << " r " << r;
            }
          }
        }
      }
    }
  });
}

TEST(FastBackend, OptionsPickTheKernelsAndEveryPolicyAgreesOnBoth) {
  auto rng = rng_for_test();
  ProblemShape shape;
  shape.num_layers = 4;
  const Problem problem(rng, shape, {1, 33, 129, 200});
  AttentionParams params;
  params.scale = problem.scale();
  const Call call = problem.prefill_all();
  CpuBackend fast_backend;
  CpuBackend ref_backend(CpuBackendOptions{CpuKernels::kReference});
  EXPECT_EQ(fast_backend.options().kernels, CpuKernels::kFast);
  const Outputs via_ref = run_attention(call, shape, [&](const AttentionOutput& out) {
    return ref_backend.dense(problem.queries(call, 0), problem.kv(call, 0), params, out);
  });
  const Outputs ref_op = run_attention(call, shape, [&](const AttentionOutput& out) {
    return ref::dense_attention_ref(problem.queries(call, 0), problem.kv(call, 0), params, out);
  });
  const Outputs via_fast = run_attention(call, shape, [&](const AttentionOutput& out) {
    return fast_backend.dense(problem.queries(call, 0), problem.kv(call, 0), params, out);
  });
  const Outputs fast_op = run_attention(call, shape, [&](const AttentionOutput& out) {
    return policy::fast_dense_attention(problem.queries(call, 0), problem.kv(call, 0), params, out);
  });
  EXPECT_EQ(via_ref.o, ref_op.o);
  EXPECT_EQ(via_fast.o, fast_op.o);
  EXPECT_NE(via_fast.o, via_ref.o) << "the default backend should run the fast kernels, not src/ref";

  Schedule schedule;
  schedule.anchors = {0, 2};
  for (int32_t l = 0; l < shape.num_layers; ++l) {
    for (int32_t g = 0; g < shape.num_kv_heads; ++g) schedule.head_map.push_back(l == 3 ? 1 - g : g);
  }
  for (const std::string name : {"dense", "kascade", "kascade-pooled", "kascade-decode", "oracle", "streaming", "quest",
                                 "omnikv", "lessismore"}) {
    PolicyConfig config = config_for(problem, name);
    config.schedule = schedule;
    config.quest_page_size = 4;
    for (const Call& c : {call, problem.decode_last()}) {
      RunResult results[2];
      for (int which = 0; which < 2; ++which) {
        auto policy = make_policy(config, make_cpu_backend(CpuBackendOptions{which == 0 ? CpuKernels::kFast
                                                                                         : CpuKernels::kReference}));
        ASSERT_TRUE(policy.ok()) << name << ": " << policy.status().to_string();
        ASSERT_TRUE(run_policy(**policy, problem, c, false, &results[which])) << name;
      }
      for (size_t l = 0; l < results[0].o.size(); ++l) {
        EXPECT_TRUE(all_close(results[0].o[l], results[1].o[l], {static_cast<int64_t>(results[0].o[l].size())}, kTol))
            << name << " layer " << l << (c.total_q == call.total_q ? " prefill" : " decode");
        EXPECT_TRUE(all_close(results[0].lse[l], results[1].lse[l], {static_cast<int64_t>(results[0].lse[l].size())}, kTol))
            << name << " layer " << l;
      }
    }
  }
}

TEST(FastAttention, BadRowsAreRefusedWithTheReferenceStatus) {
  auto rng = rng_for_test();
  ProblemShape shape;
  shape.num_layers = 1;
  const Problem problem(rng, shape, {10, 20});
  AttentionParams params;
  params.scale = problem.scale();
  const Call call = problem.decode_last();
  const QueryBatch q = problem.queries(call, 0);
  const PagedKv kv = problem.kv(call, 0);
  std::vector<float> o(static_cast<size_t>(call.total_q) * 8 * 32);
  AttentionOutput out;
  out.o = o.data();
  std::vector<int32_t> indices = {0, 1, 1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 25, -1, -1};
  std::vector<int32_t> lens = {3, 2, 2, 2};
  const DecodeIndexRows rows = decode_rows_view(indices.data(), lens.data(), 2, 2, 4);
  for (int fix = 0; fix < 2; ++fix) {  // a duplicate (InvalidArgument), then an entry >= kv_len (OutOfRange)
    const Status fast = policy::fast_sparse_decode(q, kv, params, rows, nullptr, out);
    const Status want = ref::sparse_decode_ref(q, kv, params, rows, nullptr, out);
    EXPECT_FALSE(fast.ok());
    EXPECT_EQ(fast.code(), want.code()) << fast.to_string() << " vs " << want.to_string();
    EXPECT_EQ(fast.message(), want.message());
    lens[0] = 2;
    indices[2] = -1;
  }
  params.scale = 0.0f;
  EXPECT_FALSE(policy::fast_dense_attention(q, kv, params, out).ok());
  ScorePooling pooling{3, ScoreReduce::kSum};
  std::vector<int32_t> k = {2, 2};
  params.scale = problem.scale();
  const Status s = policy::fast_select_decode(q, kv, params, pooling, k.data(), rows);
  EXPECT_NE(s.message().find("must divide the 8 query heads"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace kascade::testing
