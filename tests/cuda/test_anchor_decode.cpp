// tests/cuda/test_anchor_decode.cpp — anchor-layer decode (src/cuda/kascade/anchor_decode.h) for
// every pooling the policies use (kascade R = G sum, kascade-pooled R = 1 sum, omnikv R = 1 max,
// oracle R = H), with dense (layer 0) and sparse outputs:
//   - pooled scores vs ref::pooled_scores_decode_ref (all_close);
//   - the selected rows vs ref::topk_select_ref on the reference scores (tie-aware sets,
//     harness topk_sets_equivalent) and exactly equal to ref::topk_select_ref on the GPU's own
//     pooled scores; −1 padding; row_lens = k(n);
//   - the stored logits (the scoring pass's σ·q·k, bulk-stored a tile at a time on sm_90) vs fp64;
//   - the output vs ref::dense_attention_ref / ref::sparse_decode_ref over the GPU's rows and an
//     fp64 recomputation (FA3 rule); the exact LSE vs fp64.
// Awkward lengths in mixed batches, shuffled pages, NaN-poisoned outputs, clean error word. Every
// case runs with the pooling and Top-k as two kernels and fused into one (PoolFusion), which must
// agree bit for bit: pooled scores, rows and outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention/decode_params.h"
#include "cuda/common/device_errors.h"
#include "cuda/common/plan_support.h"
#include "cuda/kascade/anchor_decode.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DecodeCase;
using kascade::testing::DecodeProblem;
using kascade::testing::DeviceBuffer;

DecodeShape shape_of(const DecodeProblem& p) {
  DecodeShape s;
  s.dtype = p.spec().dtype;
  s.batch = p.batch();
  s.num_heads = p.spec().num_heads;
  s.num_kv_heads = p.spec().num_kv_heads;
  s.head_dim = p.spec().head_dim;
  s.page_size = p.page_size();
  s.max_seq_len = p.max_seq_len();
  return s;
}

struct AnchorRun {
  std::vector<int32_t> indices, row_lens;  // [B, R, k_max], [B, R]
  int32_t k_max = 0;
  std::vector<float> scores;  // the pooled scores j < n of every row, rows concatenated (when written)
  std::vector<float> o, lse;  // the layer's output
};

