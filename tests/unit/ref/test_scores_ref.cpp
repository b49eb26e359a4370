// test_scores_ref.cpp — pooled_scores_decode_ref and pooled_scores_prefill_tile_ref
// (src/ref/scores_ref.h): with sum pooling each query's softmax sums to 1, so a decode row sums to
// its heads-per-row and a prefill tile's row plus its local mass sums to (#queries of the tile in
// the call × heads per row); sum and max pooling against an fp64 recomputation written here
// (R = G, 1 and H rows; one-shot and chunked calls; entries past kv_len left untouched); bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "attention_problem.h"
#include "ref/scores_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

using ref::PoolingSpec;
using ref::PoolReduce;

// p_{h,i}[j] = softmax over j <= position of σ q·k_j, in fp64.
std::vector<double> probabilities64(const AttentionProblem& p, int32_t b, int32_t i, int32_t h) {
  const int64_t n = p.position(b, i) + 1;
  std::vector<double> s(static_cast<size_t>(n));
  double m = -std::numeric_limits<double>::infinity();
  const float* q = p.q_row(b, i, h);
  for (int64_t j = 0; j < n; ++j) {
    const float* k = p.k_row(b, j, h / p.group());
    double dot = 0;
    for (int32_t c = 0; c < p.dim(); ++c) dot += double{q[c]} * k[c];
    s[j] = double{p.scale()} * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - m);
  for (double& x : s) x = std::exp(x - m) / sum;
  return s;
}

double reduce64(PoolReduce reduce, double acc, double x) { return reduce == PoolReduce::kSum ? acc + x : std::max(acc, x); }

struct PooledScores64 {
  std::vector<double> scores;      // [R, num_candidates]
  std::vector<double> local_mass;  // [R]
};

// Pooling over queries [i0, i0 + nq) of sequence b, candidates j < num_candidates, local keys after.
PooledScores64 pooled64(const AttentionProblem& p, PoolingSpec pooling, int32_t b, int32_t i0, int32_t nq,
                        int64_t num_candidates) {
  const int32_t per_row = p.heads() / pooling.num_rows;
  PooledScores64 out;
  out.scores.assign(static_cast<size_t>(pooling.num_rows * num_candidates), 0.0);
  out.local_mass.assign(static_cast<size_t>(pooling.num_rows), 0.0);
  for (int32_t i = i0; i < i0 + nq; ++i) {
    for (int32_t h = 0; h < p.heads(); ++h) {
      const int32_t r = h / per_row;
      const std::vector<double> prob = probabilities64(p, b, i, h);
      double local = 0;
      for (size_t j = 0; j < prob.size(); ++j) {
        if (static_cast<int64_t>(j) < num_candidates) {
          double& acc = out.scores[r * num_candidates + j];
          acc = reduce64(pooling.reduce, acc, prob[j]);
        } else {
          local += prob[j];
        }
      }
      out.local_mass[r] = reduce64(pooling.reduce, out.local_mass[r], local);
    }
  }
  return out;
}

std::vector<float> to_float(const std::vector<double>& x) { return {x.begin(), x.end()}; }

const CompareOptions kScoreTolerance{1e-8, 5e-5};

ProblemSpec scores_spec(DType dtype, std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens) {
  ProblemSpec spec;
  spec.dtype = dtype;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 64;
  spec.q_lens = std::move(q_lens);
  spec.kv_lens = std::move(kv_lens);
  return spec;
}

TEST(PooledScoresDecode, MatchesFp64AndSumsToHeadsPerRow) {
  uint64_t salt = 0;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int32_t num_rows : {2, 1, 8}) {
      for (PoolReduce reduce : {PoolReduce::kSum, PoolReduce::kMax}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " rows " + std::to_string(num_rows) +
                     (reduce == PoolReduce::kSum ? " sum" : " max"));
        auto rng = rng_for_test(++salt);
        ProblemSpec spec = scores_spec(dtype, {1, 1, 1, 1}, {1, 33, 129, 1000});
        spec.head_dim = dtype == DType::kF16 ? 128 : 64;
        const AttentionProblem p(spec, rng);
        const PoolingSpec pooling{num_rows, reduce};
        const int64_t stride = 1003;
        GuardedBuffer<float> scores(static_cast<size_t>(p.batch() * num_rows * stride));
        ASSERT_TRUE(ref::pooled_scores_decode_ref(p.queries(), p.cache(), p.params(), pooling, scores.data(), stride).ok());
        EXPECT_TRUE(scores.intact());
        for (int32_t b = 0; b < p.batch(); ++b) {
          const int64_t n = p.kv_len(b);
          const PooledScores64 expected = pooled64(p, pooling, b, 0, 1, n);
          for (int32_t r = 0; r < num_rows; ++r) {
            const float* row = scores.data() + (b * num_rows + r) * stride;
            EXPECT_TRUE(all_close({row, static_cast<size_t>(n)},
                                  to_float({expected.scores.begin() + r * n, expected.scores.begin() + (r + 1) * n}), {n},
                                  kScoreTolerance))
                << "b " << b << " row " << r;
            EXPECT_EQ(count_nan({row + n, static_cast<size_t>(stride - n)}), stride - n) << "entries past kv_len written";
            if (reduce == PoolReduce::kSum) {
              const double sum = std::accumulate(row, row + n, 0.0);
              EXPECT_NEAR(sum, p.heads() / num_rows, 1e-5 * p.heads() / num_rows);
            }
          }
        }
      }
    }
  }
}

