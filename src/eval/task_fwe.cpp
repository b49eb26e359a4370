// eval/task_fwe.cpp — frequent-words extraction (RULER's fwe): N coded words whose ranks follow a
// Zipf law with alpha = 2; rank 1 is the noise word "....", the answer is the words of ranks
// 2..4. Counts are the deterministic Zipf shares c_r = floor(N r^-2 / H) over kRanks ranks
// (H normalises the shares; the rounding remainder goes to the noise word), shuffled. The shares
// use only IEEE-exact operations (1 / r^2, a fixed summation order), so every platform agrees. With
// N >= kMinWords the fourth-ranked word is strictly more frequent than the fifth, so the answer
// is unambiguous. The filler unit is one word beyond kMinWords.
// Tested by tests/unit/eval/test_tasks.cpp (counts the words of the prompt).
#include <cmath>
#include <unordered_set>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {
constexpr int kAlpha = 2;
constexpr int kRanks = 1000;
constexpr int64_t kMinWords = 200;
constexpr int kNumAnswers = 3;

// Zipf counts of ranks 1..kRanks (index 0 = rank 1) for n words in all.
static_assert(kAlpha == 2, "zipf_weight computes r^-2");
double zipf_weight(int r) { return 1.0 / (static_cast<double>(r) * static_cast<double>(r)); }  // r^-kAlpha

std::vector<int64_t> zipf_counts(int64_t n) {
  double h = 0.0;
  for (int r = 1; r <= kRanks; ++r) h += zipf_weight(r);
  std::vector<int64_t> counts(kRanks);
  int64_t total = 0;
  for (int r = 1; r <= kRanks; ++r) {
    counts[static_cast<size_t>(r - 1)] = static_cast<int64_t>(std::floor(static_cast<double>(n) * zipf_weight(r) / h));
    total += counts[static_cast<size_t>(r - 1)];
  }
  counts[0] += n - total;
  return counts;
}
}  // namespace

Result<TaskOutput> generate_fwe(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = fwe_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const FwePhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];

  // Coded words for ranks 2..kRanks (rank 1 is the noise word).
  std::vector<std::string> words = {std::string(kFweNoiseWord)};
  std::unordered_set<std::string> used;
  while (static_cast<int>(words.size()) < kRanks) {
    std::string w = random_coded_word(rng, ctx.split);
    if (used.insert(w).second) words.push_back(std::move(w));
  }
  for (int r = 1; r <= kNumAnswers; ++r) out.answers.push_back(words[static_cast<size_t>(r)]);
  const uint64_t shuffle_seed = mix64(ctx.rng_seed ^ 0x66776573687566ULL);

  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, {}));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, {}));
  tail += out.answer_prefix;
  const std::string head(phr.instruction);

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    const int64_t n = kMinWords + units;
    const std::vector<int64_t> counts = zipf_counts(n);
    if (counts[kNumAnswers] <= counts[kNumAnswers + 1]) {
      return internal_error("fwe: rank ", kNumAnswers + 1, " is not more frequent than rank ", kNumAnswers + 2,
                            " with ", n, " words");
    }
    std::vector<int32_t> sequence;
    sequence.reserve(static_cast<size_t>(n));
    for (int r = 0; r < kRanks; ++r) sequence.insert(sequence.end(), static_cast<size_t>(counts[static_cast<size_t>(r)]), r);
    DetRng shuffle_rng(mix64(shuffle_seed + static_cast<uint64_t>(n)));
    shuffle_rng.shuffle(sequence);
    RenderedContext context;
    context.text.reserve(static_cast<size_t>(n) * 7);
    for (size_t i = 0; i < sequence.size(); ++i) {
      if (i > 0) context.text.push_back(' ');
      context.text.append(words[static_cast<size_t>(sequence[i])]);
    }
    return assemble_prompt(head, std::move(context), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["alpha"] = kAlpha;
  out.params["num_words"] = kMinWords + out.filled.units;
  return out;
}

}  // namespace kascade::eval