// Runs the anchor and checks everything against the references; returns what it computed. With
// write_scores = false the fused pooling keeps its scores on chip: the rows are then checked against
// the reference scores only (tie-aware sets).
AnchorRun run_and_check_anchor(const DecodeProblem& p, const AnchorOptions& options,
                               const std::vector<int32_t>& k_per_seq = {}, bool write_scores = true) {
  const DecodeCase& c = p.spec();
  const int32_t batch = p.batch(), h_count = c.num_heads, d = c.head_dim, rows_r = options.pooling.num_rows;
  AnchorRun run;
  auto plan = plan_anchor_decode(shape_of(p), options);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return run;
  run.k_max = plan->k_max;
  DeviceBuffer workspace(plan->workspace.total_bytes);
  EXPECT_TRUE(initialize_workspace(plan->workspace, workspace.data(), nullptr).ok());
  DeviceBuffer indices(static_cast<size_t>(batch) * rows_r * run.k_max * sizeof(int32_t), 0x7F);
  DeviceBuffer row_lens(static_cast<size_t>(batch) * rows_r * sizeof(int32_t), 0x7F);
  DeviceBuffer o(static_cast<size_t>(batch) * h_count * d * dtype_size(c.dtype));
  DeviceBuffer lse(static_cast<size_t>(batch) * h_count * sizeof(float));
  DeviceBuffer exact_lse(static_cast<size_t>(batch) * h_count * sizeof(float));
  DeviceBuffer k_d = testing::upload_vector(k_per_seq);
  DecodeIndexRows rows{indices.as<int32_t>(), row_lens.as<int32_t>(), batch, rows_r, run.k_max, plan->granularity};
  AttentionOutput out{o.data(), c.dtype, lse.as<float>()};
  AttentionParams params;
  params.scale = p.scale();
  AnchorRunExtras extras;
  extras.k_per_seq = k_per_seq.empty() ? nullptr : k_d.as<int32_t>();
  extras.exact_lse = options.dense_output ? nullptr : exact_lse.as<float>();
  extras.write_pooled_scores = write_scores;
  const Status st = anchor_decode(*plan, p.device_q(), p.device_kv(), params, rows, out, extras, workspace.data(), nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return run;
  run.indices = indices.download_as<int32_t>();
  run.row_lens = row_lens.download_as<int32_t>();
  const std::vector<float> got_o = testing::to_floats(o.download(), c.dtype);
  const std::vector<float> got_lse = lse.download_as<float>();
  EXPECT_TRUE(indices.guards_intact() && row_lens.guards_intact() && o.guards_intact() && lse.guards_intact());
  const int64_t stride = plan->logits_stride;
  std::vector<float> gpu_scores(static_cast<size_t>(batch) * rows_r * stride);
  EXPECT_EQ(cudaMemcpy(gpu_scores.data(), anchor_pooled_scores(*plan, workspace.data()),
                       gpu_scores.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);

  // Reference pooled scores, row stride = max_seq_len.
  const int64_t ref_stride = p.max_seq_len();
  std::vector<float> ref_scores(static_cast<size_t>(batch) * rows_r * ref_stride, 0.0f);
  ref::PoolingSpec spec{rows_r, options.pooling.reduce == ScoreReduce::kMax ? ref::PoolReduce::kMax : ref::PoolReduce::kSum};
  EXPECT_TRUE(ref::pooled_scores_decode_ref(p.host_q(), p.host_kv(), params, spec, ref_scores.data(), ref_stride).ok());

  for (int32_t b = 0; b < batch; ++b) {
    const int32_t n = p.kv_lens()[b];
    const int32_t k = k_per_seq.empty() ? static_cast<int32_t>(budget_k(n, options.budget)) : k_per_seq[b];
    for (int32_t r = 0; r < rows_r; ++r) {
      SCOPED_TRACE("b " + std::to_string(b) + " row " + std::to_string(r) + " n " + std::to_string(n));
      const int64_t row = static_cast<int64_t>(b) * rows_r + r;
      const std::vector<float> want_s(ref_scores.begin() + row * ref_stride, ref_scores.begin() + row * ref_stride + n);
      EXPECT_EQ(run.row_lens[row], k);
      const std::vector<int32_t> got_row(run.indices.begin() + row * run.k_max, run.indices.begin() + row * run.k_max + k);
      for (int32_t i = k; i < run.k_max; ++i) EXPECT_EQ(run.indices[row * run.k_max + i], -1) << "padding at " << i;
      std::vector<int32_t> want(k), exact(k);
      EXPECT_TRUE(ref::topk_select_ref(want_s.data(), n, k, want.data()).ok());
      EXPECT_TRUE(testing::topk_sets_equivalent(got_row, want, want_s, 1e-3));
      if (!write_scores) continue;
      const std::vector<float> got_s(gpu_scores.begin() + row * stride, gpu_scores.begin() + row * stride + n);
      run.scores.insert(run.scores.end(), got_s.begin(), got_s.end());
      EXPECT_TRUE(testing::all_close(got_s, want_s, {n}, {1e-6, 2e-4}));
      EXPECT_TRUE(ref::topk_select_ref(got_s.data(), n, k, exact.data()).ok());
      EXPECT_EQ(got_row, exact) << "the radix select must equal topk_select_ref on the scores it saw";
    }
  }

  // The layer's output.
  AttentionOutput ref_out;
  std::vector<float> ref_o(static_cast<size_t>(batch) * h_count * d), ref_lse(static_cast<size_t>(batch) * h_count);
  ref_out.o = ref_o.data();
  ref_out.dtype = DType::kF32;
  ref_out.lse = ref_lse.data();
  testing::KeyLists keys;
  if (options.dense_output) {
    keys = testing::dense_key_lists(p);
    EXPECT_TRUE(ref::dense_attention_ref(p.host_q(), p.host_kv(), params, ref_out).ok());
  } else {
    keys = testing::sparse_key_lists(p, run.indices, run.row_lens, rows_r, run.k_max, plan->granularity, {});
    // The reference reads the same rows through an explicit head map (g·R/G).
    std::vector<int32_t> head_map(c.num_kv_heads);
    for (int32_t g = 0; g < c.num_kv_heads; ++g) head_map[g] = g * rows_r / c.num_kv_heads;
    DecodeIndexRows host_rows{run.indices.data(), run.row_lens.data(), batch, rows_r, run.k_max, plan->granularity};
    const Status ref_st = ref::sparse_decode_ref(
        p.host_q(), p.host_kv(), params, host_rows,
        plan->granularity == IndexGranularity::kPerQueryHead ? nullptr : head_map.data(), ref_out);
    EXPECT_TRUE(ref_st.ok()) << ref_st.to_string();
    // The exact LSE over all keys.
    const std::vector<float> got_exact = exact_lse.download_as<float>();
    const auto dense = testing::recompute_attention(p, testing::dense_key_lists(p));
    for (size_t i = 0; i < got_exact.size(); ++i)
      EXPECT_NEAR(got_exact[i], dense.lse64[i], 1e-4 + 1e-5 * std::fabs(dense.lse64[i])) << "exact lse " << i;
  }
  EXPECT_TRUE(testing::check_attention(p, keys, got_o, got_lse));
  EXPECT_TRUE(testing::all_close(got_o, ref_o, {batch, h_count, d}, testing::tolerance_for(c.dtype)));
  EXPECT_TRUE(testing::all_close(got_lse, ref_lse, {batch, h_count}, {1e-4, 1e-5}));
  auto errors = read_device_errors(plan->workspace, workspace.data(), nullptr);
  EXPECT_TRUE(errors.ok());
  if (errors.ok()) {
    EXPECT_EQ(*errors, 0u) << describe_device_errors(*errors);
  }
  run.o = got_o;
  run.lse = got_lse;
  return run;
}

// Bit equality of what two runs of the same problem computed (floats compared as bits: −0 vs +0
// or different NaNs would show).
void expect_same_run(const AnchorRun& a, const AnchorRun& b) {
  const auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> out(v.size());
    std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
    return out;
  };
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.row_lens, b.row_lens);
  EXPECT_EQ(bits(a.scores), bits(b.scores));
  EXPECT_EQ(bits(a.o), bits(b.o));
  EXPECT_EQ(bits(a.lse), bits(b.lse));
}

