// tests/cuda/test_radix_topk.cpp — the GPU radix Top-k (src/cuda/kascade/radix_topk.h), both
// algorithms on the same inputs (the chunked radix select and the row kernel, with the plan's
// cluster of CTAs per row and with clusters of 1, 2 and 8 forced), must equal
// ref::topk_select_ref exactly (same set, ascending order, ties to the lower index) on random
// scores, heavily tied scores (a few distinct values, ±0), ±inf, lengths that are not multiples of
// 4, k from 1 to n through explicit k_per_seq and through the budget k(n), rows cut into one chunk
// CTA and into many, rows whose threshold bin fits the row kernel's candidate list and rows where it
// does not (its passes over the row); rows are −1 padded (outputs poisoned with 0x7F7F7F7F first)
// and row_lens hold k; a second run on the same scratch gives the same rows (the scratch is left
// ready). The plan's choice of algorithm is checked without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/common/plan_support.h"
#include "cuda/kascade/radix_topk.h"
#include "cuda_test_support.h"
#include "kascade/budget.h"
#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DeviceBuffer;

enum class Pattern { kUniform, kFewValues, kSignedZerosAndInf, kAllEqual, kSoftmaxLike };

std::vector<float> make_scores(std::mt19937_64& rng, int32_t n, Pattern pattern) {
  std::vector<float> s(n);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 3);
  for (int32_t i = 0; i < n; ++i) {
    switch (pattern) {
      case Pattern::kUniform: s[i] = u(rng) * 2.0f - 1.0f; break;
      case Pattern::kFewValues: {
        static constexpr float kValues[] = {0.25f, 0.5f, 0.5f, 1.0f};
        s[i] = kValues[pick(rng)];
        break;
      }
      case Pattern::kSignedZerosAndInf: {
        static constexpr float kValues[] = {-0.0f, 0.0f, std::numeric_limits<float>::infinity(), -1.5f};
        s[i] = kValues[pick(rng)];
        if (i % 97 == 5) s[i] = -std::numeric_limits<float>::infinity();
        break;
      }
      case Pattern::kAllEqual: s[i] = 0.125f; break;
      case Pattern::kSoftmaxLike: s[i] = std::exp(8.0f * u(rng)) * 1e-6f; break;
    }
  }
  return s;
}

struct TopkCase {
  std::vector<int32_t> kv_lens;   // per sequence
  std::vector<int32_t> k;         // per sequence, or empty: k(n) from the budget
  int32_t num_rows = 1;
  Pattern pattern = Pattern::kUniform;
  Budget budget;
};

// A Top-k configuration under test: the algorithm and, for the row kernel, its CTAs per row (0: the plan's).
struct Variant {
  TopkAlgorithm algorithm = TopkAlgorithm::kAuto;
  int32_t row_cluster = 0;
};
constexpr Variant kChunked{TopkAlgorithm::kChunked, 0};
constexpr Variant kByRows{TopkAlgorithm::kByRows, 0};
constexpr Variant kVariants[] = {kChunked, kByRows, {TopkAlgorithm::kByRows, 1}, {TopkAlgorithm::kByRows, 2},
                                 {TopkAlgorithm::kByRows, 8}};
std::string variant_name(const Variant& v) {
  if (v.algorithm == TopkAlgorithm::kChunked) return "chunked";
  return "by rows, cluster " + (v.row_cluster == 0 ? std::string("of the plan") : std::to_string(v.row_cluster));
}

