// test_views.cpp — validate_queries / validate_kv / validate_output / validate_params
// (src/ref/views.h): a valid problem passes; each broken field is refused with the right code and
// a message naming it (wrong head_dim, H % G != 0, kv_len < q_len, too few pages, page id out of
// range, non-monotone cu_q_lens, ...); and the address helpers agree with a hand-computed layout.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "attention_problem.h"
#include "ref/views.h"

namespace kascade::testing {
namespace {

struct ViewCase {
  const char* name;
  std::function<void(QueryBatch&, PagedKv&, std::vector<int32_t>& scratch)> mutate;
  StatusCode code;
  std::string message;
};

TEST(Views, ValidProblemPasses) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.q_lens = {3, 0, 1};
  spec.kv_lens = {3, 7, 40};
  const AttentionProblem p(spec, rng);
  EXPECT_TRUE(ref::validate_queries(p.queries()).ok());
  EXPECT_TRUE(ref::validate_kv(p.cache(), p.queries()).ok());
  EXPECT_TRUE(ref::validate_params(p.params()).ok());
}

TEST(Views, EachBrokenFieldIsNamed) {
  auto rng = rng_for_test();
  ProblemSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_dim = 64;
  spec.page_size = 16;
  spec.q_lens = {3, 7, 1};
  spec.kv_lens = {3, 20, 40};
  const AttentionProblem p(spec, rng);
  const std::vector<ViewCase> cases = {
      {"q.q", [](QueryBatch& q, PagedKv&, auto&) { q.q = nullptr; }, StatusCode::kInvalidArgument, "q.q is null"},
      {"q.dtype", [](QueryBatch& q, PagedKv&, auto&) { q.dtype = static_cast<DType>(9); },
       StatusCode::kInvalidArgument, "q.dtype holds unknown value 9"},
      {"q.batch", [](QueryBatch& q, PagedKv&, auto&) { q.batch = 0; }, StatusCode::kInvalidArgument,
       "q.batch is 0"},
      {"q.head_dim", [](QueryBatch& q, PagedKv&, auto&) { q.head_dim = 0; }, StatusCode::kInvalidArgument,
       "q.head_dim is 0"},
      {"cu_q_lens monotone",
       [](QueryBatch& q, PagedKv&, std::vector<int32_t>& s) {
         s = {0, 3, 2, 11};
         q.cu_q_lens = s.data();
       },
       StatusCode::kInvalidArgument, "q.cu_q_lens is not monotone: cu_q_lens[2] = 2 < cu_q_lens[1] = 3"},
      {"cu_q_lens start",
       [](QueryBatch& q, PagedKv&, std::vector<int32_t>& s) {
         s = {1, 3, 10, 11};
         q.cu_q_lens = s.data();
       },
       StatusCode::kInvalidArgument, "q.cu_q_lens[0] is 1"},
      {"total_q", [](QueryBatch& q, PagedKv&, auto&) { q.total_q = 12; }, StatusCode::kInvalidArgument,
       "q.cu_q_lens[3] = 11 differs from q.total_q = 12"},
      {"head_dim mismatch", [](QueryBatch&, PagedKv& kv, auto&) { kv.head_dim = 128; }, StatusCode::kInvalidArgument,
       "kv.head_dim is 128 but q.head_dim is 64"},
      {"H % G", [](QueryBatch&, PagedKv& kv, auto&) { kv.num_kv_heads = 3; }, StatusCode::kInvalidArgument,
       "q.num_heads 4 is not a multiple of kv.num_kv_heads 3"},
      {"kv_len < q_len",
       [](QueryBatch&, PagedKv& kv, std::vector<int32_t>& s) {
         s = {3, 5, 40};
         kv.kv_lens = s.data();
       },
       StatusCode::kInvalidArgument, "kv.kv_lens[1] = 5 is smaller than q_len 7 of sequence 1"},
      {"pages", [](QueryBatch&, PagedKv& kv, auto&) { kv.max_pages_per_seq = 2; }, StatusCode::kInvalidArgument,
       "kv.kv_lens[2] = 40 needs 3 pages of 16 keys but kv.max_pages_per_seq is 2"},
      {"page id",
       [](QueryBatch&, PagedKv& kv, std::vector<int32_t>& s) {
         s.assign(kv.block_table, kv.block_table + 3 * kv.max_pages_per_seq);
         s[static_cast<size_t>(kv.max_pages_per_seq) + 1] = kv.num_pages;
         kv.block_table = s.data();
       },
       StatusCode::kOutOfRange, "kv.block_table[1][1] = "},
      {"negative page id",
       [](QueryBatch&, PagedKv& kv, std::vector<int32_t>& s) {
         s.assign(kv.block_table, kv.block_table + 3 * kv.max_pages_per_seq);
         s[2 * static_cast<size_t>(kv.max_pages_per_seq) + 2] = -1;
         kv.block_table = s.data();
       },
       StatusCode::kOutOfRange, "kv.block_table[2][2] = -1 is outside [0, kv.num_pages = "},
      {"kv.k", [](QueryBatch&, PagedKv& kv, auto&) { kv.k = nullptr; }, StatusCode::kInvalidArgument, "kv.k is null"},
      {"kv.page_size", [](QueryBatch&, PagedKv& kv, auto&) { kv.page_size = 0; }, StatusCode::kInvalidArgument,
       "kv.page_size is 0"},
      {"kv.kv_lens", [](QueryBatch&, PagedKv& kv, auto&) { kv.kv_lens = nullptr; }, StatusCode::kInvalidArgument,
       "kv.kv_lens is null"},
  };
  for (const ViewCase& c : cases) {
    SCOPED_TRACE(c.name);
    QueryBatch q = p.queries();
    PagedKv kv = p.cache();
    std::vector<int32_t> scratch;
    c.mutate(q, kv, scratch);
    const Status s = ref::validate_kv(kv, q);
    EXPECT_EQ(s.code(), c.code) << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  // The page id message names the value and the bound.
  QueryBatch q = p.queries();
  PagedKv kv = p.cache();
  std::vector<int32_t> table(kv.block_table, kv.block_table + 3 * kv.max_pages_per_seq);
  table[2 * static_cast<size_t>(kv.max_pages_per_seq) + 1] = 1000;
  kv.block_table = table.data();
  EXPECT_EQ(ref::validate_kv(kv, q).message(),
            "kv.block_table[2][1] = 1000 is outside [0, kv.num_pages = " + std::to_string(kv.num_pages) + ")");
}

TEST(Views, OutputAndParams) {
  float o = 0.0f;
  AttentionOutput out{&o, DType::kF32, nullptr};
  EXPECT_TRUE(ref::validate_output(out).ok());
  out.dtype = static_cast<DType>(7);
  EXPECT_NE(ref::validate_output(out).message().find("out.dtype holds unknown value 7"), std::string::npos);
  out.o = nullptr;
  EXPECT_EQ(ref::validate_output(out).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ref::validate_output(out).message().find("out.o is null"), std::string::npos);

  for (float scale : {0.0f, -0.125f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    const Status s = ref::validate_params(AttentionParams{scale});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("params.scale is "), std::string::npos) << s.message();
  }
}

TEST(Views, AddressHelpers) {
  // Two sequences, page size 4, G = 2, d = 3; sequence 1 lives in pages {5, 2}.
  const int32_t block_table[4] = {0, 1, 5, 2};
  const int32_t kv_lens[2] = {8, 6};
  const int32_t cu_q_lens[3] = {0, 2, 5};
  PagedKv kv;
  kv.page_size = 4;
  kv.num_kv_heads = 2;
  kv.head_dim = 3;
  kv.block_table = block_table;
  kv.max_pages_per_seq = 2;
  kv.kv_lens = kv_lens;
  QueryBatch q;
  q.num_heads = 4;
  q.head_dim = 3;
  q.cu_q_lens = cu_q_lens;
  // Key 5 of sequence 1: page 2, row 1 → element ((2·4 + 1)·2 + g)·3.
  EXPECT_EQ(ref::kv_offset(kv, 1, 5, 1), ((2 * 4 + 1) * 2 + 1) * 3);
  EXPECT_EQ(ref::kv_offset(kv, 1, 0, 0), (5 * 4 * 2) * 3);
  EXPECT_EQ(ref::q_len(q, 1), 3);
  EXPECT_EQ(ref::query_position(q, kv, 1, 0), 3);  // kv 6, q 3: positions 3, 4, 5
  EXPECT_EQ(ref::q_offset(q, 1, 2, 3), ((2 + 2) * 4 + 3) * 3);
}

}  // namespace
}  // namespace kascade::testing
