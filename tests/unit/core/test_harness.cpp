// test_harness.cpp — the test helpers of tests/testing/harness.h catch what they exist to catch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <string>
#include <limits>

#include "testing/harness.h"

namespace kascade::testing {
namespace {

TEST(Harness, SeedsDependOnTestNameAndSalt) {
  EXPECT_EQ(seed_from_test_name(1), seed_from_test_name(1));
  EXPECT_NE(seed_from_test_name(1), seed_from_test_name(2));
}

TEST(Harness, AllCloseReportsWorstElementAndNonFinite) {
  std::vector<float> ref = {1, 2, 3, 4, 5, 6};
  std::vector<float> got = ref;
  EXPECT_TRUE(all_close(got, ref, {2, 3}, {1e-6, 0}));
  got[4] = 5.5f;
  auto r = all_close(got, ref, {2, 3}, {1e-3, 1e-3});
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("(1, 1)"), std::string::npos) << r.message();
  got[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(all_close(got, ref, {2, 3}, {1e9, 1e9}));  // NaN never passes
  ref[4] = -std::numeric_limits<float>::infinity();
  got[4] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(all_close(got, ref, {2, 3}, {1e9, 1e9}));  // inf sign differs
  got[4] = ref[4];
  EXPECT_TRUE(all_close(got, ref, {2, 3}, {1e-6, 0}));
  EXPECT_FALSE(all_close(got, ref, {7}, {1, 1}));  // shape mismatch
}

TEST(Harness, NaiveErrorRule) {
  std::vector<double> ref = {1.0, 2.0};
  std::vector<float> naive = {1.01f, 2.0f};
  EXPECT_TRUE(within_naive_error(std::vector<float>{1.02f, 2.0f}, naive, ref, {2}, 0.0));
  EXPECT_FALSE(within_naive_error(std::vector<float>{1.03f, 2.0f}, naive, ref, {2}, 0.0));
}

TEST(Harness, TopkSetsAreTieAware) {
  std::vector<float> scores = {5, 1, 3, 3, 0, 4};
  // k = 3: {0, 5, 2} or {0, 5, 3} (2 and 3 tie at the k-th score).
  std::vector<int32_t> expected = {0, 5, 2};
  EXPECT_TRUE(topk_sets_equivalent(std::vector<int32_t>{5, 3, 0}, expected, scores, 1e-6));
  EXPECT_FALSE(topk_sets_equivalent(std::vector<int32_t>{5, 1, 0}, expected, scores, 1e-6));
  EXPECT_FALSE(topk_sets_equivalent(std::vector<int32_t>{5, 5, 0}, expected, scores, 1e-6));
  EXPECT_FALSE(topk_sets_equivalent(std::vector<int32_t>{5, -1, 0}, expected, scores, 1e-6));
  EXPECT_FALSE(topk_sets_equivalent(std::vector<int32_t>{5, 0}, expected, scores, 1e-6));
}

TEST(Harness, GuardedBufferDetectsOverrun) {
  GuardedBuffer<float> buf(10);
  EXPECT_EQ(count_nan(buf.span()), 10);
  EXPECT_TRUE(buf.intact());
  buf.data()[10] = 0.0f;  // one past the end: lands in the canary zone
  EXPECT_FALSE(buf.intact());
  GuardedBuffer<int32_t> ibuf(4);
  ibuf.data()[-1] = 7;
  EXPECT_FALSE(ibuf.intact());
}

TEST(Harness, TempPathsAreUniquePerTestProcessAndName) {
  const std::string a = test_temp_path("x").filename().string();
  EXPECT_NE(a, test_temp_path("y").filename().string());
  EXPECT_NE(a.find("Harness_TempPathsAreUniquePerTestProcessAndName"), std::string::npos) << a;
  EXPECT_NE(a.find("_" + std::to_string(::getpid()) + "_"), std::string::npos) << a;
  EXPECT_EQ(test_temp_path("x").parent_path(), std::filesystem::temp_directory_path());
}

class HarnessParam : public ::testing::TestWithParam<int> {};
TEST_P(HarnessParam, TempPathOfAParameterisedTestHasNoSubdirectory) {
  EXPECT_EQ(test_temp_path("p").parent_path(), std::filesystem::temp_directory_path());
}
INSTANTIATE_TEST_SUITE_P(Case, HarnessParam, ::testing::Values(1));

}  // namespace
}  // namespace kascade::testing
