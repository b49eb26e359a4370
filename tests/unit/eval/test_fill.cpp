// tests/unit/eval/test_fill.cpp — the length search against brute force: the largest unit count
// whose prompt fits, for linear, step-wise and irregular token counts; within budget even when
// the counter is not monotone; few counter calls; clear errors.
#include <gtest/gtest.h>

#include "eval/fill.h"
#include "testing/harness.h"

namespace kascade::eval {
namespace {

// A prompt of `base` fixed words plus `per_unit(u)` words for u units.
PromptBuilder words_builder(int64_t base, std::function<int64_t(int64_t)> words_for_units) {
  return [base, words_for_units](int64_t units) -> Result<BuiltPrompt> {
    BuiltPrompt p;
    const int64_t n = base + words_for_units(units);
    for (int64_t i = 0; i < n; ++i) p.prompt += "w ";
    return p;
  };
}

int64_t brute_force_units(const PromptBuilder& build, int64_t budget, int64_t max_units) {
  int64_t best = 0;
  for (int64_t u = 0; u <= max_units; ++u) {
    if (count_whitespace_tokens(build(u)->prompt) <= budget) best = u;
  }
  return best;
}

TEST(EvalFill, FindsTheLargestFittingUnitCount) {
  auto rng = testing::rng_for_test();
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t base = static_cast<int64_t>(rng() % 50);
    const int64_t per = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t budget = base + 1 + static_cast<int64_t>(rng() % 700);
    const PromptBuilder build = words_builder(base, [per](int64_t u) { return per * u; });
    auto filled = fill_to_budget(build, count_whitespace_tokens, budget, 4 * budget, "test");
    ASSERT_TRUE(filled.ok()) << filled.status().to_string();
    EXPECT_EQ(filled->units, brute_force_units(build, budget, budget + 1)) << "base " << base << " per " << per;
    EXPECT_LE(filled->tokens, budget);
    EXPECT_EQ(filled->tokens, count_whitespace_tokens(filled->built.prompt));
  }
}

TEST(EvalFill, IrregularCostsStillGiveTheLargestFit) {
  // Units cost 1, 2, 3, 1, 2, 3, ... words, plus a jump of 40 every 100 units.
  const PromptBuilder build = words_builder(17, [](int64_t u) {
    int64_t w = 0;
    for (int64_t i = 0; i < u; ++i) w += 1 + i % 3;
    return w + 40 * (u / 100);
  });
  for (const int64_t budget : {18, 100, 457, 1000, 2345}) {
    auto filled = fill_to_budget(build, count_whitespace_tokens, budget, 4 * budget, "test");
    ASSERT_TRUE(filled.ok());
    EXPECT_EQ(filled->units, brute_force_units(build, budget, budget)) << budget;
  }
}

TEST(EvalFill, UsesFewCounterCalls) {
  const PromptBuilder build = words_builder(100, [](int64_t u) { return (13 * u) / 10; });
  auto filled = fill_to_budget(build, count_whitespace_tokens, 32768, 4 * 32768, "test");
  ASSERT_TRUE(filled.ok());
  EXPECT_LE(filled->counter_calls, 12);
  // The cost is monotone here, so "fits, and one more unit does not" is the brute-force answer.
  EXPECT_LE(count_whitespace_tokens(build(filled->units)->prompt), 32768);
  EXPECT_GT(count_whitespace_tokens(build(filled->units + 1)->prompt), 32768);
}

TEST(EvalFill, NonMonotoneCounterStaysWithinBudget) {
  // Every 7th unit count is (wrongly) counted 50 tokens heavier.
  const PromptBuilder build = words_builder(10, [](int64_t u) { return u; });
  const TokenCounter bumpy = [](std::string_view text) {
    const int64_t n = count_whitespace_tokens(text);
    return n % 7 == 0 ? n + 50 : n;
  };
  for (const int64_t budget : {60, 333, 1200}) {
    auto filled = fill_to_budget(build, bumpy, budget, 4 * budget, "test");
    ASSERT_TRUE(filled.ok());
    EXPECT_LE(filled->tokens, budget);
    EXPECT_EQ(filled->tokens, bumpy(filled->built.prompt));
  }
}

TEST(EvalFill, RespectsMaxUnits) {
  const PromptBuilder build = words_builder(5, [](int64_t u) { return u; });
  auto filled = fill_to_budget(build, count_whitespace_tokens, 1000, 40, "test");
  ASSERT_TRUE(filled.ok());
  EXPECT_EQ(filled->units, 40);
  EXPECT_EQ(filled->tokens, 45);
}

TEST(EvalFill, Errors) {
  const PromptBuilder build = words_builder(50, [](int64_t u) { return u; });
  auto too_small = fill_to_budget(build, count_whitespace_tokens, 49, 100, "mytask");
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("mytask"), std::string::npos);
  EXPECT_NE(too_small.status().message().find("50 tokens"), std::string::npos);
  EXPECT_FALSE(fill_to_budget(build, count_whitespace_tokens, 0, 100, "t").ok());
  EXPECT_FALSE(fill_to_budget(build, TokenCounter(), 100, 100, "t").ok());
  EXPECT_FALSE(fill_to_budget(PromptBuilder(), count_whitespace_tokens, 100, 100, "t").ok());
  auto negative = fill_to_budget(build, [](std::string_view) -> int64_t { return -1; }, 100, 100, "t");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("-1"), std::string::npos);
  const PromptBuilder failing = [](int64_t u) -> Result<BuiltPrompt> {
    if (u > 3) return invalid_argument("builder refuses ", u);
    return BuiltPrompt{"a b", {}};
  };
  auto failed = fill_to_budget(failing, count_whitespace_tokens, 100, 100, "t");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("builder refuses"), std::string::npos);
}

}  // namespace
}  // namespace kascade::eval
