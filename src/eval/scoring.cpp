// eval/scoring.cpp — RULER's scorers (string_match_all, string_match_part): case-insensitive
// substring containment of the reference strings in the prediction.
// Tested by tests/unit/eval/test_scoring.cpp on hand-written cases.
#include <algorithm>
#include <cctype>

#include "kascade/tasks.h"

namespace kascade::eval {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status check_answers(std::span<const std::string> answers) {
  KC_CHECK_ARG(!answers.empty(), "scoring needs at least one expected answer");
  for (size_t i = 0; i < answers.size(); ++i) {
    KC_CHECK_ARG(!answers[i].empty(), "expected answer ", i, " is empty");
  }
  return ok_status();
}

}  // namespace

Result<double> string_match_all(std::string_view prediction, std::span<const std::string> answers) {
  KC_RETURN_IF_ERROR(check_answers(answers));
  const std::string pred = lower(prediction);
  int64_t found = 0;
  for (const auto& a : answers) found += pred.find(lower(a)) != std::string::npos ? 1 : 0;
  return static_cast<double>(found) / static_cast<double>(answers.size());
}

Result<double> string_match_part(std::string_view prediction, std::span<const std::string> answers) {
  KC_RETURN_IF_ERROR(check_answers(answers));
  const std::string pred = lower(prediction);
  const bool any = std::any_of(answers.begin(), answers.end(),
                               [&](const std::string& a) { return pred.find(lower(a)) != std::string::npos; });
  return any ? 1.0 : 0.0;
}

Result<double> score_prediction(ScorerKind kind, std::string_view prediction, std::span<const std::string> answers) {
  return kind == ScorerKind::kStringMatchPart ? string_match_part(prediction, answers)
                                              : string_match_all(prediction, answers);
}

}  // namespace kascade::eval
