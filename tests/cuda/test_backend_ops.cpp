// tests/cuda/test_backend_ops.cpp — the CUDA backend's ops one by one (src/cuda/backend/):
//   - supports(): every op (the prefill oracle included) for the shapes the kernels are built for;
//     refusals naming the value (head_dim 96, GQA group size 9, dtype f32) (no GPU needed: these run
//     in CI);
//     option validation; decode plans made for the call's batch bucket (decode_plan_batch, shape_of);
//     the prefill oracle's host plan of a call (plan_oracle_queries: sequence, position, slot, k of
//     every query, and refusals of inconsistent rows);
//     the LessIsMore row equivalence helper on hand-made rows;
//   - on the GPU, each against the CPU backend on the same data (host views vs device views):
//     select_decode for every pooling (per KV group, all heads sum / max, per query head, and a
//     row count that divides neither G nor equals H) as tie-aware Top-k sets against fp64 pooled
//     scores; anchor_decode fused (dense and sparse outputs) and composed (a layout the fused
//     kernel does not read) with outputs against fp64 by the FA3 rule; Quest rows exactly equal
//     (several page sizes, k = 0, budget, n); LessIsMore rows (sinks 0 / 4 / 7, k = 0, 3, budget,
//     n) up to near-ties; refusals of bad views (and of several queries per sequence in the
//     decode-only ops); device errors surfacing at the next host read or after every op, and through
//     the two halves of the check (enqueue, the caller's sync, finish); memory
//     round trips (pageable and pinned sources).
// The prefill ops are tested by test_backend_prefill.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/decode_plan_cache.h"
#include "cuda/backend/oracle_prefill_select.h"
#include "cuda/common/cuda_status.h"
#include "cuda_test_support.h"
#include "policy/cpu_backend.h"
#include "test_backend_support.h"
#include "testing/harness.h"
#include "testing/status_assertions.h"

