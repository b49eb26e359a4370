// eval/task_multihop.cpp — 2-hop questions over synthetic facts in natural text: kNumChains
// chains country -> city -> person ("The capital of Zorvia is Melkat." "The mayor of Melkat is
// Tirona Vask."), the 2 * kNumChains fact sentences at uniform random depths (chain 0's first
// fact at the requested depth if any); the question asks for the end of chain 0 through its
// start ("Who is the mayor of the capital of Zorvia?"), the other chains are distractors.
// Names are synthetic and checked absent from the haystack text. Scored with string_match_part.
// Train split only: the completion spells out the hop ("Melkat. The mayor of Melkat is Tirona
// Vask.": the intermediate city, then the second fact restated), so that each generated step is a
// single lookup a small model can learn; the scorer still looks for the person's name alone, and
// eval / dev completions stay the bare answer. Train phrasings name the relations with {place} and
// {role}, composed per sample from fact_train_relation_words() (params place_modifier, place_noun,
// role_modifier, role_noun: the indices drawn; each word from the curated list or, half the time, the
// train split's open vocabulary).
// Tested by tests/unit/eval/test_tasks.cpp (parses the facts and follows the chain).
#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {
constexpr int kNumChains = 4;
}  // namespace

Result<TaskOutput> generate_multihop(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = fact_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const FactPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];
  std::string place, role;  // the train phrasings' {place} and {role}, one of each per sample
  if (ctx.split == Split::kTrain) {
    const FactRelationWords& w = fact_train_relation_words();
    const std::string_view place_modifier = draw_relation_word(rng, w.place_modifiers, "place_modifier", out);
    place = compose_relation(place_modifier, draw_relation_word(rng, w.place_nouns, "place_noun", out));
    const std::string_view role_modifier = draw_relation_word(rng, w.role_modifiers, "role_modifier", out);
    role = compose_relation(role_modifier, draw_relation_word(rng, w.role_nouns, "role_noun", out));
  }
  const WordStream& stream = WordStream::get(ctx.split, HaystackKind::kNatural);
  const int64_t start = stream.random_sentence_start(rng);

  DistinctNames names(ctx.split, stream);
  auto draw_name = [&](NameKind kind) { return names.draw(rng, kind); };
  std::vector<Insertion> facts;
  std::string query_country;
  for (int c = 0; c < kNumChains; ++c) {
    const std::string country = draw_name(NameKind::kCountry);
    const std::string city = draw_name(NameKind::kCity);
    const std::string person = draw_name(NameKind::kPerson);
    const std::pair<std::string_view, std::string_view> vars[] = {
        {"country", country}, {"city", city}, {"person", person}, {"place", place}, {"role", role}};
    KC_ASSIGN_OR_RETURN(std::string first, format_template(phr.first_fact, vars));
    KC_ASSIGN_OR_RETURN(std::string second, format_template(phr.second_fact, vars));
    if (c == 0 && ctx.split == Split::kTrain) out.completion = " " + city + ". " + second;
    facts.push_back(Insertion{std::move(first), draw_depth(rng, c == 0 ? ctx.depth : std::nullopt), c == 0});
    facts.push_back(Insertion{std::move(second), rng.unit(), c == 0});
    if (c == 0) {
      query_country = country;
      out.answers.push_back(person);
    }
  }

  const std::pair<std::string_view, std::string_view> vars[] = {
      {"country", query_country}, {"place", place}, {"role", role}};
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, vars));
  tail += out.answer_prefix;
  const std::string head(phr.instruction);

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    return assemble_prompt(head, render_context(word_pieces(stream, start), units, facts), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["num_chains"] = kNumChains;
  out.params["num_hops"] = 2;
  out.params["haystack_start_word"] = start;
  return out;
}

}  // namespace kascade::eval
