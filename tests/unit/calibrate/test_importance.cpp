// test_importance.cpp — ImportanceAccumulator (src/calibrate/importance_accumulator.cpp):
// w_l = 1 − cos(x_l, x_l + attn_l) against hand-computed cosines, the mean over a prompt's tokens
// (tokens sent in several calls) and then over prompts (not a pooled mean over all tokens), the
// same values from bf16 and fp16 rows, a random case against a direct fp64 evaluation, and every
// refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kascade/calibration.h"
#include "testing/harness.h"

namespace kascade::calib {
namespace {

// Hidden size 2. Per layer, the token rows of each prompt and the hand-computed 1 − cos.
//   x = (3, 4),  attn = (0, 0):   x + attn = x                  → cos 1        → 0
//   x = (1, 0),  attn = (0, 1):   x + attn = (1, 1)             → cos 1/√2     → 1 − 1/√2
//   x = (1, 0),  attn = (−2, 0):  x + attn = (−1, 0)            → cos −1       → 2
//   x = (0, 2),  attn = (0, 2):   x + attn = (0, 4)             → cos 1        → 0
//   x = (1, 1),  attn = (1, −1):  x + attn = (2, 0), x·y = 2    → cos 1/√2     → 1 − 1/√2
//   x = (2, 0),  attn = (−2, 2):  x + attn = (0, 2)             → cos 0        → 1
struct HandCase {
  std::vector<float> x, attn;  // [tokens, 2]
};
const double kR = 1.0 - 1.0 / std::sqrt(2.0);

TEST(ImportanceAccumulator, HandComputedCosinesMeanOverTokensThenPrompts) {
  // Prompt A (2 tokens): layer 0 tokens {x=(3,4),a=0} and {x=(1,0),a=(0,1)} → mean (0 + R) / 2.
  //                      layer 1 tokens {x=(1,0),a=(−2,0)} and {x=(0,2),a=(0,2)} → mean (2 + 0) / 2 = 1.
  // Prompt B (3 tokens, sent as 2 + 1): layer 0 {(1,1),(1,−1)} x3 → R.
  //                      layer 1 {(2,0),(−2,2)}, {(3,4),0}, {(1,0),(−2,0)} → (1 + 0 + 2) / 3 = 1.
  // w_0 = ((0 + R)/2 + R) / 2, w_1 = (1 + 1) / 2 = 1. (A pooled mean over all 5 tokens would give
  // w_0 = (R + 3R) / 5 instead.)
  const HandCase a0{{3, 4, 1, 0}, {0, 0, 0, 1}};
  const HandCase a1{{1, 0, 0, 2}, {-2, 0, 0, 2}};
  const HandCase b0{{1, 1, 1, 1, 1, 1}, {1, -1, 1, -1, 1, -1}};
  const HandCase b1{{2, 0, 3, 4, 1, 0}, {-2, 2, 0, 0, -2, 0}};
  auto acc = ImportanceAccumulator::create(2, 2);
  ASSERT_TRUE(acc.ok()) << acc.status().to_string();
  ASSERT_TRUE(acc->begin_prompt("A").ok());
  ASSERT_TRUE(acc->add(1, a1.x.data(), a1.attn.data(), 2, DType::kF32).ok());  // layers in any order
  ASSERT_TRUE(acc->add(0, a0.x.data(), a0.attn.data(), 2, DType::kF32).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  auto after_a = acc->mean_importance();
  ASSERT_TRUE(after_a.ok());
  EXPECT_NEAR((*after_a)[0], kR / 2.0, 1e-15);
  EXPECT_NEAR((*after_a)[1], 1.0, 1e-15);

  ASSERT_TRUE(acc->begin_prompt("B").ok());
  ASSERT_TRUE(acc->add(0, b0.x.data(), b0.attn.data(), 2, DType::kF32).ok());
  ASSERT_TRUE(acc->add(1, b1.x.data(), b1.attn.data(), 3, DType::kF32).ok());
  ASSERT_TRUE(acc->add(0, b0.x.data() + 4, b0.attn.data() + 4, 1, DType::kF32).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  EXPECT_EQ(acc->num_prompts(), 2);
  auto w = acc->mean_importance();
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 2u);
  EXPECT_NEAR((*w)[0], (kR / 2.0 + kR) / 2.0, 1e-15);
  EXPECT_NEAR((*w)[1], 1.0, 1e-15);
  EXPECT_NE((*after_a)[0], (*w)[0]);
}

TEST(ImportanceAccumulator, SixteenBitRowsGiveTheSameValues) {
  // Every value below is exact in fp16 and bf16, so the result equals the fp32 one.
  const HandCase c{{3, 4, 1, 0, 1, 0}, {0, 0, 0, 1, -2, 0}};  // 1 − cos: 0, R, 2
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::vector<uint8_t> x = testing::pack_as(c.x, dtype);
    const std::vector<uint8_t> attn = testing::pack_as(c.attn, dtype);
    auto acc = ImportanceAccumulator::create(1, 2);
    ASSERT_TRUE(acc.ok());
    ASSERT_TRUE(acc->begin_prompt("p").ok());
    ASSERT_TRUE(acc->add(0, x.data(), attn.data(), 3, dtype).ok()) << dtype_name(dtype);
    ASSERT_TRUE(acc->end_prompt().ok());
    auto w = acc->mean_importance();
    ASSERT_TRUE(w.ok());
    EXPECT_NEAR((*w)[0], (0.0 + kR + 2.0) / 3.0, 1e-15) << dtype_name(dtype);
  }
}

TEST(ImportanceAccumulator, RandomRowsAgainstDirectEvaluation) {
  auto rng = testing::rng_for_test();
  const int32_t N = 3;
  const int64_t d = 37;
  const std::vector<int64_t> tokens_per_prompt = {5, 1, 9};
  auto acc = ImportanceAccumulator::create(N, d);
  ASSERT_TRUE(acc.ok());
  std::vector<double> expected(N, 0.0);
  for (size_t p = 0; p < tokens_per_prompt.size(); ++p) {
    const int64_t T = tokens_per_prompt[p];
    ASSERT_TRUE(acc->begin_prompt(detail::concat("p", p)).ok());
    for (int32_t l = 0; l < N; ++l) {
      const std::vector<float> x = testing::random_floats(rng, T * d, -1.0f, 1.0f);
      const std::vector<float> attn = testing::random_floats(rng, T * d, -0.5f, 0.5f);
      ASSERT_TRUE(acc->add(l, x.data(), attn.data(), T, DType::kF32).ok());
      double sum = 0.0;
      for (int64_t t = 0; t < T; ++t) {
        double dot = 0.0, nx = 0.0, ny = 0.0;
        for (int64_t c = 0; c < d; ++c) {
          const double xv = x[t * d + c], yv = static_cast<double>(x[t * d + c]) + attn[t * d + c];
          dot += xv * yv;
          nx += xv * xv;
          ny += yv * yv;
        }
        sum += 1.0 - dot / std::sqrt(nx * ny);
      }
      expected[l] += sum / static_cast<double>(T) / static_cast<double>(tokens_per_prompt.size());
    }
    ASSERT_TRUE(acc->end_prompt().ok());
  }
  auto w = acc->mean_importance();
  ASSERT_TRUE(w.ok());
  for (int32_t l = 0; l < N; ++l) EXPECT_NEAR((*w)[l], expected[l], 1e-13) << "layer " << l;
}

TEST(ImportanceAccumulator, RefusesBadInput) {
  EXPECT_FALSE(ImportanceAccumulator::create(0, 4).ok());
  EXPECT_FALSE(ImportanceAccumulator::create(2, 0).ok());
  auto acc = ImportanceAccumulator::create(2, 2);
  ASSERT_TRUE(acc.ok());
  const float x[] = {1, 0}, attn[] = {0, 1};
  EXPECT_FALSE(acc->add(0, x, attn, 1, DType::kF32).ok()) << "outside a prompt";
  EXPECT_FALSE(acc->end_prompt().ok());
  ASSERT_TRUE(acc->begin_prompt("refusals").ok());

  auto expect_refused = [&](Status s, const char* needle) {
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("refusals"), std::string::npos) << s.message();
  };
  const float zero[] = {0, 0}, minus_x[] = {-1, 0}, nan_row[] = {1, std::numeric_limits<float>::quiet_NaN()};
  expect_refused(acc->add(2, x, attn, 1, DType::kF32), "out of range");
  expect_refused(acc->add(0, nullptr, attn, 1, DType::kF32), "null");
  expect_refused(acc->add(0, x, attn, 0, DType::kF32), "num_tokens");
  expect_refused(acc->add(0, zero, attn, 1, DType::kF32), "x has zero norm");
  expect_refused(acc->add(0, x, minus_x, 1, DType::kF32), "x + attn has zero norm");
  expect_refused(acc->add(0, nan_row, attn, 1, DType::kF32), "non-finite");
  // A call with a bad token later in the batch changes nothing.
  const float two_x[] = {1, 0, 0, 0}, two_attn[] = {0, 1, 0, 1};
  expect_refused(acc->add(0, two_x, two_attn, 2, DType::kF32), "token 1");