namespace kascade::testing {
namespace {

// Every op of the backend interface: the CUDA backend runs them all.
const BackendOp kCudaOps[] = {BackendOp::kDense,         BackendOp::kSelectDecode,      BackendOp::kSparseDecode,
                              BackendOp::kSelectPrefill, BackendOp::kSparsePrefill,     BackendOp::kSelectQuestDecode,
                              BackendOp::kSelectLessIsMoreDecode, BackendOp::kSelectPrefillOracle};

// ---- no GPU needed ----

TEST(CudaBackendSupport, AcceptsTheShapesTheKernelsAreBuiltFor) {
  for (BackendOp op : kCudaOps) {
    for (int32_t d : {64, 128}) {
      for (int32_t g = 1; g <= 8; ++g) {
        const AttentionShape shape{4 * g, 4, d};
        const Status s = cuda_backend_supports(op, shape);
        EXPECT_TRUE(s.ok()) << backend_op_name(op) << " d " << d << " g " << g << ": " << s.to_string();
      }
    }
  }
  EXPECT_TRUE(cuda_backend_supports_dtype(DType::kF16).ok());
  EXPECT_TRUE(cuda_backend_supports_dtype(DType::kBF16).ok());
}

TEST(CudaBackendSupport, RefusesShapesNamingTheValue) {
  for (BackendOp op : kCudaOps) {
    SCOPED_TRACE(backend_op_name(op));
    EXPECT_TRUE(refused_naming(cuda_backend_supports(op, {32, 8, 96}), StatusCode::kUnsupported, "head_dim is 96"));
    EXPECT_TRUE(refused_naming(cuda_backend_supports(op, {36, 4, 128}), StatusCode::kUnsupported,
                               "GQA group size is 9"));
    EXPECT_TRUE(refused_naming(cuda_backend_supports(op, {10, 4, 128}), StatusCode::kInvalidArgument,
                               "10 query heads over 4 KV heads"));
    EXPECT_TRUE(refused_naming(cuda_backend_supports(op, {32, 8, 96}), StatusCode::kUnsupported, backend_op_name(op)));
  }
  EXPECT_TRUE(refused_naming(cuda_backend_supports_dtype(DType::kF32), StatusCode::kUnsupported, "dtype is f32"));
}

// CSR offsets of `heads` rows per query with the given row lengths (one entry per head).
std::vector<int64_t> oracle_offsets(const std::vector<std::vector<int32_t>>& lens_per_query) {
  std::vector<int64_t> offsets = {0};
  for (const auto& heads : lens_per_query)
    for (int32_t len : heads) offsets.push_back(offsets.back() + len);
  return offsets;
}

TEST(CudaBackendSupport, OracleQueriesArePlannedAndChecked) {
  // Sequence 0: 3 queries at positions 2..4 of 5 keys; sequence 1: 2 queries at 0..1 of 2 keys.
  const std::vector<int32_t> cu = {0, 3, 5}, kv = {5, 2}, tiles = {0, 3, 5};
  const std::vector<std::vector<int32_t>> lens = {{2, 2}, {3, 3}, {3, 3}, {1, 1}, {2, 2}};
  auto planned = cuda::plan_oracle_queries(cu, kv, tiles, oracle_offsets(lens), 2);
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  const std::vector<cuda::OracleQuery>& q = *planned;
  ASSERT_EQ(q.size(), 5u);
  const int32_t want_seq[] = {0, 0, 0, 1, 1}, want_pos[] = {2, 3, 4, 0, 1}, want_k[] = {2, 3, 3, 1, 2};
  for (size_t i = 0; i < q.size(); ++i) {
    EXPECT_EQ(q[i].sequence, want_seq[i]) << i;
    EXPECT_EQ(q[i].position, want_pos[i]) << i;
    EXPECT_EQ(q[i].slot, static_cast<int64_t>(i)) << i;
    EXPECT_EQ(q[i].k, want_k[i]) << i;
  }
  // Slots laid out from tile_base, not from the packed query index.
  const std::vector<int32_t> cu_b = {0, 2, 3}, kv_b = {2, 9}, tiles_b = {0, 2, 3};
  auto second = cuda::plan_oracle_queries(cu_b, kv_b, tiles_b, oracle_offsets({{1, 1}, {2, 2}, {5, 5}}), 2);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ((*second)[2].position, 8);
  EXPECT_EQ((*second)[2].k, 5);

  auto heads_differ = cuda::plan_oracle_queries(cu, kv, tiles, oracle_offsets({{2, 2}, {3, 2}, {3, 3}, {1, 1}, {2, 2}}), 2);
  EXPECT_TRUE(refused_naming(heads_differ.status(), StatusCode::kInvalidArgument,
                             "query 1 of sequence 0 has rows of 3 and 2 keys"));
  auto too_many = cuda::plan_oracle_queries(cu, kv, tiles, oracle_offsets({{2, 2}, {3, 3}, {3, 3}, {2, 2}, {2, 2}}), 2);
  EXPECT_TRUE(refused_naming(too_many.status(), StatusCode::kInvalidArgument, "(position 0) has rows of 2 keys"));
  auto slots = cuda::plan_oracle_queries(cu, kv, {0, 2, 5}, oracle_offsets(lens), 2);
  EXPECT_TRUE(refused_naming(slots.status(), StatusCode::kInvalidArgument, "has 3 queries but 2 tile slots"));
  auto total = cuda::plan_oracle_queries(cu, kv, {0, 3, 6}, oracle_offsets(lens), 2);
  EXPECT_TRUE(refused_naming(total.status(), StatusCode::kInvalidArgument, "rows hold 6 tile slots"));
  std::vector<int64_t> short_offsets = oracle_offsets(lens);
  short_offsets.pop_back();
  auto offsets = cuda::plan_oracle_queries(cu, kv, tiles, short_offsets, 2);
  EXPECT_TRUE(refused_naming(offsets.status(), StatusCode::kInvalidArgument, "10 row offsets for 5 slots"));
}

TEST(CudaBackendSupport, ValidatesItsOptions) {
  CudaBackendOptions good;
  good.max_seq_len = 4096;
  EXPECT_TRUE(validate_cuda_backend_options(good).ok());
  CudaBackendOptions o = good;
  o.max_seq_len = 0;
  EXPECT_TRUE(refused_naming(validate_cuda_backend_options(o), StatusCode::kInvalidArgument, "max_seq_len is 0"));
  o = good;
  o.max_batch = 0;
  EXPECT_TRUE(refused_naming(validate_cuda_backend_options(o), StatusCode::kInvalidArgument, "max_batch is 0"));
  o = good;
  o.device = -1;
  EXPECT_TRUE(refused_naming(validate_cuda_backend_options(o), StatusCode::kInvalidArgument, "device is -1"));
  o = good;
  o.budget.rho_ppm = 0;
  EXPECT_TRUE(refused_naming(validate_cuda_backend_options(o), StatusCode::kInvalidArgument, "options.budget"));
  // Invalid options are refused before any device is touched.
  EXPECT_TRUE(refused_naming(CudaBackend::create(o).status(), StatusCode::kInvalidArgument, "options.budget"));
}

TEST(CudaBackendSupport, CreateNeedsADevice) {
  CudaBackendOptions options;
  options.max_seq_len = 128;
  auto backend = make_cuda_backend(options);
  if (cuda_device_available()) {
    EXPECT_TRUE(backend.ok()) << backend.status().to_string();
  } else {
    EXPECT_TRUE(refused_naming(backend.status(), StatusCode::kUnsupported, "no CUDA device"));
  }
}

TEST(CudaBackendSupport, DecodePlansAreMadeForTheCallsBatchBucket) {
  // Next power of two of the call's batch, capped at max_batch: a single sequence is never split as
  // if max_batch sequences shared the GPU.
  EXPECT_EQ(cuda::decode_plan_batch(1, 8), 1);
  EXPECT_EQ(cuda::decode_plan_batch(2, 8), 2);
  EXPECT_EQ(cuda::decode_plan_batch(3, 8), 4);
  EXPECT_EQ(cuda::decode_plan_batch(5, 8), 8);
  EXPECT_EQ(cuda::decode_plan_batch(8, 8), 8);
  EXPECT_EQ(cuda::decode_plan_batch(5, 6), 6);
  EXPECT_EQ(cuda::decode_plan_batch(1, 1), 1);
  for (int32_t max_batch : {1, 3, 8, 64, 100}) {
    for (int32_t batch = 1; batch <= max_batch; ++batch) {
      const int32_t planned = cuda::decode_plan_batch(batch, max_batch);
      ASSERT_GE(planned, batch);
      ASSERT_LE(planned, max_batch);
      ASSERT_LT(planned, 2 * batch) << "at most twice the call's sequences";
    }
  }
  cuda::DecodePlanCache cache(/*max_seq_len=*/131072, Budget{}, nullptr);
  cuda::DecodeKey key;
  key.dtype = DType::kBF16;
  key.num_heads = 32;
  key.num_kv_heads = 8;
  key.head_dim = 128;
  key.page_size = 128;
  for (int32_t plan_batch : {1, 4}) {
    key.plan_batch = plan_batch;
    const cuda::DecodeShape s = cache.shape_of(key);
    EXPECT_EQ(s.batch, plan_batch);
    EXPECT_EQ(s.max_seq_len, 131072);
    EXPECT_EQ(s.num_kv_heads, 8);
  }
}

TEST(CudaBackendSupport, LessIsMoreEquivalenceAcceptsNearTiesOnly) {
  // Two heads over n = 10 keys; k = 8 → recent window 2 (keys 8, 9); sinks 1 (key 0).
  const int64_t n = 10;
  std::vector<double> probs(2 * n);
  for (int64_t i = 0; i < 2 * n; ++i) probs[i] = 0.01 * (1.0 + 0.1 * static_cast<double>(i));  // no accidental ties
  probs[3] = 0.2;
  probs[4] = 0.2 * (1 + 1e-7);  // head 0: keys 3 and 4 nearly tied
  probs[n + 5] = 0.3;           // head 1: key 5 far above key 6
  probs[n + 6] = 0.1;
  const std::vector<int32_t> want = {0, 3, 5, 8, 9};
  EXPECT_TRUE(lessismore_rows_equivalent(want, want, probs, 2, n, 8, 1, 1e-4));
  EXPECT_TRUE(lessismore_rows_equivalent({0, 4, 5, 8, 9}, want, probs, 2, n, 8, 1, 1e-4));
  EXPECT_FALSE(lessismore_rows_equivalent({0, 3, 6, 8, 9}, want, probs, 2, n, 8, 1, 1e-4));
  EXPECT_FALSE(lessismore_rows_equivalent({1, 3, 5, 8, 9}, want, probs, 2, n, 8, 1, 1e-4)) << "sink missing";
  EXPECT_FALSE(lessismore_rows_equivalent({0, 3, 5, 8}, want, probs, 2, n, 8, 1, 1e-4)) << "size";
}

// ---- on the GPU ----

struct OpProblem {
  std::unique_ptr<DecodeProblem> problem;
  std::shared_ptr<CudaBackend> cuda;
  CpuBackend cpu;
};

OpProblem make_op_problem(const DecodeCase& c, std::mt19937_64& rng, bool check_every_op = false) {
  OpProblem op;
  op.problem = std::make_unique<DecodeProblem>(c, rng);
  CudaBackendOptions options;
  options.max_batch = op.problem->batch();
  options.max_seq_len = op.problem->max_seq_len();
  options.check_errors_every_op = check_every_op;
  auto created = CudaBackend::create(options);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (created.ok()) op.cuda = *created;
  return op;
}

DecodeCase small_case(DType dtype = DType::kBF16) {
  DecodeCase c;
  c.dtype = dtype;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.page_size = 16;
  c.kv_lens = {1, 129, 1000, 33};
  return c;
}

// Device rows of [batch, num_rows, k_max] with lengths, NaN/-1 poisoned.
struct DeviceRows {
  DeviceBuffer indices, lens;
  DecodeIndexRows view;
  DeviceRows(int32_t batch, int32_t num_rows, int32_t k_max, IndexGranularity granularity)
      : indices(static_cast<size_t>(batch) * num_rows * k_max * sizeof(int32_t), 0x7F),
        lens(static_cast<size_t>(batch) * num_rows * sizeof(int32_t), 0x7F) {
    view = DecodeIndexRows{indices.as<int32_t>(), lens.as<int32_t>(), batch, num_rows, k_max, granularity};
  }
};
struct HostRows {
  std::vector<int32_t> indices, lens;
  DecodeIndexRows view;
  HostRows(int32_t batch, int32_t num_rows, int32_t k_max, IndexGranularity granularity)
      : indices(static_cast<size_t>(batch) * num_rows * k_max, 0x7F7F7F7F),
        lens(static_cast<size_t>(batch) * num_rows, 0x7F7F7F7F) {
    view = DecodeIndexRows{indices.data(), lens.data(), batch, num_rows, k_max, granularity};
  }
};

std::vector<int32_t> budget_ks(const DecodeProblem& p) {
  std::vector<int32_t> k;
  for (int32_t n : p.kv_lens()) k.push_back(static_cast<int32_t>(budget_k(n, Budget{})));
  return k;
}

// Tie-aware comparison of GPU vs CPU score-selected rows; returns the number of rows that differ.
int compare_score_rows(const DecodeProblem& p, const DeviceRows& gpu, const HostRows& cpu, const ScorePooling& pooling,
                       const std::vector<int32_t>& k) {
  const std::vector<int32_t> got = gpu.indices.download_as<int32_t>(), got_lens = gpu.lens.download_as<int32_t>();
  const int32_t rows_r = pooling.num_rows, k_max = cpu.view.k_max;
  int differing = 0;
  for (int32_t b = 0; b < p.batch(); ++b) {
    const int64_t n = p.kv_lens()[b];
    const std::vector<float> pooled =
        pooled_rows(head_probabilities(p, b), p.spec().num_heads, n, rows_r, pooling.reduce == ScoreReduce::kMax);
    for (int32_t r = 0; r < rows_r; ++r) {
      SCOPED_TRACE("b " + std::to_string(b) + " row " + std::to_string(r) + " n " + std::to_string(n));
      EXPECT_EQ(got_lens[b * rows_r + r], k[b]);
      EXPECT_TRUE(well_formed_row(got, got_lens, rows_r, k_max, b, r, n));
      const auto g = row_entries(got, got_lens, rows_r, k_max, b, r);
      const auto w = row_entries(cpu.indices, cpu.lens, rows_r, k_max, b, r);
      const std::vector<float> scores(pooled.begin() + r * n, pooled.begin() + (r + 1) * n);
      EXPECT_TRUE(topk_sets_equivalent(g, w, scores, 1e-3));
      if (!same_set(g, w)) ++differing;
    }
  }
  return differing;
}

TEST(CudaBackendOps, SelectDecodeMatchesTheCpuBackendForEveryPooling) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = rng_for_test();
  OpProblem op = make_op_problem(small_case(), rng);
  ASSERT_TRUE(op.cuda);
  const DecodeProblem& p = *op.problem;
  AttentionParams params;
  params.scale = p.scale();
  const std::vector<ScorePooling> poolings = {
      {2, ScoreReduce::kSum}, {1, ScoreReduce::kSum}, {1, ScoreReduce::kMax}, {8, ScoreReduce::kSum},
      {4, ScoreReduce::kSum}, {8, ScoreReduce::kMax}};
  const std::vector<int32_t> n = p.kv_lens();
  const std::vector<std::vector<int32_t>> ks = {budget_ks(p), {1, 0, 1000, 33}, {0, 129, 7, 1}};
  int differing = 0;
  for (const ScorePooling& pooling : poolings) {
    for (const auto& k : ks) {
      SCOPED_TRACE("R " + std::to_string(pooling.num_rows) + (pooling.reduce == ScoreReduce::kMax ? " max" : " sum") +
                   " k " + std::to_string(k[1]));
      const int32_t k_max = *std::max_element(k.begin(), k.end()) + 3;
      const IndexGranularity gran =
          pooling.num_rows == 8 ? IndexGranularity::kPerQueryHead : IndexGranularity::kPerKvGroup;
      DeviceRows gpu(p.batch(), pooling.num_rows, std::max(k_max, 1), gran);
      HostRows cpu(p.batch(), pooling.num_rows, std::max(k_max, 1), gran);
      const Status s = op.cuda->select_decode(p.device_q(), p.device_kv(), params, pooling, k.data(), gpu.view);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_TRUE(op.cpu.select_decode(p.host_q(), p.host_kv(), params, pooling, k.data(), cpu.view).ok());
      differing += compare_score_rows(p, gpu, cpu, pooling, k);
      EXPECT_TRUE(gpu.indices.guards_intact() && gpu.lens.guards_intact());
    }
  }
  EXPECT_LE(differing, 2) << "rows that differ from the CPU backend's (accepted as near-ties)";
  EXPECT_TRUE(op.cuda->check_device_errors().ok());
}

TEST(CudaBackendOps, AnchorDecodeFusedAndComposedMatchTheCpuBackend) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    OpProblem op = make_op_problem(small_case(dtype), rng);
    ASSERT_TRUE(op.cuda);
    const DecodeProblem& p = *op.problem;
    const int32_t batch = p.batch(), heads = p.spec().num_heads, d = p.spec().head_dim;
    AttentionParams params;
    params.scale = p.scale();
    const std::vector<int32_t> k = budget_ks(p);
    const int32_t k_max = *std::max_element(k.begin(), k.end());
    struct Variant {
      ScorePooling pooling;
      AnchorOutput output;
      std::vector<int32_t> head_map;  // empty: null
      IndexGranularity granularity;
    };
    const std::vector<Variant> variants = {
        {{2, ScoreReduce::kSum}, AnchorOutput::kDense, {}, IndexGranularity::kPerKvGroup},       // layer 0
        {{2, ScoreReduce::kSum}, AnchorOutput::kSparse, {}, IndexGranularity::kPerKvGroup},      // kascade anchor
        {{1, ScoreReduce::kSum}, AnchorOutput::kSparse, {0, 0}, IndexGranularity::kPerKvGroup},  // kascade-pooled
        {{8, ScoreReduce::kSum}, AnchorOutput::kSparse, {}, IndexGranularity::kPerQueryHead},    // oracle
        {{1, ScoreReduce::kMax}, AnchorOutput::kDense, {0, 0}, IndexGranularity::kPerKvGroup},   // omnikv filter
        {{4, ScoreReduce::kSum}, AnchorOutput::kSparse, {3, 1}, IndexGranularity::kPerKvGroup},  // composed path
    };
    for (const Variant& v : variants) {
      SCOPED_TRACE("R " + std::to_string(v.pooling.num_rows) +
                   (v.output == AnchorOutput::kDense ? " dense" : " sparse"));
      DeviceRows gpu(batch, v.pooling.num_rows, k_max, v.granularity);
      HostRows cpu(batch, v.pooling.num_rows, k_max, v.granularity);
      DeviceBuffer map = upload_vector(v.head_map);
      const int32_t* device_map = v.head_map.empty() ? nullptr : map.as<int32_t>();
      DeviceBuffer o(static_cast<size_t>(batch) * heads * d * dtype_size(dtype));
      DeviceBuffer lse(static_cast<size_t>(batch) * heads * sizeof(float));
      const Status s = op.cuda->anchor_decode(p.device_q(), p.device_kv(), params, v.pooling, k.data(), gpu.view,
                                              v.output, device_map, AttentionOutput{o.data(), dtype, lse.as<float>()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      std::vector<float> cpu_o(static_cast<size_t>(batch) * heads * d), cpu_lse(static_cast<size_t>(batch) * heads);
      const Status c = op.cpu.anchor_decode(p.host_q(), p.host_kv(), params, v.pooling, k.data(), cpu.view, v.output,
                                            v.head_map.empty() ? nullptr : v.head_map.data(),
                                            AttentionOutput{cpu_o.data(), DType::kF32, cpu_lse.data()});
      ASSERT_TRUE(c.ok()) << c.to_string();
      const int differing = compare_score_rows(p, gpu, cpu, v.pooling, k);
      const std::vector<float> got_o = to_floats(o.download(), dtype), got_lse = lse.download_as<float>();
      const KeyLists keys = v.output == AnchorOutput::kDense
                                ? dense_key_lists(p)
                                : sparse_key_lists(p, gpu.indices.download_as<int32_t>(), gpu.lens.download_as<int32_t>(),
                                                   v.pooling.num_rows, k_max, v.granularity, v.head_map);
      EXPECT_TRUE(check_attention(p, keys, got_o, got_lse));
      if (differing == 0) {
        EXPECT_TRUE(all_close(got_o, cpu_o, {batch, heads, d}, tolerance_for(dtype)));
        EXPECT_TRUE(all_close(got_lse, cpu_lse, {batch, heads}, {1e-3, 1e-4}));
      }
      EXPECT_TRUE(o.guards_intact() && lse.guards_intact() && gpu.indices.guards_intact());
    }
    const Status errors = op.cuda->check_device_errors();
    EXPECT_TRUE(errors.ok()) << errors.to_string();
  }
}

TEST(CudaBackendOps, QuestRowsEqualTheCpuBackendExactly) {
  KC_SKIP_WITHOUT_GPU();
  DecodeCase c = small_case(DType::kF16);
  c.num_heads = 16;
  c.num_kv_heads = 4;
  c.head_dim = 128;
  c.page_size = 32;
  c.kv_lens = {1, 31, 1000, 4097, 100};
  auto rng = rng_for_test();
  OpProblem op = make_op_problem(c, rng);
  ASSERT_TRUE(op.cuda);
  const DecodeProblem& p = *op.problem;
  const std::vector<std::vector<int32_t>> ks = {budget_ks(p), {0, 31, 1000, 4097, 0}, {1, 3, 17, 400, 99}};
  for (int32_t page : {16, 5, 1}) {
    for (const auto& k : ks) {
      SCOPED_TRACE("quest page " + std::to_string(page) + " k[3] " + std::to_string(k[3]));
      int32_t k_max = 1;
      for (int32_t b = 0; b < p.batch(); ++b) k_max = std::max(k_max, std::min(p.kv_lens()[b], k[b] + page - 1));
      DeviceRows gpu(p.batch(), c.num_heads, k_max, IndexGranularity::kPerQueryHead);
      HostRows cpu(p.batch(), c.num_heads, k_max, IndexGranularity::kPerQueryHead);
      const Status s = op.cuda->select_quest_decode(p.device_q(), p.device_kv(), page, k.data(), gpu.view);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_TRUE(op.cpu.select_quest_decode(p.host_q(), p.host_kv(), page, k.data(), cpu.view).ok());
      EXPECT_EQ(gpu.lens.download_as<int32_t>(), cpu.lens);
      EXPECT_EQ(gpu.indices.download_as<int32_t>(), cpu.indices) << "rows (ascending, -1 padded) must be identical";
      EXPECT_TRUE(gpu.indices.guards_intact() && gpu.lens.guards_intact());
    }
  }
  const Status errors = op.cuda->check_device_errors();
  EXPECT_TRUE(errors.ok()) << errors.to_string();
}

TEST(CudaBackendOps, LessIsMoreRowsMatchTheCpuBackend) {
  KC_SKIP_WITHOUT_GPU();
  DecodeCase c = small_case(DType::kBF16);
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.kv_lens = {1, 7, 129, 1000, 2500};
  auto rng = rng_for_test();
  OpProblem op = make_op_problem(c, rng);
  ASSERT_TRUE(op.cuda);
  const DecodeProblem& p = *op.problem;
  AttentionParams params;
  params.scale = p.scale();
  const std::vector<std::vector<int32_t>> ks = {budget_ks(p), {0, 7, 129, 3, 2500}, {1, 3, 50, 1000, 17}};
  int differing = 0;
  for (int32_t sinks : {4, 0, 7}) {
    for (const auto& k : ks) {
      SCOPED_TRACE("sinks " + std::to_string(sinks) + " k[3] " + std::to_string(k[3]));
      int32_t k_max = 1;
      for (int32_t b = 0; b < p.batch(); ++b) k_max = std::max(k_max, std::min(p.kv_lens()[b], k[b] + sinks));
      DeviceRows gpu(p.batch(), 1, k_max, IndexGranularity::kPerKvGroup);
      HostRows cpu(p.batch(), 1, k_max, IndexGranularity::kPerKvGroup);
      const Status s = op.cuda->select_lessismore_decode(p.device_q(), p.device_kv(), params, k.data(), sinks, gpu.view);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_TRUE(op.cpu.select_lessismore_decode(p.host_q(), p.host_kv(), params, k.data(), sinks, cpu.view).ok());
      const std::vector<int32_t> got = gpu.indices.download_as<int32_t>(), got_lens = gpu.lens.download_as<int32_t>();
      for (int32_t b = 0; b < p.batch(); ++b) {
        const int64_t n = p.kv_lens()[b];
        SCOPED_TRACE("b " + std::to_string(b) + " n " + std::to_string(n));
        EXPECT_TRUE(well_formed_row(got, got_lens, 1, k_max, b, 0, n));
        const auto g = row_entries(got, got_lens, 1, k_max, b, 0);
        const auto w = row_entries(cpu.indices, cpu.lens, 1, k_max, b, 0);
        EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
        EXPECT_TRUE(lessismore_rows_equivalent(g, w, head_probabilities(p, b), c.num_heads, n, k[b], sinks, 1e-4));
        if (!same_set(g, w)) ++differing;
      }
    }
  }
  EXPECT_LE(differing, 2) << "rows that differ from the CPU backend's (accepted as near-ties)";
  const Status errors = op.cuda->check_device_errors();
  EXPECT_TRUE(errors.ok()) << errors.to_string();
}

TEST(CudaBackendOps, RefusesBadViewsNamingTheProblem) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = rng_for_test();
  OpProblem op = make_op_problem(small_case(), rng);
  ASSERT_TRUE(op.cuda);
  const DecodeProblem& p = *op.problem;
  AttentionParams params;
  params.scale = p.scale();
  const int32_t batch = p.batch();
  DeviceBuffer o(static_cast<size_t>(batch + 1) * 8 * 64 * 4);
  const AttentionOutput out{o.data(), DType::kBF16, nullptr};

