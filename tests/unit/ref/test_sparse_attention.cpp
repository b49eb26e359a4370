// test_sparse_attention.cpp — sparse_decode_ref and sparse_prefill_ref (src/ref/attention_ref.h):
// every key selected equals dense (decode; prefill with all candidates + local keys); random rows
// against the fp64 / naive implementations of attention_problem.h over the key sets the test
// derives itself (per KV group, with and without head_map, per query head; prefill with local
// keys, without them (future keys masked), and the oracle layout of tile size 1); empty rows; and
// every validation path of the rows (index_rows.h), each refused without writing the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "attention_problem.h"
#include "index_rows_builder.h"
#include "kascade/budget.h"
#include "ref/attention_ref.h"
#include "ref/prefill_rows.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

using ref::dense_attention_ref;
using ref::sparse_decode_ref;
using ref::sparse_prefill_ref;

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

ProblemSpec decode_spec(DType dtype, int32_t group, std::vector<int32_t> kv_lens) {
  ProblemSpec spec;
  spec.dtype = dtype;
  spec.num_kv_heads = 2;
  spec.num_heads = 2 * group;
  spec.kv_lens = std::move(kv_lens);
  spec.q_lens.assign(spec.kv_lens.size(), 1);
  return spec;
}

// Every key of every sequence, shuffled, in each of `num_rows` rows.
std::vector<std::vector<std::vector<int32_t>>> all_keys_rows(const AttentionProblem& p, int32_t num_rows,
                                                             std::mt19937_64& rng) {
  std::vector<std::vector<std::vector<int32_t>>> rows(static_cast<size_t>(p.batch()));
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t r = 0; r < num_rows; ++r) rows[b].push_back(random_subset(rng, 0, p.kv_len(b), p.kv_len(b)));
  }
  return rows;
}

::testing::AssertionResult equals_dense(const AttentionProblem& p, const GuardedOutput& got) {
  GuardedOutput dense(p, got.dtype);
  Status s = dense_attention_ref(p.queries(), p.cache(), p.params(), dense.view());
  if (!s.ok()) return ::testing::AssertionFailure() << s.to_string();
  if (!got.intact()) return ::testing::AssertionFailure() << "canary overwritten";
  auto o_ok = all_close(got.o_as_float(), dense.o_as_float(), {p.o_size()}, tolerance_for(got.dtype));
  if (!o_ok) return o_ok;
  return all_close(got.lse.span(), dense.lse.span(), {p.lse_size()}, tolerance_for(DType::kF32));
}

// ---- decode ----

TEST(SparseDecode, AllKeysEqualsDense) {
  for (DType dtype : kDtypes) {
    for (auto granularity : {IndexGranularity::kPerKvGroup, IndexGranularity::kPerQueryHead}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (granularity == IndexGranularity::kPerKvGroup ? " per group" : " per head"));
      auto rng = rng_for_test(static_cast<uint64_t>(dtype) * 2 + static_cast<uint64_t>(granularity));
      const AttentionProblem p(decode_spec(dtype, 4, {1, 33, 129, 300}), rng);
      const int32_t num_rows = granularity == IndexGranularity::kPerKvGroup ? p.kv_heads() : p.heads();
      DecodeRowsHolder rows(all_keys_rows(p, num_rows, rng), 300, granularity);
      GuardedOutput out(p, dtype);
      ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), rows.view(), nullptr, out.view()).ok());
      EXPECT_TRUE(equals_dense(p, out));
    }
  }
}