// Returns the Top-k plan's chunks per row for the case (for the tests that need one or many).
void expect_topk_exact(const TopkCase& c, std::mt19937_64& rng, const Variant& variant,
                       int32_t* max_chunks = nullptr) {
  SCOPED_TRACE(variant_name(variant));
  if (variant.row_cluster > 1 && !*detail::current_device_has_clusters()) return;  // clusters need sm_90+
  const int32_t batch = static_cast<int32_t>(c.kv_lens.size());
  int32_t max_len = 1;
  for (int32_t n : c.kv_lens) max_len = std::max(max_len, n);
  const int64_t stride = (max_len + 3) / 4 * 4;
  std::vector<float> scores(static_cast<size_t>(batch) * c.num_rows * stride, std::nanf(""));  // padding never read
  for (int32_t b = 0; b < batch; ++b)
    for (int32_t r = 0; r < c.num_rows; ++r) {
      const auto row = make_scores(rng, c.kv_lens[b], c.pattern);
      std::copy(row.begin(), row.end(), scores.begin() + (static_cast<int64_t>(b) * c.num_rows + r) * stride);
    }
  int32_t k_max = 1;
  for (int32_t b = 0; b < batch; ++b)
    k_max = std::max<int32_t>(k_max, c.k.empty() ? static_cast<int32_t>(budget_k(c.kv_lens[b], c.budget)) : c.k[b]);
  k_max = std::max<int32_t>(k_max, static_cast<int32_t>(budget_k(max_len, c.budget)));
  DeviceBuffer scores_d = testing::upload_vector(scores);
  DeviceBuffer lens_d = testing::upload_vector(c.kv_lens);
  DeviceBuffer k_d = testing::upload_vector(c.k);
  DeviceBuffer indices(static_cast<size_t>(batch) * c.num_rows * k_max * sizeof(int32_t), 0x7F);
  DeviceBuffer row_lens(static_cast<size_t>(batch) * c.num_rows * sizeof(int32_t), 0x7F);
  DeviceBuffer flags(sizeof(uint32_t), 0);
  DecodeIndexRows out{indices.as<int32_t>(), row_lens.as<int32_t>(), batch, c.num_rows, k_max,
                      IndexGranularity::kPerKvGroup};
  const Result<size_t> scratch_bytes = radix_topk_scratch_bytes(batch, c.num_rows, max_len);
  ASSERT_TRUE(scratch_bytes.ok()) << scratch_bytes.status().to_string();
  DeviceBuffer scratch(*scratch_bytes, 0);
  if (max_chunks != nullptr) {
    const Result<detail::TopkPlan> plan = detail::plan_topk(static_cast<int64_t>(batch) * c.num_rows, max_len);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    *max_chunks = plan->max_chunks;
  }
  auto run = [&] {
    return radix_topk_decode(scores_d.as<float>(), stride, lens_d.as<int32_t>(), batch, max_len, c.budget,
                             c.k.empty() ? nullptr : k_d.as<int32_t>(), out, scratch.as<void>(),
                             flags.as<uint32_t>(), nullptr, variant.algorithm, variant.row_cluster);
  };
  KC_ASSERT_OK(run());
  const auto first = indices.download_as<int32_t>();
  KC_ASSERT_OK(run());  // the same scratch again: histograms and tickets were left zeroed
  const auto got = indices.download_as<int32_t>();
  EXPECT_EQ(got, first) << "a second run on the same scratch differs";
  const auto got_lens = row_lens.download_as<int32_t>();
  EXPECT_EQ(flags.download_as<uint32_t>()[0], 0u);
  EXPECT_TRUE(indices.guards_intact());
  EXPECT_TRUE(row_lens.guards_intact());
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t n = c.kv_lens[b];
    const int32_t k = c.k.empty() ? static_cast<int32_t>(budget_k(n, c.budget)) : c.k[b];
    for (int32_t r = 0; r < c.num_rows; ++r) {
      SCOPED_TRACE("b " + std::to_string(b) + " row " + std::to_string(r) + " n " + std::to_string(n) + " k " +
                   std::to_string(k));
      const int64_t row = static_cast<int64_t>(b) * c.num_rows + r;
      ASSERT_EQ(got_lens[row], k);
      std::vector<int32_t> want(k);
      KC_ASSERT_OK(ref::topk_select_ref(scores.data() + row * stride, n, k, want.data()));
      const std::vector<int32_t> have(got.begin() + row * k_max, got.begin() + row * k_max + k);
      ASSERT_EQ(have, want);
      for (int32_t i = k; i < k_max; ++i) ASSERT_EQ(got[row * k_max + i], -1) << "padding at " << i;
    }
  }
}

TEST(RadixTopk, EqualsReferenceOnRandomScoresForEveryK) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  TopkCase c;
  c.kv_lens = {1, 31, 33, 127, 1000, 4097, 4097, 4097, 4097};
  c.k = {1, 30, 17, 64, 999, 1, 2048, 4096, 4097};
  c.num_rows = 3;
  for (const Variant& v : kVariants) expect_topk_exact(c, rng, v);
}