  // Several queries per sequence: the decode-only ops refuse before reading anything (the host
  // views are not read either: only total_q and batch are looked at).
  QueryBatch prefill = p.device_q();
  prefill.total_q = batch + 1;
  const std::vector<int32_t> ks = budget_ks(p);
  DeviceRows decode_rows(batch, 2, 1000, IndexGranularity::kPerKvGroup);
  EXPECT_TRUE(refused_naming(op.cuda->sparse_decode(prefill, p.device_kv(), params, decode_rows.view, nullptr, out),
                             StatusCode::kInvalidArgument, "sparse_decode takes one query per sequence"));
  EXPECT_TRUE(refused_naming(
      op.cuda->select_decode(prefill, p.device_kv(), params, {2, ScoreReduce::kSum}, ks.data(), decode_rows.view),
      StatusCode::kInvalidArgument, "select_decode takes one query per sequence"));
  EXPECT_TRUE(refused_naming(op.cuda->anchor_decode(prefill, p.device_kv(), params, {2, ScoreReduce::kSum}, ks.data(),
                                                    decode_rows.view, AnchorOutput::kDense, nullptr, out),
                             StatusCode::kInvalidArgument, "anchor_decode takes one query per sequence"));
  // A prefill call (total_q != batch) without cu_q_lens is refused by dense before any launch.
  EXPECT_TRUE(refused_naming(op.cuda->dense(prefill, p.device_kv(), params, out), StatusCode::kInvalidArgument,
                             "q.cu_q_lens is null"));
  PrefillIndexRows prows;
  EXPECT_TRUE(refused_naming(op.cuda->select_prefill_oracle(prefill, p.device_kv(), params, prows),
                             StatusCode::kInvalidArgument, "q.cu_q_lens is null"));