// Random rows of random lengths (0 .. k_max) for several row layouts, against fp64.
TEST(SparseDecode, RandomRowsMatchFp64) {
  struct Layout {
    const char* name;
    IndexGranularity granularity;
    int32_t num_rows;  // 0: one per KV head (identity) / per query head
    bool head_map;
  };
  const Layout layouts[] = {{"per group, identity", IndexGranularity::kPerKvGroup, 0, false},
                            {"per group, head_map onto 3 rows", IndexGranularity::kPerKvGroup, 3, true},
                            {"pooled (1 row)", IndexGranularity::kPerKvGroup, 1, true},
                            {"per query head", IndexGranularity::kPerQueryHead, 0, false}};
  uint64_t salt = 0;
  for (DType dtype : kDtypes) {
    for (int32_t group : {1, 4, 8}) {
      for (const Layout& layout : layouts) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " group " + std::to_string(group) + " " + layout.name);
        auto rng = rng_for_test(++salt);
        ProblemSpec spec = decode_spec(dtype, group, {1, 31, 100, 257});
        spec.head_dim = group == 4 ? 128 : 64;
        const AttentionProblem p(spec, rng);
        int32_t num_rows = layout.num_rows;
        if (num_rows == 0) num_rows = layout.granularity == IndexGranularity::kPerKvGroup ? p.kv_heads() : p.heads();
        std::vector<int32_t> head_map;
        if (layout.head_map) {
          for (int32_t g = 0; g < p.kv_heads(); ++g) head_map.push_back(static_cast<int32_t>(rng() % num_rows));
        }
        const int32_t k_max = 64;
        std::vector<std::vector<std::vector<int32_t>>> sets(static_cast<size_t>(p.batch()));
        for (int32_t b = 0; b < p.batch(); ++b) {
          for (int32_t r = 0; r < num_rows; ++r) {
            const int64_t len = static_cast<int64_t>(rng() % (std::min(k_max, p.kv_len(b)) + 1));
            sets[b].push_back(random_subset(rng, 0, p.kv_len(b), len));
          }
        }
        DecodeRowsHolder rows(sets, k_max, layout.granularity);
        GuardedOutput out(p, dtype);
        ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), rows.view(),
                                      head_map.empty() ? nullptr : head_map.data(), out.view())
                        .ok());
        EXPECT_TRUE(matches_reference(p, out, reference_outputs(p, dtype, rows.keys(p, head_map))));
      }
    }
  }
}

TEST(SparseDecode, MappedGroupReadsTheMappedRow) {
  auto rng = rng_for_test();
  const AttentionProblem p(decode_spec(DType::kF32, 4, {200}), rng);
  // Disjoint rows: the even keys and the odd keys below 100; the groups swap rows.
  std::vector<int32_t> even, odd;
  for (int32_t j = 0; j < 100; ++j) (j % 2 ? odd : even).push_back(j);
  DecodeRowsHolder rows({{even, odd}}, 64, IndexGranularity::kPerKvGroup);
  const std::vector<int32_t> head_map = {1, 0};
  GuardedOutput out(p, DType::kF32);
  ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), rows.view(), head_map.data(), out.view()).ok());
  EXPECT_TRUE(matches_reference(p, out, reference_outputs(p, DType::kF32, rows.keys(p, head_map))));
  // The identity reading would be a different result: the check above can tell them apart.
  EXPECT_FALSE(matches_reference(p, out, reference_outputs(p, DType::kF32, rows.keys(p, {}))));
}

TEST(SparseDecode, EmptyRowsGiveZeroAndNegativeInfinity) {
  auto rng = rng_for_test();
  const AttentionProblem p(decode_spec(DType::kBF16, 2, {10, 1}), rng);
  DecodeRowsHolder rows({{{}, {}}, {{}, {}}}, 4, IndexGranularity::kPerKvGroup);
  GuardedOutput out(p, DType::kBF16);
  ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), rows.view(), nullptr, out.view()).ok());
  for (float x : out.o_as_float()) EXPECT_EQ(x, 0.0f);
  for (float x : out.lse.span()) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(out.intact());
}