// Runs the anchor with the pooling and the Top-k as two kernels and fused into one, checks each
// against the references, and checks that they computed the same bits (the same pooling arithmetic,
// pool_device.cuh, and the same select). Returns the separate run.
AnchorRun run_and_check_both(const DecodeProblem& p, AnchorOptions options, const std::vector<int32_t>& k_per_seq = {}) {
  options.pool_fusion = PoolFusion::kSeparate;
  AnchorRun separate;
  {
    SCOPED_TRACE("separate pooling and Top-k");
    separate = run_and_check_anchor(p, options, k_per_seq);
  }
  options.pool_fusion = PoolFusion::kFused;
  SCOPED_TRACE("fused pooling and Top-k");
  expect_same_run(run_and_check_anchor(p, options, k_per_seq), separate);
  return separate;
}

DecodeCase make_case(DType dtype, int h, int g, int d, int page, std::mt19937_64& rng) {
  DecodeCase c;
  c.dtype = dtype;
  c.num_heads = h;
  c.num_kv_heads = g;
  c.head_dim = d;
  c.page_size = page;
  c.kv_lens.assign(testing::awkward_lengths().begin(), testing::awkward_lengths().end());
  std::shuffle(c.kv_lens.begin(), c.kv_lens.end(), rng);
  return c;
}

AnchorOptions options(int32_t rows, ScoreReduce reduce, bool dense_output) {
  AnchorOptions o;
  o.pooling.num_rows = rows;
  o.pooling.reduce = reduce;
  o.budget.k_min = 8;  // small enough that short sequences select a strict subset
  o.dense_output = dense_output;
  return o;
}

TEST(AnchorDecode, KascadePerKvGroupSparseOutput) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 8, 2, 128, 16, rng), rng);
  run_and_check_both(p, options(2, ScoreReduce::kSum, false));
}

TEST(AnchorDecode, LayerZeroDenseOutputBf16HeadDim64) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kBF16, 8, 4, 64, 32, rng), rng);
  run_and_check_both(p, options(4, ScoreReduce::kSum, true));
}

TEST(AnchorDecode, AllHeadsPooledSparseOutput) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 16, 4, 128, 0, rng), rng);
  run_and_check_both(p, options(1, ScoreReduce::kSum, false));
}

TEST(AnchorDecode, OmniKvMaxPoolingDenseOutput) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kBF16, 12, 4, 128, 64, rng), rng);
  run_and_check_both(p, options(1, ScoreReduce::kMax, true));
}