  QueryBatch f32 = p.device_q();
  f32.dtype = DType::kF32;
  PagedKv f32_kv = p.device_kv();
  f32_kv.dtype = DType::kF32;
  EXPECT_TRUE(refused_naming(op.cuda->dense(f32, f32_kv, params, out), StatusCode::kUnsupported, "dtype is f32"));
  PagedKv narrow = p.device_kv();
  narrow.max_pages_per_seq -= 1;
  EXPECT_TRUE(refused_naming(op.cuda->dense(p.device_q(), narrow, params, out), StatusCode::kInvalidArgument,
                             "created for max_seq_len"));
  PagedKv odd_dim = p.device_kv();
  odd_dim.head_dim = 96;
  EXPECT_TRUE(refused_naming(op.cuda->dense(p.device_q(), odd_dim, params, out), StatusCode::kInvalidArgument,
                             "kv.head_dim is 96"));

  const std::vector<int32_t> k = budget_ks(p);
  DeviceRows rows(batch, 2, 200, IndexGranularity::kPerKvGroup);
  EXPECT_TRUE(refused_naming(
      op.cuda->select_decode(p.device_q(), p.device_kv(), params, {3, ScoreReduce::kSum}, k.data(), rows.view),
      StatusCode::kInvalidArgument, "pooling.num_rows is 3"));
  DeviceRows short_rows(batch, 2, 10, IndexGranularity::kPerKvGroup);
  EXPECT_TRUE(refused_naming(
      op.cuda->select_decode(p.device_q(), p.device_kv(), params, {2, ScoreReduce::kSum}, k.data(), short_rows.view),
      StatusCode::kInvalidArgument, "rows hold k_max = 10"));
  EXPECT_TRUE(refused_naming(
      op.cuda->select_decode(p.device_q(), p.device_kv(), params, {2, ScoreReduce::kSum}, nullptr, rows.view),
      StatusCode::kInvalidArgument, "k_per_seq must be non-null"));
  DeviceRows per_group_quest(batch, 8, 200, IndexGranularity::kPerKvGroup);
  EXPECT_TRUE(refused_naming(
      op.cuda->select_quest_decode(p.device_q(), p.device_kv(), 16, k.data(), per_group_quest.view),
      StatusCode::kInvalidArgument, "rows must be per query head"));
  // Null head map with fewer rows than KV groups: sparse_decode refuses, like the CPU backend.
  DeviceRows one_row(batch, 1, 200, IndexGranularity::kPerKvGroup);
  EXPECT_FALSE(op.cuda->sparse_decode(p.device_q(), p.device_kv(), params, one_row.view, nullptr, out).ok());
  // A larger batch than the backend was created for.
  DecodeCase wide = small_case();
  wide.kv_lens = {5, 5, 5, 5, 5};
  wide.max_seq_len = p.max_seq_len();
  DecodeProblem wide_p(wide, rng);
  EXPECT_TRUE(refused_naming(op.cuda->dense(wide_p.device_q(), wide_p.device_kv(), params, out),
                             StatusCode::kInvalidArgument, "created for max_batch 4"));
  const Status errors = op.cuda->check_device_errors();
  EXPECT_TRUE(errors.ok()) << "refused calls must not launch anything: " << errors.to_string();
}