TEST(SparseDecode, ResultIgnoresTheOrderOfARow) {
  auto rng = rng_for_test();
  const AttentionProblem p(decode_spec(DType::kF16, 8, {500}), rng);
  std::vector<int32_t> set = random_subset(rng, 0, 500, 200);
  std::vector<int32_t> sorted = set;
  std::sort(sorted.begin(), sorted.end());
  DecodeRowsHolder shuffled_rows({{set, set}}, 256, IndexGranularity::kPerKvGroup);
  DecodeRowsHolder sorted_rows({{sorted, sorted}}, 256, IndexGranularity::kPerKvGroup);
  GuardedOutput a(p, DType::kF32), b(p, DType::kF32);
  ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), shuffled_rows.view(), nullptr, a.view()).ok());
  ASSERT_TRUE(sparse_decode_ref(p.queries(), p.cache(), p.params(), sorted_rows.view(), nullptr, b.view()).ok());
  EXPECT_TRUE(all_close(a.o_as_float(), b.o_as_float(), {p.o_size()}, {0.0, 0.0}));
  EXPECT_TRUE(all_close(a.lse.span(), b.lse.span(), {p.lse_size()}, {0.0, 0.0}));
}

// Each bad row is refused with the right code, a message naming it, and no output written.
TEST(SparseDecode, RefusesBadRows) {
  auto rng = rng_for_test();
  const AttentionProblem p(decode_spec(DType::kF32, 2, {40, 20}), rng);
  struct Case {
    const char* name;
    std::function<void(DecodeIndexRows&, std::vector<int32_t>& head_map)> mutate;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"duplicate", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.indices[8 + 2] = r.indices[8 + 0]; },
       StatusCode::kInvalidArgument, "rows.indices[b=0][row=1][2] = 5 repeats entry 0"},
      {"past kv_len", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.indices[16 + 1] = 20; },
       StatusCode::kOutOfRange, "rows.indices[b=1][row=0][1] = 20 is outside [0, kv_len = 20)"},
      {"negative", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.indices[0] = -3; }, StatusCode::kOutOfRange,
       "rows.indices[b=0][row=0][0] = -3"},
      {"row_len > k_max", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.row_lens[3] = 9; },
       StatusCode::kOutOfRange, "rows.row_lens[b=1][row=1] = 9 is outside [0, rows.k_max = 8]"},
      {"padding", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.indices[8 + 7] = 30; },
       StatusCode::kInvalidArgument, "rows.indices[b=0][row=1][7] = 30 lies past row_len 3; padding must be -1"},
      {"head_map", [](DecodeIndexRows&, std::vector<int32_t>& m) { m = {0, 2}; }, StatusCode::kOutOfRange,
       "head_map[1] = 2 is outside [0, rows.num_rows = 2)"},
      {"rows per head with head_map",
       [](DecodeIndexRows& r, std::vector<int32_t>& m) {
         r.granularity = IndexGranularity::kPerQueryHead;
         m = {0, 1};
       },
       StatusCode::kInvalidArgument, "head_map must be null"},
      {"num_rows", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.num_rows = 1; }, StatusCode::kInvalidArgument,
       "rows.num_rows is 1"},
      {"batch", [](DecodeIndexRows& r, std::vector<int32_t>&) { r.batch = 1; }, StatusCode::kInvalidArgument,
       "rows.batch is 1 but q.batch is 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // rows: b=0: {5, 9, 1}, {5, 6, 7}; b=1: {0, 19}, {3}; k_max 8
    DecodeRowsHolder holder({{{5, 9, 1}, {5, 6, 7}}, {{0, 19}, {3}}}, 8, IndexGranularity::kPerKvGroup);
    DecodeIndexRows rows = holder.view();
    std::vector<int32_t> head_map;
    c.mutate(rows, head_map);
    GuardedOutput out(p, DType::kF32);
    const Status s = sparse_decode_ref(p.queries(), p.cache(), p.params(), rows,
                                       head_map.empty() ? nullptr : head_map.data(), out.view());
    EXPECT_EQ(s.code(), c.code) << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    EXPECT_EQ(count_nan(out.lse.span()), p.lse_size());
    EXPECT_TRUE(out.intact());
  }
}

