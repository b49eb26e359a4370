// eval/task_copy_strings.cpp — copy_strings, a train-only task of the copy curriculum (docs/model.md): 1–4
// labelled random strings of about 20–36 tokens each at random depths of a short haystack (the train split's
// natural text or its noise sentences, drawn per sample); the question names 1 to all of the labels in a random
// order, and the answer is their strings in that order (completion " s1, s2."), so every answer is an exact copy
// of a long, rare string. Each string is one of five kinds, drawn per string: a UUID, 20–36 digits, 20–36 hex
// digits, 2–3 invented person names (the multihop_qa names), or 4–6 vt variable names. Labels are train word
// keys ("quiet-harbor"); no label or string occurs in the haystack's source. The queried depth (if any) places
// the first record drawn (always asked). Where the records alone outgrow the budget, the last drawn are dropped
// (see below). params: num_strings, num_asked (placed and asked after that), natural (0 noise, 1 natural text),
// thing (index into copy_train_things()), asked_kind_<j> (the StringKind of answer j: 0 UUID, 1 digits, 2 hex,
// 3 names, 4 variable names), haystack_start_word.
// Tested by tests/unit/eval/test_tasks.cpp (re-reads each asked label's record from the prompt).
#include <unordered_set>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {

constexpr int kMaxStrings = 4;
enum StringKind { kUuid = 0, kDigits, kHex, kNames, kVariableNames, kNumKinds };

// One string of `kind`, not in `used` nor in the haystack's source (names: through `names`).
std::string draw_string(DetRng& rng, StringKind kind, DistinctNames& names, const WordStream& stream,
                        std::unordered_set<std::string>& used) {
  while (true) {
    std::string s;
    switch (kind) {
      case kUuid: s = random_uuid(rng); break;
      case kDigits: s = random_number(rng, static_cast<int>(rng.range(20, 36))); break;
      case kHex: s = random_hex(rng, static_cast<int>(rng.range(20, 36))); break;
      case kNames:
      case kVariableNames: {
        const int64_t count = kind == kNames ? rng.range(2, 3) : rng.range(4, 6);
        for (int64_t i = 0; i < count; ++i) {
          s += i > 0 ? " " : "";
          s += kind == kNames ? names.draw(rng, NameKind::kPerson) : random_variable_name(rng, Split::kTrain);
        }
        break;
      }
      case kNumKinds: break;
    }
    if (!stream.source_contains(s) && used.insert(s).second) return s;
  }
}

}  // namespace

Result<TaskOutput> generate_copy_strings(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = copy_train_phrasings();
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const CopyPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];
  const std::string thing(draw_train_word(rng, copy_train_things(), "thing", out));
  const std::string things = thing + "s";
  const auto [haystack, start] = draw_haystack(rng, ctx.split, out);
  const WordStream& stream = *haystack;
  const int num_strings = 1 + static_cast<int>(rng.below(kMaxStrings));
  const int num_asked = 1 + static_cast<int>(rng.below(static_cast<uint64_t>(num_strings)));

  // Records 0 .. num_asked - 1 are asked (every record is random, so which ones does not matter).
  std::unordered_set<std::string> used;
  DistinctNames names(ctx.split, stream);
  std::vector<Insertion> records;
  std::vector<std::string> labels, values;
  std::vector<StringKind> kinds;
  for (int i = 0; i < num_strings; ++i) {
    std::string label;
    do {
      label = random_word_key(rng, ctx.split);
    } while (stream.source_contains(label) || !used.insert(label).second);
    const auto kind = static_cast<StringKind>(rng.below(kNumKinds));
    std::string value = draw_string(rng, kind, names, stream, used);
    const std::pair<std::string_view, std::string_view> vars[] = {{"thing", thing}, {"label", label}, {"value", value}};
    KC_ASSIGN_OR_RETURN(std::string text, format_template(phr.record, vars));
    records.push_back(Insertion{std::move(text), draw_depth(rng, i == 0 ? ctx.depth : std::nullopt), i < num_asked});
    labels.push_back(std::move(label));
    values.push_back(std::move(value));
    kinds.push_back(kind);
  }
  // The question's order: a random permutation of the asked records.
  std::vector<size_t> order;
  for (int j = 0; j < num_asked; ++j) order.push_back(static_cast<size_t>(j));
  rng.shuffle(order);

  const std::pair<std::string_view, std::string_view> head_vars[] = {{"thing", thing}, {"things", things}};
  KC_ASSIGN_OR_RETURN(const std::string head, format_template(phr.instruction, head_vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, head_vars));
  // The question over the first `kept` records: their asked ones, in the question's order.
  auto question_over = [&](size_t n) -> Result<std::string> {
    std::vector<std::string> query_labels;
    for (const size_t r : order) {
      if (r < n) query_labels.push_back(labels[r]);
    }
    const std::string query = join_query_list(query_labels);
    const std::pair<std::string_view, std::string_view> vars[] = {{"thing", thing}, {"things", things}, {"query", query}};
    KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
    return tail + out.answer_prefix;
  };
  // Four long strings under long labels can outgrow a 512-token budget on their own: records are dropped from
  // the last drawn (the unasked ones first) until the prompt without filler fits; one is always kept, and if
  // that does not fit either, fill_to_budget says so.
  size_t kept = records.size();
  std::string tail;
  while (true) {
    KC_ASSIGN_OR_RETURN(tail, question_over(kept));
    const std::span<const Insertion> placed(records.data(), kept);
    const BuiltPrompt bare = assemble_prompt(head, render_context(word_pieces(stream, start), 0, placed), tail);
    const int64_t tokens = (*ctx.count_tokens)(bare.prompt);
    if (kept == 1 || (tokens >= 0 && tokens <= ctx.budget)) break;
    --kept;
  }
  records.resize(kept);
  for (const size_t r : order) {
    if (r >= kept) continue;
    out.params["asked_kind_" + std::to_string(out.answers.size())] = kinds[r];
    out.answers.push_back(values[r]);
  }

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    return assemble_prompt(head, render_context(word_pieces(stream, start), units, records), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["num_strings"] = static_cast<int64_t>(kept);
  out.params["num_asked"] = static_cast<int64_t>(out.answers.size());
  return out;
}

}  // namespace kascade::eval
