// tests/unit/eval/test_scoring.cpp — RULER's scorers on hand-written predictions: the fraction of
// references contained (string_match_all), any contained (string_match_part), case-insensitive,
// substring semantics (as RULER: "1234567" inside "12345678" counts), invalid references refused.
#include <gtest/gtest.h>

#include "kascade/tasks.h"

namespace kascade::eval {
namespace {

TEST(EvalScoring, StringMatchAll) {
  const std::vector<std::string> refs = {"4215391", "8827461", "ALPHA-beta", "x"};
  EXPECT_DOUBLE_EQ(*string_match_all("4215391, 8827461, alpha-BETA and x.", refs), 1.0);
  EXPECT_DOUBLE_EQ(*string_match_all("The numbers are 4215391 and 8827461.", refs), 0.5);
  EXPECT_DOUBLE_EQ(*string_match_all("nothing here", {std::vector<std::string>{"abc"}}), 0.0);
  EXPECT_DOUBLE_EQ(*string_match_all("", refs), 0.0);
  EXPECT_DOUBLE_EQ(*string_match_all("421539 8827461", refs), 0.25);   // a truncated number does not count
  EXPECT_DOUBLE_EQ(*string_match_all("42153910", {std::vector<std::string>{"4215391"}}), 1.0);  // containment
  EXPECT_DOUBLE_EQ(*string_match_all("a\nx", {std::vector<std::string>{"X"}}), 1.0);
}

TEST(EvalScoring, StringMatchPart) {
  const std::vector<std::string> refs = {"Tirona Vask", "Vask"};
  EXPECT_DOUBLE_EQ(*string_match_part("It is tirona vask.", refs), 1.0);
  EXPECT_DOUBLE_EQ(*string_match_part("Mr VASK", refs), 1.0);
  EXPECT_DOUBLE_EQ(*string_match_part("Melkat", refs), 0.0);
}

TEST(EvalScoring, DispatchAndErrors) {
  const std::vector<std::string> refs = {"a1", "b2"};
  EXPECT_DOUBLE_EQ(*score_prediction(ScorerKind::kStringMatchAll, "a1", refs), 0.5);
  EXPECT_DOUBLE_EQ(*score_prediction(ScorerKind::kStringMatchPart, "a1", refs), 1.0);
  EXPECT_FALSE(string_match_all("x", std::vector<std::string>{}).ok());
  EXPECT_FALSE(string_match_part("x", std::vector<std::string>{"a", ""}).ok());
  EXPECT_STREQ(scorer_name(ScorerKind::kStringMatchPart), "string_match_part");
  EXPECT_STREQ(scorer_name(ScorerKind::kStringMatchAll), "string_match_all");
}

TEST(EvalScoring, GeneratedAnswersScoreOneOnTheirCompletion) {
  for (const auto& t : task_catalog()) {
    SampleRequest r{std::string(t.name), Split::kDev, 1500, 1, 0, std::nullopt, std::nullopt};
    auto s = generate_sample(r, count_whitespace_tokens);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_DOUBLE_EQ(*score_prediction(s->scorer, s->completion, s->answers), 1.0) << t.name;
    EXPECT_LT(*score_prediction(s->scorer, s->answer_prefix, s->answers), 1.0) << t.name;
  }
}

}  // namespace
}  // namespace kascade::eval