TEST(SparseDecode, RefusesMoreThanOneQuery) {
  auto rng = rng_for_test();
  ProblemSpec spec = decode_spec(DType::kF32, 1, {30});
  spec.q_lens = {2};
  const AttentionProblem p(spec, rng);
  DecodeRowsHolder holder({{{1}, {2}}}, 2, IndexGranularity::kPerKvGroup);
  GuardedOutput out(p, DType::kF32);
  const Status s = sparse_decode_ref(p.queries(), p.cache(), p.params(), holder.view(), nullptr, out.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sequence 0 has q_len 2"), std::string::npos) << s.message();
}

// ---- prefill ----

ProblemSpec prefill_spec(DType dtype, int32_t group) {
  ProblemSpec spec;
  spec.dtype = dtype;
  spec.num_kv_heads = 2;
  spec.num_heads = 2 * group;
  // one-shot, a chunk starting mid-tile, a single query, an idle sequence, an aligned chunk
  spec.q_lens = {70, 37, 1, 0, 32};
  spec.kv_lens = {70, 1000, 33, 12, 96};
  return spec;
}

// Rows from plan_prefill_rows with a saturating budget (every candidate j < s_t), shuffled.
TEST(SparsePrefill, AllCandidatesWithLocalKeysEqualsDense) {
  for (DType dtype : kDtypes) {
    for (int32_t tile_size : {32, 7}) {
      if (dtype != DType::kF32 && tile_size != 32) continue;  // tiling is dtype-independent
      for (auto granularity : {IndexGranularity::kPerKvGroup, IndexGranularity::kPerQueryHead}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " tile " + std::to_string(tile_size));
        auto rng = rng_for_test(static_cast<uint64_t>(dtype) * 100 + tile_size * 2 + static_cast<uint64_t>(granularity));
        ProblemSpec spec = prefill_spec(dtype, 4);
        spec.q_lens[3] = 1;  // plan_prefill_rows refuses idle sequences
        const AttentionProblem p(spec, rng);
        const int32_t num_rows = granularity == IndexGranularity::kPerKvGroup ? p.kv_heads() : p.heads();
        Budget everything;
        everything.rho_ppm = 1000000;
        auto plan = ref::plan_prefill_rows(spec.q_lens.data(), spec.kv_lens.data(), p.batch(), tile_size, num_rows,
                                           everything, /*rolling=*/true);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        ref::PrefillIndexSet set{*plan, {}};
        PrefillIndexRows rows = set.view(/*include_local=*/true, granularity);
        for (int32_t b = 0; b < p.batch(); ++b) {
          for (int32_t s = set.plan.tile_base[b]; s < set.plan.tile_base[b + 1]; ++s) {
            const int64_t tile_start = (set.plan.tile_first[b] + (s - set.plan.tile_base[b])) * tile_size;
            for (int32_t r = 0; r < num_rows; ++r) {
              const int64_t row = int64_t{s} * num_rows + r;
              ASSERT_EQ(rows.row_offsets[row + 1] - rows.row_offsets[row], tile_start);
              const auto all = random_subset(rng, 0, tile_start, tile_start);
              std::copy(all.begin(), all.end(), set.indices.begin() + rows.row_offsets[row]);
            }
          }
        }
        GuardedOutput out(p, dtype);
        ASSERT_TRUE(sparse_prefill_ref(p.queries(), p.cache(), p.params(), rows, nullptr, out.view()).ok());
        EXPECT_TRUE(equals_dense(p, out));
      }
    }
  }
}

