// eval/fill.h — length targeting: the largest number of filler units whose prompt fits a token
// budget. The builder must be a pure function of `units`; the token counter is called on whole
// prompts (tokenizers do not add up over pieces), a few times per sample: the search
// extrapolates from the measured tokens per unit, then interpolates inside the bracket, falling
// back to bisection, so it costs O(log) counts and usually about five.
// Guarantee: the returned prompt has tokens <= budget, and units + 1 was measured above the
// budget (or units == max_units). With a counter that is not monotone in `units` the result is
// still within budget, though maybe not the largest such unit count.
// Tested by tests/unit/eval/test_fill.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/status.h"
#include "kascade/tasks.h"

namespace kascade::eval {

struct BuiltPrompt {
  std::string prompt;
  std::vector<NeedlePlacement> needles;  // char_offset relative to `prompt`
};

struct FilledPrompt {
  BuiltPrompt built;
  int64_t units = 0;
  int64_t tokens = 0;
  int counter_calls = 0;
};

using PromptBuilder = std::function<Result<BuiltPrompt>(int64_t units)>;

// `what` names the task in error messages.
Result<FilledPrompt> fill_to_budget(const PromptBuilder& build, const TokenCounter& count_tokens, int64_t budget,
                                    int64_t max_units, std::string_view what);

}  // namespace kascade::eval
