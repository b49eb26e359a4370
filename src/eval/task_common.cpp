// eval/task_common.cpp — helpers shared by the task generators (see task_generators.h).
// Tested through tests/unit/eval/test_tasks.cpp.
#include "eval/task_generators.h"

namespace kascade::eval {

BuiltPrompt assemble_prompt(std::string_view head, RenderedContext context, std::string_view tail) {
  BuiltPrompt out;
  out.prompt.reserve(head.size() + context.text.size() + tail.size() + 2);
  out.prompt.append(head);
  out.prompt.push_back('\n');
  const int64_t shift = static_cast<int64_t>(out.prompt.size());
  out.prompt.append(context.text);
  out.prompt.push_back('\n');
  out.prompt.append(tail);
  out.needles = std::move(context.needles);
  for (auto& n : out.needles) n.char_offset += shift;
  return out;
}

std::string join_query_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += (i + 1 == items.size()) ? ", and " : ", ";
    out += items[i];
  }
  return out;
}

std::string answer_list_completion(const std::vector<std::string>& answers) {
  std::string out = " ";
  for (size_t i = 0; i < answers.size(); ++i) out += (i > 0 ? ", " : "") + answers[i];
  return out + ".";
}

double draw_depth(DetRng& rng, const std::optional<double>& requested) {
  const double u = rng.unit();  // always drawn, so later draws do not depend on `requested`
  return requested.has_value() ? *requested : u;
}

std::string_view draw_train_word(DetRng& rng, std::span<const std::string_view> words, const char* param,
                                 TaskOutput& out) {
  const uint64_t i = rng.below(words.size());
  out.params[param] = static_cast<int64_t>(i);
  return words[i];
}

std::string_view draw_relation_word(DetRng& rng, const RelationWordList& list, const char* param, TaskOutput& out) {
  const bool open = list.words.size() > list.curated && rng.below(2) == 1;
  const uint64_t i = open ? list.curated + rng.below(list.words.size() - list.curated) : rng.below(list.curated);
  out.params[param] = static_cast<int64_t>(i);
  return list.words[i];
}

DrawnHaystack draw_haystack(DetRng& rng, Split split, TaskOutput& out) {
  const bool natural = rng.below(2) == 1;
  const WordStream& stream = WordStream::get(split, natural ? HaystackKind::kNatural : HaystackKind::kNoise);
  const int64_t start = stream.random_sentence_start(rng);
  out.params["natural"] = natural ? 1 : 0;
  out.params["haystack_start_word"] = start;
  return {&stream, start};
}

std::string DistinctNames::draw(DetRng& rng, NameKind kind) {
  while (true) {
    std::string name = random_place_or_person(rng, split_, kind);
    if (stream_->source_contains(name)) continue;
    bool clash = false;
    for (const auto& u : used_) {
      if (u.find(name) != std::string::npos || name.find(u) != std::string::npos) clash = true;
    }
    if (!clash && used_.insert(name).second) return name;
  }
}

}  // namespace kascade::eval