  ASSERT_TRUE(acc->add(0, x, attn, 1, DType::kF32).ok());
  Status s = acc->end_prompt();
  expect_refused(s, "layer 1 received no token");
  EXPECT_EQ(acc->num_prompts(), 0);

  ASSERT_TRUE(acc->begin_prompt("uneven").ok());
  ASSERT_TRUE(acc->add(0, x, attn, 1, DType::kF32).ok());
  ASSERT_TRUE(acc->add(1, two_attn, two_attn, 2, DType::kF32).ok());
  s = acc->end_prompt();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer 1 received 2 tokens but layer 0 received 1"), std::string::npos) << s.message();
  EXPECT_FALSE(acc->mean_importance().ok()) << "no prompt finished";

  // The refused calls left no trace: one clean prompt gives exactly its own values.
  ASSERT_TRUE(acc->begin_prompt("clean").ok());
  ASSERT_TRUE(acc->add(0, x, attn, 1, DType::kF32).ok());
  EXPECT_FALSE(acc->add(1, x, minus_x, 1, DType::kF32).ok());
  ASSERT_TRUE(acc->add(1, x, x, 1, DType::kF32).ok());
  ASSERT_TRUE(acc->end_prompt().ok());
  auto w = acc->mean_importance();
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR((*w)[0], kR, 1e-15);
  EXPECT_NEAR((*w)[1], 0.0, 1e-15);
}

}  // namespace
}  // namespace kascade::calib
