// test_topk_ref.cpp — topk_select_ref (src/ref/topk_ref.h) against a full sort under the same total
// order (score descending, index ascending): exact index equality on random, heavily tied and
// special (±0, ±inf) inputs, k ∈ {0, 1, 7, n-1, n} over the awkward lengths; output ascending;
// refusals (NaN named by index, k > n, k < 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

// The k first indices of a full stable sort by descending score, then sorted ascending.
std::vector<int32_t> topk_by_full_sort(const std::vector<float>& scores, int64_t k) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

void check_all_k(const std::vector<float>& scores) {
  const int64_t n = static_cast<int64_t>(scores.size());
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{7}, n - 1, n}) {
    if (k < 0 || k > n) continue;
    GuardedBuffer<int32_t> out(static_cast<size_t>(k));
    ASSERT_TRUE(ref::topk_select_ref(scores.data(), n, k, out.data()).ok());
    EXPECT_TRUE(out.intact());
    const std::vector<int32_t> expected = topk_by_full_sort(scores, k);
    EXPECT_EQ(std::vector<int32_t>(out.span().begin(), out.span().end()), expected) << "n " << n << " k " << k;
  }
}

TEST(TopK, RandomScoresMatchFullSort) {
  auto rng = rng_for_test();
  for (int n : awkward_lengths()) check_all_k(random_floats(rng, static_cast<size_t>(n), -5.0f, 5.0f));
}

TEST(TopK, HeavilyTiedScoresPreferLowerIndices) {
  auto rng = rng_for_test();
  for (int n : awkward_lengths()) {
    std::vector<float> scores(static_cast<size_t>(n));
    for (float& x : scores) x = static_cast<float>(rng() % 3);  // three values only
    check_all_k(scores);
    check_all_k(std::vector<float>(static_cast<size_t>(n), 0.5f));  // all equal: the first k win
  }
}

TEST(TopK, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> scores = {0.0f, -0.0f, inf, -inf, 1.0f, -0.0f, inf, -inf, 0.0f};
  check_all_k(scores);
  std::vector<int32_t> out(4);
  ASSERT_TRUE(ref::topk_select_ref(scores.data(), 9, 4, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 2, 4, 6}));  // inf, inf, 1, then the first zero (+0 == -0)
}

TEST(TopK, HandExample) {
  const std::vector<float> scores = {0.1f, 0.7f, 0.3f, 0.7f, 0.2f, 0.9f};
  std::vector<int32_t> out(3);
  ASSERT_TRUE(ref::topk_select_ref(scores.data(), 6, 3, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 3, 5}));
  out.resize(2);
  ASSERT_TRUE(ref::topk_select_ref(scores.data(), 6, 2, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 5}));  // 0.7 at 1 beats 0.7 at 3
}

TEST(TopK, RefusesBadInput) {
  std::vector<float> scores = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f};
  std::vector<int32_t> out(5);
  Status s = ref::topk_select_ref(scores.data(), 4, 2, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scores[2] is NaN"), std::string::npos) << s.message();
  scores[2] = 3.0f;
  s = ref::topk_select_ref(scores.data(), 4, 5, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k = 5 exceeds the number of candidates n = 4"), std::string::npos) << s.message();
  s = ref::topk_select_ref(scores.data(), 4, -1, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k is -1"), std::string::npos) << s.message();
  s = ref::topk_select_ref(scores.data(), -2, 0, out.data());
  EXPECT_NE(s.message().find("n is -2"), std::string::npos) << s.message();
  s = ref::topk_select_ref(nullptr, 4, 1, out.data());
  EXPECT_NE(s.message().find("scores is null"), std::string::npos) << s.message();
  s = ref::topk_select_ref(scores.data(), 4, 1, nullptr);
  EXPECT_NE(s.message().find("out is null"), std::string::npos) << s.message();
  EXPECT_TRUE(ref::topk_select_ref(nullptr, 0, 0, nullptr).ok());
}

}  // namespace
}  // namespace kascade::testing
