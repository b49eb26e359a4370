// eval/fill.cpp — the largest filler that fits a token budget (see fill.h).
// Tested by tests/unit/eval/test_fill.cpp.
#include "eval/fill.h"

#include <algorithm>
#include <cmath>

namespace kascade::eval {

Result<FilledPrompt> fill_to_budget(const PromptBuilder& build, const TokenCounter& count_tokens, int64_t budget,
                                    int64_t max_units, std::string_view what) {
  KC_CHECK_ARG(static_cast<bool>(build), what, ": no prompt builder");
  KC_CHECK_ARG(static_cast<bool>(count_tokens), what, ": no token counter");
  KC_CHECK_ARG(budget > 0, what, ": token budget is ", budget, "; it must be positive");
  KC_CHECK_ARG(max_units >= 0, what, ": max_units is ", max_units);

  FilledPrompt best;
  int calls = 0;
  auto measure = [&](int64_t units, BuiltPrompt* keep) -> Result<int64_t> {
    KC_ASSIGN_OR_RETURN(BuiltPrompt built, build(units));
    const int64_t tokens = count_tokens(built.prompt);
    ++calls;
    if (tokens < 0) return invalid_argument(what, ": the token counter returned ", tokens);
    if (keep != nullptr) *keep = std::move(built);
    return tokens;
  };

  BuiltPrompt lo_prompt;
  KC_ASSIGN_OR_RETURN(const int64_t t0, measure(0, &lo_prompt));
  if (t0 > budget) {
    return invalid_argument(what, ": the prompt without any filler already has ", t0,
                            " tokens, more than the budget of ", budget, " tokens; ask for a longer target length");
  }
  int64_t lo = 0, t_lo = t0;   // largest units known to fit
  int64_t hi = -1, t_hi = 0;   // smallest units known not to fit (-1: none yet)
  int64_t last_width = -1;
  while (true) {
    if (lo == max_units) break;
    if (hi != -1 && hi - lo <= 1) break;
    int64_t guess;
    if (hi == -1) {
      // Extrapolate with the measured tokens per unit (1 per unit before any measurement).
      const double rate = lo > 0 ? std::max(1e-3, static_cast<double>(t_lo - t0) / static_cast<double>(lo)) : 1.0;
      const double step = std::max(1.0, std::floor(static_cast<double>(budget - t_lo) / rate));
      guess = lo + static_cast<int64_t>(std::min(step, static_cast<double>(max_units - lo)));
    } else {
      const int64_t width = hi - lo;
      const double frac = t_hi > t_lo ? static_cast<double>(budget - t_lo) / static_cast<double>(t_hi - t_lo) : 0.5;
      guess = lo + static_cast<int64_t>(std::floor(frac * static_cast<double>(width)));
      // Bisect when interpolation stopped shrinking the bracket fast enough.
      if (last_width != -1 && width * 2 > last_width) guess = lo + width / 2;
      last_width = width;
      guess = std::clamp<int64_t>(guess, lo + 1, hi - 1);
    }
    BuiltPrompt candidate;
    KC_ASSIGN_OR_RETURN(const int64_t t, measure(guess, &candidate));
    if (t <= budget) {
      lo = guess;
      t_lo = t;
      lo_prompt = std::move(candidate);
    } else {
      hi = guess;
      t_hi = t;
    }
    if (calls > 200) return internal_error(what, ": length search did not converge");
  }
  best.built = std::move(lo_prompt);
  best.units = lo;
  best.tokens = t_lo;
  best.counter_calls = calls;
  return best;
}

}  // namespace kascade::eval