TEST(RadixTopk, TiesGoToTheLowerIndexExactly) {
  KC_SKIP_WITHOUT_GPU();
  for (Pattern pattern : {Pattern::kFewValues, Pattern::kSignedZerosAndInf, Pattern::kAllEqual}) {
    SCOPED_TRACE("pattern " + std::to_string(static_cast<int>(pattern)));
    auto rng = testing::rng_for_test(static_cast<uint64_t>(pattern));
    TopkCase c;
    c.kv_lens = {9, 129, 1000, 8191, 20000};
    c.k = {4, 77, 500, 3000, 19999};
    c.num_rows = 2;
    c.pattern = pattern;
    for (const Variant& v : kVariants) expect_topk_exact(c, rng, v);
  }
}

TEST(RadixTopk, BudgetKOfEachLength) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  TopkCase c;
  for (int n : testing::awkward_lengths()) c.kv_lens.push_back(n);
  c.kv_lens.push_back(0);  // an empty sequence selects nothing
  c.kv_lens.push_back(65536);
  c.num_rows = 4;
  c.pattern = Pattern::kSoftmaxLike;
  c.budget.k_min = 16;
  for (const Variant& v : kVariants) expect_topk_exact(c, rng, v);
  c.budget.k_round = 128;  // rounded-up k, capped by n
  for (const Variant& v : kVariants) expect_topk_exact(c, rng, v);
}

TEST(RadixTopk, FewLongRowsSpreadOverManyChunks) {
  KC_SKIP_WITHOUT_GPU();
  for (Pattern pattern : {Pattern::kFewValues, Pattern::kSoftmaxLike}) {
    SCOPED_TRACE("pattern " + std::to_string(static_cast<int>(pattern)));
    auto rng = testing::rng_for_test(static_cast<uint64_t>(pattern));
    TopkCase c;
    c.kv_lens = {100003, 8193, 50000};  // ties cross chunk boundaries; a length one past a chunk
    c.k = {50001, 8192, 3};
    c.pattern = pattern;
    int32_t max_chunks = 0;
    expect_topk_exact(c, rng, kChunked, &max_chunks);
    EXPECT_GT(max_chunks, 1) << "the case must cut rows into several chunk CTAs";
    for (int32_t cluster : {0, 1, 4}) expect_topk_exact(c, rng, {TopkAlgorithm::kByRows, cluster});
  }
}

TEST(RadixTopk, ManyRowsOneChunkEach) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  TopkCase c;
  c.kv_lens = {20001, 17};
  c.k = {2001, 5};
  c.num_rows = 400;  // 800 rows: more than two per multiprocessor on any current GPU
  c.pattern = Pattern::kFewValues;
  int32_t max_chunks = 0;
  expect_topk_exact(c, rng, kChunked, &max_chunks);
  EXPECT_EQ(max_chunks, 1) << "the case must give each row one CTA";
  expect_topk_exact(c, rng, kByRows);
  expect_topk_exact(c, rng, {TopkAlgorithm::kByRows, 2});
}

// The row kernel lists the keys of the first digit's threshold bin when at most
// kRowTopkCandidates of them exist, and passes over the row otherwise; each case below is checked on
// the host to take the path it is meant for.
int first_digit_candidates(const std::vector<float>& s, int32_t k) {
  auto key = [](float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    if (bits == 0x80000000u) bits = 0u;
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  };
  std::vector<int> hist(detail::kTopkBins, 0);
  for (float x : s) ++hist[key(x) >> detail::kTopkFirstShift];
  int above = 0;
  for (int d = detail::kTopkBins - 1; d >= 0; --d) {
    if (above + hist[d] >= k) return hist[d];
    above += hist[d];
  }
  return 0;
}

TEST(RadixTopk, RowKernelListedAndPassPaths) {
  KC_SKIP_WITHOUT_GPU();
  for (Pattern pattern : {Pattern::kUniform, Pattern::kFewValues}) {
    SCOPED_TRACE("pattern " + std::to_string(static_cast<int>(pattern)));
    auto probe_rng = testing::rng_for_test(static_cast<uint64_t>(pattern));
    const int cands = first_digit_candidates(make_scores(probe_rng, 100000, pattern), 10000);
    if (pattern == Pattern::kUniform) {
      EXPECT_LE(cands, detail::kRowTopkCandidates) << "uniform scores must fit the candidate list";
    } else {
      EXPECT_GT(cands, detail::kRowTopkCandidates) << "a few values must overflow the candidate list";
    }
    auto rng = testing::rng_for_test(static_cast<uint64_t>(pattern));
    TopkCase c;
    c.kv_lens = {100000, 262144};
    c.k = {10000, 26215};
    c.pattern = pattern;
    for (int32_t cluster : {0, 1, 2}) expect_topk_exact(c, rng, {TopkAlgorithm::kByRows, cluster});
  }
}

