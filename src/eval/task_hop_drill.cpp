// eval/task_hop_drill.cpp — hop_drill, a train-only task of the copy curriculum (docs/model.md): a two-hop
// lookup in a short haystack (the train split's natural text or noise sentences, drawn per sample). Facts
// relate invented persons (the multihop_qa names), one fact pattern per sample: the asked chain
// "the x of A is B", "the y of B is C"; 0–2 distractor chains with the same two relations; and, each in half
// the samples, the lures a one-hop shortcut would pick: the y of A (the second relation asked of A directly)
// and the x of B (the first relation applied twice). The question asks for the y of the x of A; the answer
// is C, and the completion restates both hops in the prompt's own wording (" The x of A is B. The y of B is
// C."), so each generated step is one lookup and one exact copy of a two-word name. The relations are
// composed per sample from hop_train_relation_words() (params x_modifier, x_noun, y_modifier, y_noun: the
// indices drawn; neither relation contains the other). Other params: num_chains, lure_one_hop,
// lure_double_x, natural (0 noise, 1 natural text), haystack_start_word.
// Tested by tests/unit/eval/test_tasks.cpp (parses the facts and follows the two hops).
#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {
constexpr int kMaxDistractorChains = 2;
}  // namespace

Result<TaskOutput> generate_hop_drill(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = hop_train_phrasings();
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const HopPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];
  const HopRelationWords& words = hop_train_relation_words();
  auto draw_relation = [&](const char* modifier_param, const char* noun_param) {
    const std::string_view modifier = draw_relation_word(rng, words.modifiers, modifier_param, out);
    return compose_relation(modifier, draw_relation_word(rng, words.nouns, noun_param, out));
  };
  const std::string x = draw_relation("x_modifier", "x_noun");
  std::string y;
  do {
    y = draw_relation("y_modifier", "y_noun");
  } while (y.find(x) != std::string::npos || x.find(y) != std::string::npos);
  const auto [haystack, start] = draw_haystack(rng, ctx.split, out);
  const WordStream& stream = *haystack;

  DistinctNames names(ctx.split, stream);
  auto fact = [&](const std::string& rel, const std::string& subject, const std::string& object) {
    const std::pair<std::string_view, std::string_view> vars[] = {{"rel", rel}, {"subject", subject}, {"object", object}};
    return format_template(phr.fact, vars);
  };
  std::vector<Insertion> facts;
  auto add = [&](const std::string& rel, const std::string& subject, const std::string& object, double depth,
                 bool queried) -> Status {
    KC_ASSIGN_OR_RETURN(std::string text, fact(rel, subject, object));
    facts.push_back(Insertion{std::move(text), depth, queried});
    return ok_status();
  };
  const std::string a = names.draw(rng, NameKind::kPerson);
  const std::string b = names.draw(rng, NameKind::kPerson);
  const std::string c = names.draw(rng, NameKind::kPerson);
  KC_RETURN_IF_ERROR(add(x, a, b, draw_depth(rng, ctx.depth), true));
  KC_RETURN_IF_ERROR(add(y, b, c, rng.unit(), true));
  const bool lure_one_hop = rng.below(2) == 1, lure_double_x = rng.below(2) == 1;
  if (lure_one_hop) KC_RETURN_IF_ERROR(add(y, a, names.draw(rng, NameKind::kPerson), rng.unit(), false));
  if (lure_double_x) KC_RETURN_IF_ERROR(add(x, b, names.draw(rng, NameKind::kPerson), rng.unit(), false));
  const int distractors = static_cast<int>(rng.below(kMaxDistractorChains + 1));
  for (int d = 0; d < distractors; ++d) {
    const std::string a2 = names.draw(rng, NameKind::kPerson);
    const std::string b2 = names.draw(rng, NameKind::kPerson);
    KC_RETURN_IF_ERROR(add(x, a2, b2, rng.unit(), false));
    KC_RETURN_IF_ERROR(add(y, b2, names.draw(rng, NameKind::kPerson), rng.unit(), false));
  }
  out.answers.push_back(c);
  out.completion = " " + facts[0].text + " " + facts[1].text;

  const std::pair<std::string_view, std::string_view> vars[] = {{"subject", a}, {"x", x}, {"y", y}};
  KC_ASSIGN_OR_RETURN(const std::string head, format_template(phr.instruction, vars));
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, vars));
  tail += out.answer_prefix;

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    return assemble_prompt(head, render_context(word_pieces(stream, start), units, facts), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["num_chains"] = 1 + distractors;
  out.params["lure_one_hop"] = lure_one_hop ? 1 : 0;
  out.params["lure_double_x"] = lure_double_x ? 1 : 0;
  return out;
}

}  // namespace kascade::eval