// Candidate rows of tile_budget entries (small k_min so rows are proper subsets), against fp64 over
// row ∪ local keys.
TEST(SparsePrefill, RandomCandidatesWithLocalKeysMatchFp64) {
  struct Config {
    DType dtype;
    int32_t group;
    bool use_map;
  };
  const Config configs[] = {{DType::kF32, 1, false}, {DType::kF32, 4, true},  {DType::kF16, 8, false},
                            {DType::kF16, 1, true},  {DType::kBF16, 4, false}, {DType::kBF16, 8, true}};
  uint64_t salt = 0;
  for (const auto& [dtype, group, use_map] : configs) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " group " + std::to_string(group) + (use_map ? " head_map" : ""));
    auto rng = rng_for_test(++salt);
    ProblemSpec spec = prefill_spec(dtype, group);
    spec.head_dim = group == 8 ? 128 : 64;
    const AttentionProblem p(spec, rng);
    const int32_t tile_size = 32;
    const int32_t num_rows = use_map ? 1 : p.kv_heads();
    const std::vector<int32_t> head_map = use_map ? std::vector<int32_t>{0, 0} : std::vector<int32_t>{};
    Budget budget;
    budget.k_min = 8;
    PrefillRowsHolder rows(p, tile_size, num_rows, /*include_local=*/true, IndexGranularity::kPerKvGroup,
                           [&](int32_t b, int64_t tile, int32_t) {
                             const int64_t s_t = tile * tile_size;
                             return random_subset(rng, 0, s_t, tile_budget(s_t, p.kv_len(b), budget, true));
                           });
    GuardedOutput out(p, dtype);
    ASSERT_TRUE(sparse_prefill_ref(p.queries(), p.cache(), p.params(), rows.view(),
                                   use_map ? head_map.data() : nullptr, out.view())
                    .ok());
    EXPECT_TRUE(matches_reference(p, out, reference_outputs(p, dtype, rows.keys(p, head_map))));
  }
}

// Without local keys rows may hold keys of the tile itself; a query attends only those <= its
// position (one row holds only the tile's last key, so earlier queries attend nothing).
TEST(SparsePrefill, WithoutLocalKeysMasksFutureKeys) {
  uint64_t salt = 0;
  for (DType dtype : kDtypes) {
    for (auto granularity : {IndexGranularity::kPerKvGroup, IndexGranularity::kPerQueryHead}) {
      SCOPED_TRACE(dtype_name(dtype));
      auto rng = rng_for_test(++salt);
      const AttentionProblem p(prefill_spec(dtype, 4), rng);
      const int32_t tile_size = 8;
      const int32_t num_rows = granularity == IndexGranularity::kPerKvGroup ? p.kv_heads() : p.heads();
      PrefillRowsHolder rows(p, tile_size, num_rows, /*include_local=*/false, granularity,
                             [&](int32_t b, int64_t tile, int32_t r) {
                               const int64_t end = std::min<int64_t>((tile + 1) * tile_size, p.kv_len(b));
                               if (r == 1) return std::vector<int32_t>{static_cast<int32_t>(end - 1)};
                               return random_subset(rng, 0, end, static_cast<int64_t>(rng() % (end + 1)));
                             });
      GuardedOutput out(p, dtype);
      ASSERT_TRUE(sparse_prefill_ref(p.queries(), p.cache(), p.params(), rows.view(), nullptr, out.view()).ok());
      const ReferenceOutputs ref = reference_outputs(p, dtype, rows.keys(p, {}));
      EXPECT_TRUE(matches_reference(p, out, ref));
      EXPECT_GT(std::count(ref.lse64.begin(), ref.lse64.end(), -std::numeric_limits<double>::infinity()), 0)
          << "the case meant to leave a query without keys did not";
    }
  }
}

// The prefill oracle's layout: tile size 1, one row per (query, head), keys j <= i.
TEST(SparsePrefill, OracleLayoutMatchesFp64) {
  auto rng = rng_for_test();
  ProblemSpec spec = prefill_spec(DType::kBF16, 2);
  spec.q_lens = {50, 9};
  spec.kv_lens = {50, 300};
  const AttentionProblem p(spec, rng);
  Budget budget;
  budget.k_min = 4;
  PrefillRowsHolder rows(p, 1, p.heads(), /*include_local=*/false, IndexGranularity::kPerQueryHead,
                         [&](int32_t, int64_t tile, int32_t) {
                           return random_subset(rng, 0, tile + 1, budget_k(tile + 1, budget));
                         });
  GuardedOutput out(p, DType::kBF16);
  ASSERT_TRUE(sparse_prefill_ref(p.queries(), p.cache(), p.params(), rows.view(), nullptr, out.view()).ok());
  EXPECT_TRUE(matches_reference(p, out, reference_outputs(p, DType::kBF16, rows.keys(p, {}))));
}