TEST(CudaBackendOps, DeviceErrorsSurfaceAtTheNextHostReadOrAfterEveryOp) {
  KC_SKIP_WITHOUT_GPU();
  for (bool every_op : {false, true}) {
    SCOPED_TRACE(every_op ? "check_errors_every_op" : "default");
    auto rng = rng_for_test(every_op ? 1 : 0);
    OpProblem op = make_op_problem(small_case(), rng, every_op);
    ASSERT_TRUE(op.cuda);
    const DecodeProblem& p = *op.problem;
    AttentionParams params;
    params.scale = p.scale();
    DeviceBuffer o(static_cast<size_t>(p.batch()) * 8 * 64 * 2);
    const AttentionOutput out{o.data(), DType::kBF16, nullptr};
    // kv_len 2000 > max_seq_len 1000 on the device: flagged and clamped by the kernel.
    std::vector<int32_t> bad_lens = p.kv_lens();
    bad_lens[2] = 2000;
    DeviceBuffer lens = upload_vector(bad_lens);
    PagedKv kv = p.device_kv();
    kv.kv_lens = lens.as<int32_t>();
    const Status ran = op.cuda->dense(p.device_q(), kv, params, out);
    std::vector<uint8_t> host(o.bytes());
    const Status read = op.cuda->copy_to_host(host.data(), o.data(), host.size());
    const Status& reported = every_op ? ran : read;
    EXPECT_TRUE(refused_naming(reported, StatusCode::kOutOfRange, "kv_len out of range")) << reported.to_string();
    if (every_op) {
      EXPECT_TRUE(read.ok()) << "the error word was cleared when the op reported it";
    }
    EXPECT_TRUE(op.cuda->check_device_errors().ok()) << "a reported error is cleared";

    // An index outside its sequence in sparse rows.
    std::vector<int32_t> indices(static_cast<size_t>(p.batch()) * 2 * 4, -1), row_lens(p.batch() * 2, 1);
    for (int32_t r = 0; r < p.batch() * 2; ++r) indices[r * 4] = 0;
    indices[2 * 2 * 4] = 5000;
    DeviceBuffer d_indices = upload_vector(indices), d_lens = upload_vector(row_lens);
    const DecodeIndexRows rows{d_indices.as<int32_t>(), d_lens.as<int32_t>(), p.batch(), 2, 4,
                               IndexGranularity::kPerKvGroup};
    const Status sparse = op.cuda->sparse_decode(p.device_q(), p.device_kv(), params, rows, nullptr, out);
    const Status check = op.cuda->check_device_errors();
    EXPECT_TRUE(refused_naming(every_op ? sparse : check, StatusCode::kOutOfRange, "index entry out of range"));
    if (every_op) continue;

    // The two halves of the check (the CUDA session's path): the copies are queued without waiting,
    // the bits come after the caller's wait and are cleared; the halves must alternate per slot, and
    // check_device_errors runs while a slot is pending.
    EXPECT_TRUE(refused_naming(op.cuda->finish_error_check(1), StatusCode::kInvalidArgument, "without enqueue"));
    ASSERT_TRUE(op.cuda->dense(p.device_q(), kv, params, out).ok());
    KC_ASSERT_OK(op.cuda->enqueue_error_check(1));
    EXPECT_TRUE(refused_naming(op.cuda->enqueue_error_check(1), StatusCode::kInvalidArgument, "twice"));
    KC_ASSERT_OK(op.cuda->check_device_errors());  // its own slot; slot 1 took the bits already
    KC_ASSERT_OK(cuda::cuda_status(cudaStreamSynchronize(options_stream(op.cuda->options())), "sync"));
    const Status halves = op.cuda->finish_error_check(1);
    EXPECT_TRUE(refused_naming(halves, StatusCode::kOutOfRange, "kv_len out of range")) << halves.to_string();
    EXPECT_TRUE(op.cuda->check_device_errors().ok()) << "the bits reported through slot 1 were cleared";
  }
}