// Host arithmetic only: runs without a GPU.
TEST(RadixTopkPlan, FewRowsGetManyChunksAndManyRowsOne) {
  struct Want {
    int64_t rows;
    int32_t len;
    int32_t chunk, chunks;
  };
  // 132 SMs (H200): 264 CTAs wanted.
  for (const Want& w : {Want{8, 131072, 8192, 16},      // B = 1, G = 8: the row's 16 quanta, one each
                        Want{64, 131072, 32768, 4},     // B = 8: ceil(264 / 64) = 5 -> 4 quanta a chunk
                        Want{512, 131072, 131072, 1},   // B = 64: the rows alone fill the GPU
                        Want{8, 32768, 8192, 4},        // 4 quanta, at most one each
                        Want{3, 100, 8192, 1},          // shorter than one quantum
                        Want{1, 8193, 8192, 2}}) {      // one past a quantum
    SCOPED_TRACE("rows " + std::to_string(w.rows) + " len " + std::to_string(w.len));
    const Result<detail::TopkPlan> plan = detail::plan_topk_for(w.rows, w.len, 132);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_EQ(plan->chunk, w.chunk);
    EXPECT_EQ(plan->max_chunks, w.chunks);
    EXPECT_EQ(plan->chunk % detail::kTopkChunkQuantum, 0);
    EXPECT_GE(static_cast<int64_t>(plan->chunk) * plan->max_chunks, w.len);
    EXPECT_LT(static_cast<int64_t>(plan->chunk) * (plan->max_chunks - 1), w.len) << "no chunk lies wholly past the end";
    EXPECT_GE(plan->scratch_bytes, static_cast<size_t>(w.rows) * (detail::kTopkBins + 1 + detail::kTopkStateWords) * 4);
  }
  EXPECT_FALSE(detail::plan_topk_for(0, 100, 132).ok());
  EXPECT_FALSE(detail::plan_topk_for(8, 0, 132).ok());
  EXPECT_FALSE(detail::plan_topk_for(8, 100, 0).ok());
}

// Host arithmetic only: runs without a GPU.
TEST(RadixTopkPlan, RowKernelForRowsThatFitItsMasks) {
  using detail::kRowTopkMaxKeys;
  // kAuto: rows when they fill a wave of one CTA per SM (B = 64 × 8 rows), or when the chunked
  // select keeps one chunk per row (rows of <= 8192 scores); chunks for a few long rows (B = 8).
  // Clusters: the most CTAs per row (<= 8) with rows · cluster <= SMs and >= 8192 keys a CTA; kAuto
  // takes the row kernel when rows · cluster >= SMs / 4 or a row is one chunk anyway.
  struct Want {
    int64_t rows;
    int32_t len;
    bool by_rows;
    int32_t cluster;
  };
  for (const Want& w : {Want{512, 131072, true, 1},             // B = 64, G = 8: the rows alone fill the GPU
                        Want{132, kRowTopkMaxKeys, true, 1},
                        Want{131, 131072, true, 1},
                        Want{64, 131072, true, 2},               // B = 8
                        Want{32, 131072, true, 4},               // B = 4
                        Want{8, 131072, true, 8},                // B = 1: 64 CTAs
                        Want{1, 131072, false, 8},               // one row: 8 CTAs, the chunks instead
                        Want{8, 32768, false, 4},                // slices of >= 8192 keys: 32 CTAs only
                        Want{32, 32768, true, 4},
                        Want{8, 8192, true, 1},                  // one chunk a row anyway
                        Want{8, 8193, false, 1}}) {
    SCOPED_TRACE("rows " + std::to_string(w.rows) + " len " + std::to_string(w.len));
    const Result<detail::TopkPlan> plan = detail::plan_topk_for(w.rows, w.len, 132);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_EQ(plan->by_rows, w.by_rows);
    EXPECT_EQ(plan->row_cluster, w.cluster);
  }
  // A GPU without thread-block clusters (before sm_90) keeps one CTA a row.
  EXPECT_EQ(detail::plan_topk_for(64, 131072, 108, TopkAlgorithm::kAuto, /*clusters=*/false)->row_cluster, 1);
  EXPECT_FALSE(detail::plan_topk_for(64, 131072, 108, TopkAlgorithm::kAuto, /*clusters=*/false)->by_rows);
  EXPECT_FALSE(detail::plan_topk_for(512, kRowTopkMaxKeys + 1, 132)->by_rows);
  EXPECT_FALSE(detail::plan_topk_for(64, 4096, 132, TopkAlgorithm::kChunked)->by_rows);
  EXPECT_TRUE(detail::plan_topk_for(64, 4096, 132, TopkAlgorithm::kByRows)->by_rows);
  const Result<detail::TopkPlan> too_long = detail::plan_topk_for(8, kRowTopkMaxKeys + 1, 132, TopkAlgorithm::kByRows);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("rows of up to 262144 scores"), std::string::npos)
      << too_long.status().message();
  for (int32_t cluster : {1, 2, 4, 8})
    EXPECT_LE(detail::row_topk_smem_bytes(kRowTopkMaxKeys, cluster), size_t{227} * 1024) << "must fit one multiprocessor";
}