// Tiles of a one-shot prefill (q = kv = 70) and of a chunk starting mid-tile (q 37 of kv 600).
TEST(PooledScoresPrefillTile, MatchesFp64AndMassAddsUp) {
  const int32_t tile_size = 32;
  uint64_t salt = 0;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int32_t num_rows : {2, 1, 8}) {
      for (PoolReduce reduce : {PoolReduce::kSum, PoolReduce::kMax}) {
        if (dtype == DType::kBF16 && num_rows != 2) continue;  // the row layouts are dtype-independent
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " rows " + std::to_string(num_rows) +
                     (reduce == PoolReduce::kSum ? " sum" : " max"));
        auto rng = rng_for_test(++salt);
        const AttentionProblem p(scores_spec(dtype, {70, 37}, {70, 600}), rng);
        const PoolingSpec pooling{num_rows, reduce};
        for (int32_t b = 0; b < p.batch(); ++b) {
          const int64_t first_pos = p.position(b, 0), last_pos = p.kv_len(b) - 1;
          for (int64_t tile = first_pos / tile_size; tile <= last_pos / tile_size; ++tile) {
            const int64_t s_t = tile * tile_size;
            const int64_t lo = std::max(s_t, first_pos), hi = std::min(s_t + tile_size - 1, last_pos);
            const int32_t nq = static_cast<int32_t>(hi - lo + 1);
            GuardedBuffer<float> scores(static_cast<size_t>(num_rows * s_t)), local(static_cast<size_t>(num_rows));
            ASSERT_TRUE(ref::pooled_scores_prefill_tile_ref(p.queries(), p.cache(), p.params(), pooling, b, tile,
                                                            tile_size, scores.data(), local.data())
                            .ok());
            EXPECT_TRUE(scores.intact() && local.intact());
            const PooledScores64 expected =
                pooled64(p, pooling, b, static_cast<int32_t>(lo - first_pos), nq, s_t);
            EXPECT_TRUE(all_close(scores.span(), to_float(expected.scores), {num_rows, s_t}, kScoreTolerance))
                << "b " << b << " tile " << tile;
            EXPECT_TRUE(all_close(local.span(), to_float(expected.local_mass), {num_rows}, kScoreTolerance))
                << "b " << b << " tile " << tile;
            if (reduce == PoolReduce::kSum) {
              for (int32_t r = 0; r < num_rows; ++r) {
                const double mass =
                    std::accumulate(scores.data() + r * s_t, scores.data() + (r + 1) * s_t, 0.0) + local.data()[r];
                const double expected_mass = static_cast<double>(nq) * (p.heads() / num_rows);
                EXPECT_NEAR(mass, expected_mass, 1e-5 * expected_mass) << "b " << b << " tile " << tile << " row " << r;
              }
            }
          }
        }
      }
    }
  }
}

TEST(PooledScoresPrefillTile, LocalMassMayBeNull) {
  auto rng = rng_for_test();
  const AttentionProblem p(scores_spec(DType::kF32, {40}, {40}), rng);
  std::vector<float> with(2 * 32), without(2 * 32), local(2);
  ASSERT_TRUE(ref::pooled_scores_prefill_tile_ref(p.queries(), p.cache(), p.params(), {2, PoolReduce::kSum}, 0, 1, 32,
                                                  with.data(), local.data())
                  .ok());
  ASSERT_TRUE(ref::pooled_scores_prefill_tile_ref(p.queries(), p.cache(), p.params(), {2, PoolReduce::kSum}, 0, 1, 32,
                                                  without.data(), nullptr)
                  .ok());
  EXPECT_TRUE(all_close(without, with, {2, 32}, {0.0, 0.0}));
}

TEST(PooledScores, RefusesBadInput) {
  auto rng = rng_for_test();
  const AttentionProblem decode(scores_spec(DType::kF32, {1, 1}, {10, 20}), rng);
  std::vector<float> scores(1000);
  Status s = ref::pooled_scores_decode_ref(decode.queries(), decode.cache(), decode.params(), {3, PoolReduce::kSum},
                                           scores.data(), 20);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pooling.num_rows 3 does not divide q.num_heads 8"), std::string::npos) << s.message();
  s = ref::pooled_scores_decode_ref(decode.queries(), decode.cache(), decode.params(), {2, PoolReduce::kSum},
                                    scores.data(), 19);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scores_row_stride is 19"), std::string::npos) << s.message();

  const AttentionProblem prefill(scores_spec(DType::kF32, {2, 37}, {5, 1000}), rng);
  s = ref::pooled_scores_decode_ref(prefill.queries(), prefill.cache(), prefill.params(), {2, PoolReduce::kSum},
                                    scores.data(), 1000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sequence 0 has q_len 2"), std::string::npos) << s.message();
  // Sequence 1's call covers positions 963..999: tiles 30 and 31 of 32.
  s = ref::pooled_scores_prefill_tile_ref(prefill.queries(), prefill.cache(), prefill.params(), {2, PoolReduce::kSum},
                                          1, 29, 32, scores.data(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tile 29 does not intersect the call's queries of sequence 1 (positions 963..999"),
            std::string::npos)
      << s.message();
  s = ref::pooled_scores_prefill_tile_ref(prefill.queries(), prefill.cache(), prefill.params(), {2, PoolReduce::kSum},
                                          2, 0, 32, scores.data(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("b is 2"), std::string::npos) << s.message();
  s = ref::pooled_scores_prefill_tile_ref(prefill.queries(), prefill.cache(), prefill.params(), {2, PoolReduce::kSum},
                                          0, 0, 0, scores.data(), nullptr);
  EXPECT_NE(s.message().find("tile_size is 0"), std::string::npos) << s.message();
  s = ref::pooled_scores_prefill_tile_ref(prefill.queries(), prefill.cache(), prefill.params(), {2, PoolReduce::kSum},
                                          1, 30, 32, nullptr, nullptr);
  EXPECT_NE(s.message().find("scores is null"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kascade::testing