TEST(SparsePrefill, RefusesBadRows) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.q_lens = {40, 4};  // sequence 0: tiles 0, 1 (of 32); sequence 1: tile 3
  spec.kv_lens = {40, 100};
  const AttentionProblem p(spec, rng);
  struct Case {
    const char* name;
    std::function<void(PrefillIndexRows&, std::vector<int32_t>&)> mutate;
    StatusCode code;
    std::string message;
  };
  // rows (T = 32): slot 0 (seq 0, tile 0): {}, {}; slot 1 (seq 0, tile 1): {3, 7}, {31};
  // slot 2 (seq 1, tile 3): {0, 50, 95}, {1}
  const std::vector<Case> cases = {
      {"duplicate", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.indices[1] = 3; },
       StatusCode::kInvalidArgument, "sequence 0, tile 1 (slot 1), row 0, entry 1 = 3 repeats entry 0"},
      {"not below s_t", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.indices[5] = 96; },
       StatusCode::kOutOfRange, "sequence 1, tile 3 (slot 2), row 0, entry 2 = 96 is outside [0, 96)"},
      {"negative", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.indices[2] = -1; }, StatusCode::kOutOfRange,
       "row 1, entry 0 = -1"},
      {"past the tile without local keys",
       [](PrefillIndexRows& r, std::vector<int32_t>&) {
         r.include_local = false;
         r.indices[1] = 40;  // tile 1 ends at min(64, kv_len 40)
       },
       StatusCode::kOutOfRange, "sequence 0, tile 1 (slot 1), row 0, entry 1 = 40 is outside [0, 40)"},
      {"tile count", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.tile_base[1] = 1; },
       StatusCode::kInvalidArgument, "rows.tile_base[1] - rows.tile_base[0] = 1 but sequence 0"},
      {"offsets", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.row_offsets[4] = 1; },
       StatusCode::kInvalidArgument, "rows.row_offsets is not monotone: row_offsets[4] = 1 < row_offsets[3] = 2"},
      {"head_map", [](PrefillIndexRows&, std::vector<int32_t>& m) { m = {-1, 0}; }, StatusCode::kOutOfRange,
       "head_map[0] = -1"},
      {"tile_size", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.tile_size = 0; },
       StatusCode::kInvalidArgument, "rows.tile_size is 0"},
      {"batch", [](PrefillIndexRows& r, std::vector<int32_t>&) { r.batch = 3; }, StatusCode::kInvalidArgument,
       "rows.batch is 3 but q.batch is 2"},
  };
  const std::vector<std::vector<int32_t>> contents = {{}, {}, {3, 7}, {31}, {0, 50, 95}, {1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    int32_t next = 0;
    PrefillRowsHolder holder(p, 32, 2, true, IndexGranularity::kPerKvGroup,
                             [&](int32_t, int64_t, int32_t) { return contents[next++]; });
    PrefillIndexRows rows = holder.view();
    std::vector<int32_t> head_map;
    c.mutate(rows, head_map);
    GuardedOutput out(p, DType::kF32);
    const Status s = sparse_prefill_ref(p.queries(), p.cache(), p.params(), rows,
                                        head_map.empty() ? nullptr : head_map.data(), out.view());
    EXPECT_EQ(s.code(), c.code) << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    EXPECT_EQ(count_nan(out.lse.span()), p.lse_size());
    EXPECT_TRUE(out.intact());
  }
}

}  // namespace
}  // namespace kascade::testing