// Host arithmetic only: runs without a GPU. The fused pooling's cluster: the fewest CTAs (at least
// the plan's) whose slices hold <= 16K keys (two CTAs per SM), else the most CTAs if their slices
// hold <= 32K, else none; without clusters only rows of <= 32K keys.
TEST(RadixTopkPlan, FusedPoolingClusterHoldsTheRowInSharedMemory) {
  using detail::fused_pool_cluster;
  using detail::kRowTopkMaxKeys;
  struct Want {
    int32_t len, min_cluster;
    bool clusters;
    int32_t cluster;
  };
  for (const Want& w : {Want{131072, 1, true, 8},             // 16K slices
                        Want{131072, 8, true, 8},
                        Want{65536, 1, true, 4},
                        Want{65536, 8, true, 8},              // the plan wants more CTAs: kept
                        Want{20000, 1, true, 2},              // 625 words: slices of 313 · 32 keys
                        Want{4097, 1, true, 1},
                        Want{4097, 4, true, 4},
                        Want{kRowTopkMaxKeys, 1, true, 8},    // 32K slices: one CTA per SM
                        Want{kRowTopkMaxKeys + 1, 1, true, 0},
                        Want{16384, 1, false, 1},
                        Want{32768, 1, false, 1},             // one CTA holds a 32K row
                        Want{32769, 1, false, 0}}) {
    SCOPED_TRACE("len " + std::to_string(w.len) + " min " + std::to_string(w.min_cluster));
    const int32_t cluster = fused_pool_cluster(w.len, w.min_cluster, w.clusters);
    EXPECT_EQ(cluster, w.cluster);
    if (cluster == 0) continue;
    EXPECT_LE(detail::row_topk_slice_keys(w.len, cluster), detail::kFusedPoolMaxSliceKeys);
    EXPECT_GE(static_cast<int64_t>(detail::row_topk_slice_keys(w.len, cluster)) * cluster, w.len);
    EXPECT_LE(detail::row_topk_smem_bytes(w.len, cluster, /*fused_pooling=*/true), size_t{227} * 1024);
  }
  // Slices of <= 16K keys leave room for two CTAs per multiprocessor (228 KB).
  EXPECT_LE(2 * detail::row_topk_smem_bytes(131072, 8, /*fused_pooling=*/true), size_t{227} * 1024);
  EXPECT_EQ(detail::row_topk_slice_keys(20000, 2), 313 * 32);
}

TEST(RadixTopk, RefusesRowsNarrowerThanTheBudget) {
  KC_SKIP_WITHOUT_GPU();
  DeviceBuffer scores(1024 * sizeof(float)), lens(sizeof(int32_t)), indices(16 * sizeof(int32_t)),
      row_lens(sizeof(int32_t)), flags(sizeof(uint32_t), 0), scratch(1 << 16, 0);
  DecodeIndexRows out{indices.as<int32_t>(), row_lens.as<int32_t>(), 1, 1, 16, IndexGranularity::kPerKvGroup};
  Budget budget;  // k(1024) = 128 > 16
  Status st = radix_topk_decode(scores.as<float>(), 1024, lens.as<int32_t>(), 1, 1024, budget, nullptr, out,
                                scratch.as<void>(), flags.as<uint32_t>(), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out.k_max is 16"), std::string::npos) << st.message();
  st = radix_topk_decode(scores.as<float>(), 1022, lens.as<int32_t>(), 1, 1022, budget, nullptr, out,
                         scratch.as<void>(), flags.as<uint32_t>(), nullptr);
  EXPECT_NE(st.message().find("scores_stride is 1022"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kascade::cuda