TEST(AnchorDecode, OraclePerQueryHeadSparseOutput) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 8, 2, 64, 16, rng), rng);
  run_and_check_both(p, options(8, ScoreReduce::kSum, false));
}

TEST(AnchorDecode, GroupSizeOneAndEight) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem one(make_case(DType::kBF16, 4, 4, 128, 128, rng), rng);
  run_and_check_both(one, options(4, ScoreReduce::kSum, false));
  DecodeProblem eight(make_case(DType::kF16, 16, 2, 128, 16, rng), rng);
  run_and_check_both(eight, options(2, ScoreReduce::kSum, false));
}

// The sparse output reads S from the key-major logits, whose blocks are the group size rounded up to
// 1, 2, 4 or 8 floats: groups of 2 (exact), 3 and 6 (padded blocks), and per query head over padding.
TEST(AnchorDecode, SparseOutputFromLogitsForEveryBlockWidth) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  struct Shape {
    DType dtype;
    int heads, kv_heads, head_dim, page, rows;
  };
  for (const Shape& s : {Shape{DType::kBF16, 8, 4, 128, 32, 4}, Shape{DType::kF16, 12, 4, 64, 16, 4},
                         Shape{DType::kBF16, 12, 2, 128, 64, 2}, Shape{DType::kF16, 12, 2, 64, 16, 12}}) {
    SCOPED_TRACE("H " + std::to_string(s.heads) + ", G " + std::to_string(s.kv_heads) + ", rows " +
                 std::to_string(s.rows));
    DecodeProblem p(make_case(s.dtype, s.heads, s.kv_heads, s.head_dim, s.page, rng), rng);
    run_and_check_both(p, options(s.rows, ScoreReduce::kSum, false));
  }
}