TEST(CudaBackendOps, MemoryRoundTripsFromPageableAndPinnedHostMemory) {
  KC_SKIP_WITHOUT_GPU();
  CudaBackendOptions options;
  options.max_seq_len = 64;
  auto backend = make_cuda_backend(options);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  AttentionBackend& cuda = **backend;
  EXPECT_TRUE(refused_naming(cuda.allocate(0).status(), StatusCode::kInvalidArgument, "allocate of 0 bytes"));
  auto buffer = cuda.allocate(4000);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  std::vector<int32_t> src(1000), back(1000, -1);
  std::iota(src.begin(), src.end(), 17);
  ASSERT_TRUE(cuda.copy_from_host(buffer->data(), src.data(), 4000).ok());
  ASSERT_TRUE(cuda.copy_to_host(back.data(), buffer->data(), 4000).ok());
  EXPECT_EQ(back, src);
  void* pinned_bytes = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned_bytes, 4000), cudaSuccess);
  auto* pinned = static_cast<int32_t*>(pinned_bytes);
  std::iota(pinned, pinned + 1000, -500);
  ASSERT_TRUE(cuda.copy_from_host(buffer->data(), pinned, 4000).ok());
  std::fill(pinned, pinned + 1000, 0);  // the copy finished before copy_from_host returned
  ASSERT_TRUE(cuda.copy_to_host(back.data(), buffer->data(), 4000).ok());
  std::vector<int32_t> expected(1000);
  std::iota(expected.begin(), expected.end(), -500);
  EXPECT_EQ(back, expected);
  EXPECT_EQ(cudaFreeHost(pinned_bytes), cudaSuccess);
  EXPECT_TRUE(refused_naming(cuda.copy_to_host(nullptr, buffer->data(), 4), StatusCode::kInvalidArgument, "null"));
}

}  // namespace
}  // namespace kascade::testing
