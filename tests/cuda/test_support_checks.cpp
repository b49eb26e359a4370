// tests/cuda/test_support_checks.cpp — the CUDA tests' own yardsticks, checked on the host (no GPU
// needed): the fp64 recomputation and the FA3-rule check (cuda_test_support.h) must accept the
// src/ref output rounded to the dtype, and must reject it once one element is perturbed by a few
// units in the last place, a NaN is planted, or an lse is off — so a kernel test cannot pass by
// accident and cannot fail on a correct kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

struct RefOutput {
  std::vector<float> o, lse;
};

RefOutput reference_rounded(const DecodeProblem& p) {
  const DecodeCase& c = p.spec();
  RefOutput r;
  r.o.resize(static_cast<size_t>(p.batch()) * c.num_heads * c.head_dim);
  r.lse.resize(static_cast<size_t>(p.batch()) * c.num_heads);
  AttentionParams params;
  params.scale = p.scale();
  const Status st = ref::dense_attention_ref(p.host_q(), p.host_kv(), params,
                                             AttentionOutput{r.o.data(), c.dtype, r.lse.data()});
  EXPECT_TRUE(st.ok()) << st.to_string();
  // dense_attention_ref wrote o in the dtype: reinterpret the buffer.
  std::vector<float> rounded(r.o.size());
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = load_as_float(r.o.data(), c.dtype, static_cast<int64_t>(i));
  r.o = rounded;
  return r;
}

TEST(CudaTestSupport, ReferenceOutputPassesAndPerturbedOutputFails) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto rng = rng_for_test(static_cast<uint64_t>(dtype));
    DecodeCase c;
    c.dtype = dtype;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.kv_lens = {1, 33, 1000, 4097};
    DecodeProblem p(c, rng);
    const RefOutput r = reference_rounded(p);
    const KeyLists keys = dense_key_lists(p);
    EXPECT_TRUE(check_attention(p, keys, r.o, r.lse)) << dtype_name(dtype);

    RefOutput off = r;
    off.o[5] += 8.0f * static_cast<float>(dtype_epsilon(dtype)) + 0.05f;
    EXPECT_FALSE(check_attention(p, keys, off.o, off.lse));
    off = r;
    off.o[17] = std::nanf("");
    EXPECT_FALSE(check_attention(p, keys, off.o, off.lse));
    off = r;
    off.lse[3] += 1e-3f;
    EXPECT_FALSE(check_attention(p, keys, off.o, off.lse));
    // An empty key list demands o = 0 and lse = -inf.
    KeyLists empty = keys;
    empty[2].clear();
    EXPECT_FALSE(check_attention(p, empty, r.o, r.lse));
  }
}

TEST(CudaTestSupport, SparseKeyListsFollowTheHeadMap) {
  auto rng = rng_for_test();
  DecodeCase c;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.kv_lens = {10};
  DecodeProblem p(c, rng);
  const std::vector<int32_t> indices = {1, 2, -1, 7, -1, -1};  // [B=1, rows=2, k_max=3]
  const std::vector<int32_t> lens = {2, 1};
  const KeyLists by_map = sparse_key_lists(p, indices, lens, 2, 3, IndexGranularity::kPerKvGroup, {1, 0});
  EXPECT_EQ(by_map[0], std::vector<int32_t>({7}));      // head 0, group 0 → row 1
  EXPECT_EQ(by_map[3], std::vector<int32_t>({1, 2}));   // head 3, group 1 → row 0
  const KeyLists identity = sparse_key_lists(p, indices, lens, 2, 3, IndexGranularity::kPerKvGroup, {});
  EXPECT_EQ(identity[1], std::vector<int32_t>({1, 2}));
  const std::vector<int32_t> four_rows = {0, -1, 1, -1, 2, -1, 3, 4};  // [1, 4, 2], per query head
  const KeyLists per_head = sparse_key_lists(p, four_rows, {1, 1, 1, 2}, 4, 2, IndexGranularity::kPerQueryHead, {});
  EXPECT_EQ(per_head[3], std::vector<int32_t>({3, 4}));
  EXPECT_EQ(random_subset(rng, 50, 50, true).size(), 50u);
}

}  // namespace
}  // namespace kascade::testing