// The scoring pass's stored logits themselves, against σ·q·k in fp64: every block width (group sizes 1, 2,
// 3, 4, 8 → 1, 2, 4, 4, 8 floats a key, padding heads 0), the scoring pass (sparse output) and the layer-0
// pass (dense output), lengths of whole 16-key tiles (on sm_90 stored by the copy engine, one bulk store
// a tile) and with a partial last tile (stored by the warp).
TEST(AnchorDecode, StoredLogitsEqualScaledDotProducts) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  for (const int group : {1, 2, 3, 4, 8}) {
    for (const bool dense_output : {false, true}) {
      SCOPED_TRACE("group " + std::to_string(group) + (dense_output ? ", dense output" : ", sparse output"));
      DecodeCase c = make_case(group == 3 ? DType::kF16 : DType::kBF16, 2 * group, 2, group % 2 ? 64 : 128, 16, rng);
      c.kv_lens = {16, 17, 255, 256, 4096, 5003};
      DecodeProblem p(c, rng);
      const AnchorOptions o = options(2, ScoreReduce::kSum, dense_output);
      auto plan = plan_anchor_decode(shape_of(p), o);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      const int32_t batch = p.batch(), heads = c.num_heads, d = c.head_dim;
      DeviceBuffer workspace(plan->workspace.total_bytes);
      ASSERT_TRUE(initialize_workspace(plan->workspace, workspace.data(), nullptr).ok());
      DeviceBuffer indices(static_cast<size_t>(batch) * 2 * plan->k_max * sizeof(int32_t));
      DeviceBuffer row_lens(static_cast<size_t>(batch) * 2 * sizeof(int32_t));
      DeviceBuffer o_d(static_cast<size_t>(batch) * heads * d * dtype_size(c.dtype));
      DeviceBuffer lse(static_cast<size_t>(batch) * heads * sizeof(float));
      DeviceBuffer exact_lse(static_cast<size_t>(batch) * heads * sizeof(float));
      DecodeIndexRows rows{indices.as<int32_t>(), row_lens.as<int32_t>(), batch, 2, plan->k_max, plan->granularity};
      AttentionParams params;
      params.scale = p.scale();
      AnchorRunExtras extras;
      extras.exact_lse = dense_output ? nullptr : exact_lse.as<float>();
      const Status st = anchor_decode(*plan, p.device_q(), p.device_kv(), params, rows,
                                      AttentionOutput{o_d.data(), c.dtype, lse.as<float>()}, extras, workspace.data(),
                                      nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const int lh = detail::logits_heads_for_group(group);
      const int64_t stride = plan->logits_stride;
      std::vector<float> got(static_cast<size_t>(batch) * c.num_kv_heads * stride * lh);
      ASSERT_EQ(cudaMemcpy(got.data(), anchor_logits(*plan, workspace.data()), got.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      int64_t bad = 0;
      for (int32_t b = 0; b < batch; ++b) {
        for (int32_t g = 0; g < c.num_kv_heads; ++g) {
          for (int32_t j = 0; j < p.kv_lens()[b]; ++j) {
            const float* k = p.k_row(b, j, g);
            for (int i = 0; i < lh; ++i) {
              const float value = got[((static_cast<int64_t>(b) * c.num_kv_heads + g) * stride + j) * lh + i];
              double want = 0.0, magnitude = 0.0;
              if (i < group) {
                const float* q = p.q_row(b, g * group + i);
                for (int ch = 0; ch < d; ++ch) {
                  want += static_cast<double>(q[ch]) * k[ch];
                  magnitude += std::fabs(static_cast<double>(q[ch]) * k[ch]);
                }
                want *= params.scale;
                magnitude *= params.scale;
              }
              if (std::fabs(value - want) > 1e-4 * magnitude + 1e-6 && bad++ < 5) {
                ADD_FAILURE() << "b " << b << " g " << g << " key " << j << " head " << i << ": " << value
                              << " want " << want;
              }
            }
          }
        }
      }
      EXPECT_EQ(bad, 0);
      EXPECT_TRUE(workspace.guards_intact());
    }
  }
}

TEST(AnchorDecode, DefaultBudgetAndExplicitKPerSequence) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeCase c = make_case(DType::kF16, 8, 2, 128, 16, rng);
  c.kv_lens = {4097, 20000};
  DecodeProblem p(c, rng);
  AnchorOptions o = options(2, ScoreReduce::kSum, false);
  o.budget = Budget{};  // rho 10 %, k_min 128
  run_and_check_both(p, o);
  run_and_check_both(p, o, {1, 1500});
}

// run_and_check_both with the row Top-k in each of the forced clusters.
void run_both_in_clusters(const DecodeProblem& p, AnchorOptions anchor, const std::vector<int32_t>& clusters) {
  anchor.topk_algorithm = TopkAlgorithm::kByRows;
  for (const int32_t cluster : clusters) {
    SCOPED_TRACE("cluster " + std::to_string(cluster));
    anchor.topk_row_cluster = cluster;
    run_and_check_both(p, anchor);
  }
}

// The fused pooling in forced clusters of 2, 4 and 8 CTAs, where short rows leave the upper ranks
// slices without keys, for every pooling of the policies and logits blocks of 1, 2, 4 and 8 floats;
// the separate kernels run the row Top-k in the same clusters.
TEST(AnchorDecode, FusedPoolingInClustersOfEverySize) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_BELOW_SM90("thread-block clusters");
  auto rng = testing::rng_for_test();
  struct Shape {
    DType dtype;
    int heads, kv_heads, head_dim, page, rows;
    ScoreReduce reduce;
    bool dense_output;
  };
  for (const Shape& s : {Shape{DType::kBF16, 8, 2, 128, 16, 2, ScoreReduce::kSum, false},   // g 4: kascade
                         Shape{DType::kF16, 8, 8, 64, 32, 8, ScoreReduce::kSum, false},     // g 1
                         Shape{DType::kBF16, 8, 4, 64, 16, 1, ScoreReduce::kMax, true},     // g 2: omnikv
                         Shape{DType::kF16, 12, 2, 128, 64, 12, ScoreReduce::kSum, false},  // g 6: oracle
                         Shape{DType::kBF16, 16, 2, 128, 16, 1, ScoreReduce::kSum, true}}) {  // g 8: pooled
    DecodeCase c = make_case(s.dtype, s.heads, s.kv_heads, s.head_dim, s.page, rng);
    c.kv_lens = {33, 20000, 4097, 1, 9001};
    DecodeProblem p(c, rng);
    SCOPED_TRACE("H " + std::to_string(s.heads) + ", G " + std::to_string(s.kv_heads) + ", rows " +
                 std::to_string(s.rows));
    run_both_in_clusters(p, options(s.rows, s.reduce, s.dense_output), {2, 4, 8});
  }
}

