// eval/task_vt.cpp — variable tracking (RULER's vt) and its train-only drill vt_lookup: `num_chains`
// chains of `num_hops` hops in the noise haystack. Chain c: "VAR X0 = 12345." then "VAR Xj = VAR X(j-1)."
// for j = 1..hops, in order at increasing depths; chain 0 is asked about ("Find all variables that are
// assigned the value 12345"), the others are distractors with other values. Values have 5 digits (RULER).
// Train statement styles with a {kw}, {op} or {uop} placeholder draw it per sample from vt_train_keywords() /
// vt_train_operators() / vt_train_word_operators() (params keyword / operator / word_operator: the indices drawn).
// vt — eval and dev: 2 chains of 4 hops (RULER's setting). Train: 4 hops for half the samples, 1–3 uniform
// for the rest — the short chains teach the backward lookup (find the source, copy the name assigned from
// it) that the long ones repeat, a curriculum inside every stage; the full length is the common case
// because chunks trained on 1–4 uniform (a quarter at 4 hops) stopped after 1–3 of the 5 names in
// the dev wording (docs/model.md, c8).
// vt_lookup (train only) — the first lookup alone: 3–8 chains, 0 hops in half the samples (the answer is
// the one variable assigned the asked value) and 1 in the rest (that variable and the one assigned from
// it). On c24 and c27 even the value's own variable of a vt chain was named at chance (docs/model.md, c27).
// Tested by tests/unit/eval/test_tasks.cpp (re-parses the prompt and follows the chains).
#include <algorithm>
#include <unordered_set>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {
constexpr int kNumChains = 2;
constexpr int kNumHops = 4;
constexpr int kLookupMinChains = 3, kLookupMaxChains = 8;

// Train split: kNumHops with probability 1/2, else 1 .. kNumHops - 1 uniform.
int draw_train_hops(DetRng& rng) {
  return rng.below(2) == 0 ? kNumHops : 1 + static_cast<int>(rng.below(kNumHops - 1));
}

struct ChainShape {
  int num_chains;
  int num_hops;
};
using ShapeDraw = ChainShape (*)(DetRng& rng, Split split);

ChainShape vt_shape(DetRng& rng, Split split) {
  // Drawn for the train split only, so the eval and dev samples stay what they were.
  return {kNumChains, split == Split::kTrain ? draw_train_hops(rng) : kNumHops};
}

ChainShape vt_lookup_shape(DetRng& rng, Split /*split: train only*/) {
  const int chains = kLookupMinChains + static_cast<int>(rng.below(kLookupMaxChains - kLookupMinChains + 1));
  return {chains, static_cast<int>(rng.below(2))};
}

Result<TaskOutput> generate_chains(const TaskContext& ctx, ShapeDraw draw_shape) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = vt_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const VtPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];
  const WordStream& stream = WordStream::get(ctx.split, HaystackKind::kNoise);
  const int64_t start = stream.random_sentence_start(rng);
  const auto [num_chains, num_hops] = draw_shape(rng, ctx.split);
  // The {kw}, {op} and {uop} of the train statement styles that have them, one of each per sample.
  const bool train = ctx.split == Split::kTrain;
  const std::string_view keyword = train ? draw_train_word(rng, vt_train_keywords(), "keyword", out) : "";
  const std::string_view op = train ? draw_train_word(rng, vt_train_operators(), "operator", out) : "";
  const std::string_view uop = train ? draw_train_word(rng, vt_train_word_operators(), "word_operator", out) : "";

  std::unordered_set<std::string> used;
  std::vector<Insertion> statements;
  std::string query_value;
  for (int c = 0; c < num_chains; ++c) {
    std::string value;
    do {
      value = random_number(rng, 5);
    } while (!used.insert(value).second);
    std::vector<std::string> names;
    for (int j = 0; j <= num_hops; ++j) {
      std::string name;
      do {
        name = random_variable_name(rng, ctx.split);
      } while (stream.source_contains(name) || !used.insert(name).second);
      names.push_back(std::move(name));
    }
    // Depths: sorted uniform draws; chain 0's first statement at the requested depth if any,
    // its later statements spread over the rest of the context.
    std::vector<double> depths;
    for (int j = 0; j <= num_hops; ++j) depths.push_back(rng.unit());
    if (c == 0 && ctx.depth.has_value()) {
      for (double& d : depths) d = *ctx.depth + d * (1.0 - *ctx.depth);
      depths[0] = *ctx.depth;
    }
    std::sort(depths.begin(), depths.end());
    for (int j = 0; j <= num_hops; ++j) {
      std::string text;
      if (j == 0) {
        const std::pair<std::string_view, std::string_view> vars[] = {
            {"var", names[0]}, {"value", value}, {"kw", keyword}, {"op", op}, {"uop", uop}};
        KC_ASSIGN_OR_RETURN(text, format_template(phr.assign_value, vars));
      } else {
        const std::pair<std::string_view, std::string_view> vars[] = {{"var", names[static_cast<size_t>(j)]},
                                                                       {"src", names[static_cast<size_t>(j - 1)]},
                                                                       {"kw", keyword}, {"op", op}, {"uop", uop}};
        KC_ASSIGN_OR_RETURN(text, format_template(phr.assign_var, vars));
      }
      statements.push_back(Insertion{std::move(text), depths[static_cast<size_t>(j)], c == 0});
    }
    if (c == 0) {
      query_value = value;
      out.answers = names;
    }
  }

  const std::string num = std::to_string(num_hops + 1);
  const std::pair<std::string_view, std::string_view> vars[] = {{"query", query_value}, {"num", num}};
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, vars));
  tail += out.answer_prefix;
  const std::string head(phr.instruction);

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    return assemble_prompt(head, render_context(word_pieces(stream, start), units, statements), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["num_chains"] = num_chains;
  out.params["num_hops"] = num_hops;
  out.params["haystack_start_word"] = start;
  return out;
}
}  // namespace

Result<TaskOutput> generate_vt(const TaskContext& ctx) { return generate_chains(ctx, vt_shape); }

Result<TaskOutput> generate_vt_lookup(const TaskContext& ctx) {
  KC_ASSIGN_OR_RETURN(TaskOutput out, generate_chains(ctx, vt_lookup_shape));
  out.params["natural"] = 0;  // the noise haystack (the train-only tasks record which they drew)
  return out;
}

}  // namespace kascade::eval
