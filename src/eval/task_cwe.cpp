// eval/task_cwe.cpp — common-words extraction (RULER's cwe): a numbered list of words where
// kNumCommon words appear freq_cw times each and the others freq_ucw times; answer: the common
// words. RULER's values from 4K tokens on (freq_cw 30, freq_ucw 3); shorter targets scale
// freq_cw down (30 * target / 4096, at least 2) and freq_ucw to at most a third of it, so the
// fixed part still fits. The filler unit is one uncommon word (freq_ucw items). When the split's
// vocabulary runs out, uncommon words repeat and freq_cw rises to keep the same margin
// (freq_cw - freq_ucw) over the most frequent uncommon word, so the answer stays unambiguous.
// Train split: the completion lists the common words in order of first appearance (eval / dev: the
// default completion, the answers joined).
// Tested by tests/unit/eval/test_tasks.cpp (counts the words of the prompt).
#include <algorithm>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {
constexpr int kNumCommon = 10;
}  // namespace

Result<TaskOutput> generate_cwe(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = cwe_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const CwePhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];

  const int64_t freq_cw = ctx.target_length >= 4096 ? 30 : std::max<int64_t>(2, 30 * ctx.target_length / 4096);
  const int64_t freq_ucw = std::max<int64_t>(1, std::min<int64_t>(3, freq_cw / 3));

  const SplitWords& w = split_words(ctx.split);
  std::vector<std::string_view> vocab;
  vocab.insert(vocab.end(), w.adjectives.begin(), w.adjectives.end());
  vocab.insert(vocab.end(), w.nouns.begin(), w.nouns.end());
  vocab.insert(vocab.end(), w.verbs.begin(), w.verbs.end());
  rng.shuffle(vocab);
  const std::vector<std::string_view> common(vocab.begin(), vocab.begin() + kNumCommon);
  const std::vector<std::string_view> uncommon(vocab.begin() + kNumCommon, vocab.end());
  const int64_t num_uncommon = static_cast<int64_t>(uncommon.size());
  for (const auto c : common) out.answers.emplace_back(c);
  const uint64_t shuffle_seed = mix64(ctx.rng_seed ^ 0x63776573687566ULL);

  const std::string num = std::to_string(kNumCommon);
  const std::pair<std::string_view, std::string_view> vars[] = {{"num", num}};
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, vars));
  tail += out.answer_prefix;
  const std::string head(phr.instruction);

  // The numbered list's words for `units` uncommon words, in list order.
  const auto list_items = [&](int64_t units) {
    const int64_t cycles = units == 0 ? 1 : (units + num_uncommon - 1) / num_uncommon;
    const int64_t common_count = std::max(freq_cw, freq_ucw * cycles + (freq_cw - freq_ucw));
    std::vector<std::string_view> items;
    items.reserve(static_cast<size_t>(kNumCommon * common_count + units * freq_ucw));
    for (const auto c : common) items.insert(items.end(), static_cast<size_t>(common_count), c);
    for (int64_t j = 0; j < units; ++j) {
      items.insert(items.end(), static_cast<size_t>(freq_ucw), uncommon[static_cast<size_t>(j % num_uncommon)]);
    }
    DetRng shuffle_rng(mix64(shuffle_seed + static_cast<uint64_t>(units)));
    shuffle_rng.shuffle(items);
    return items;
  };
  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    const std::vector<std::string_view> items = list_items(units);
    RenderedContext context;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string index = std::to_string(i + 1);
      const std::pair<std::string_view, std::string_view> item_vars[] = {{"i", index}, {"word", items[i]}};
      KC_ASSIGN_OR_RETURN(const std::string item, format_template(phr.item, item_vars));
      if (i > 0) context.text.push_back(' ');
      context.text.append(item);
    }
    return assemble_prompt(head, std::move(context), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  if (ctx.split == Split::kTrain) {
    // The training completion lists the common words in the order of their first appearance in the
    // list — an order the model can read off the prompt (the answers' own order is a shuffle it cannot).
    std::vector<std::string> in_order;
    for (const std::string_view item : list_items(out.filled.units)) {
      if (std::find(common.begin(), common.end(), item) == common.end()) continue;
      if (std::find(in_order.begin(), in_order.end(), item) == in_order.end()) in_order.emplace_back(item);
    }
    out.completion = answer_list_completion(in_order);
  }
  const int64_t cycles = out.filled.units == 0 ? 1 : (out.filled.units + num_uncommon - 1) / num_uncommon;
  out.params["num_cw"] = kNumCommon;
  out.params["freq_cw"] = std::max(freq_cw, freq_ucw * cycles + (freq_cw - freq_ucw));
  out.params["freq_ucw"] = freq_ucw;
  out.params["uncommon_words"] = out.filled.units;
  return out;
}

}  // namespace kascade::eval