// Nearly equal scores (tiny q): most of a slice's keys share the threshold bin of the first digit,
// so a CTA's candidates overflow its list and it counts the later digits by passes over its shared
// slice — alone (cluster 1) or beside ranks whose candidates fit (short rows, cluster 8).
TEST(AnchorDecode, FusedPoolingCountsByPassesWhereTheCandidatesOverflow) {
  KC_SKIP_WITHOUT_GPU();
  auto clusters = detail::current_device_has_clusters();
  ASSERT_TRUE(clusters.ok());
  auto rng = testing::rng_for_test();
  DecodeCase c = make_case(DType::kBF16, 8, 2, 128, 16, rng);
  c.kv_lens = {20000, 12000, 3000, 700};
  c.q_range = 0.01f;
  DecodeProblem p(c, rng);
  run_both_in_clusters(p, options(2, ScoreReduce::kSum, false), *clusters ? std::vector<int32_t>{1, 2, 8}
                                                                          : std::vector<int32_t>{1});
}

// Without write_pooled_scores the fused pooling keeps its scores on chip and selects the same rows.
TEST(AnchorDecode, FusedPoolingWithoutWrittenScoresSelectsTheSameRows) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeCase c = make_case(DType::kBF16, 8, 2, 128, 16, rng);
  c.kv_lens = {20000, 129, 4097};
  DecodeProblem p(c, rng);
  AnchorOptions o = options(2, ScoreReduce::kSum, false);
  o.pool_fusion = PoolFusion::kFused;
  const AnchorRun written = run_and_check_anchor(p, o);
  const AnchorRun on_chip = run_and_check_anchor(p, o, {}, /*write_scores=*/false);
  EXPECT_EQ(on_chip.indices, written.indices);
  EXPECT_EQ(on_chip.row_lens, written.row_lens);
  EXPECT_EQ(on_chip.o, written.o);
}

TEST(AnchorDecode, FusedPoolingRefusesWhatItCannotHold) {
  KC_SKIP_WITHOUT_GPU();
  DecodeShape s{DType::kBF16, /*batch=*/2, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_dim=*/128, /*page_size=*/16,
                /*max_seq_len=*/100000};
  AnchorOptions o = options(2, ScoreReduce::kSum, false);
  o.pool_fusion = PoolFusion::kFused;
  o.topk_algorithm = TopkAlgorithm::kChunked;
  auto chunked = plan_anchor_decode(s, o);
  ASSERT_FALSE(chunked.ok());
  EXPECT_NE(chunked.status().message().find("kChunked"), std::string::npos) << chunked.status().message();
  o.topk_algorithm = TopkAlgorithm::kAuto;
  o.topk_row_cluster = 1;  // one CTA cannot hold 100000 keys
  auto one_cta = plan_anchor_decode(s, o);
  ASSERT_FALSE(one_cta.ok());
  EXPECT_NE(one_cta.status().message().find("max_seq_len is 100000"), std::string::npos) << one_cta.status().message();
  o.topk_row_cluster = 0;
  s.max_seq_len = detail::kRowTopkMaxKeys + 1;
  auto too_long = plan_anchor_decode(s, o);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("PoolFusion::kSeparate"), std::string::npos) << too_long.status().message();
  s.max_seq_len = 100000;
  auto planned = plan_anchor_decode(s, o);
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  EXPECT_EQ(planned->options.pool_fusion, PoolFusion::kFused);
  EXPECT_TRUE(planned->topk.by_rows);
  EXPECT_LE(detail::row_topk_slice_keys(s.max_seq_len, planned->topk.row_cluster), detail::kFusedPoolMaxSliceKeys);
}

TEST(AnchorDecode, RefusesPoolingThatCannotServeTheOutput) {
  KC_SKIP_WITHOUT_GPU();
  DecodeShape s{DType::kF16, /*batch=*/2, /*num_heads=*/12, /*num_kv_heads=*/4, /*head_dim=*/128, /*page_size=*/16,
                /*max_seq_len=*/1000};
  auto bad = plan_anchor_decode(s, options(5, ScoreReduce::kSum, false));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("num_rows is 5"), std::string::npos) << bad.status().message();
  auto bad_sparse = plan_anchor_decode(s, options(6, ScoreReduce::kSum, false));  // divides H, not G
  ASSERT_FALSE(bad_sparse.ok());
  EXPECT_NE(bad_sparse.status().message().find("num_rows is 6"), std::string::npos);
  EXPECT_TRUE(plan_anchor_decode(s, options(6, ScoreReduce::kMax, true)).ok());
}

}  // namespace
}  // namespace kascade::cuda
