// eval/task_kv.cpp — key-value retrieval (InfiniteBench kv_retrieval / "lost in the middle"): a
// JSON object of UUID -> UUID pairs, one of which is asked for. The queried pair sits at the
// requested (or a uniform random) depth among the pairs; the filler unit is one distractor pair.
// Tested by tests/unit/eval/test_tasks.cpp (parses the JSON of the prompt).
#include <unordered_set>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {

Result<TaskOutput> generate_kv(const TaskContext& ctx) {
  DetRng rng(ctx.rng_seed);
  const auto phrasings = kv_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const KvPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];

  std::unordered_set<std::string> used;
  const std::string key = random_uuid(rng);
  std::string value;
  do {
    value = random_uuid(rng);
  } while (value == key);
  used.insert(key);
  used.insert(value);
  const std::vector<Insertion> query_pair = {
      Insertion{"\"" + key + "\": \"" + value + "\"", draw_depth(rng, ctx.depth), true}};
  out.answers.push_back(value);

  // Distractor pairs, drawn on demand from their own stream.
  DetRng pair_rng(mix64(ctx.rng_seed ^ 0x6b7670616972ULL));
  std::vector<std::string> pairs;
  auto pair_at = [&](int64_t i) -> std::string_view {
    while (static_cast<int64_t>(pairs.size()) <= i) {
      std::string k, v;
      do {
        k = random_uuid(pair_rng);
      } while (!used.insert(k).second);
      do {
        v = random_uuid(pair_rng);
      } while (!used.insert(v).second);
      pairs.push_back("\"" + k + "\": \"" + v + "\"");
    }
    return pairs[static_cast<size_t>(i)];
  };

  const std::pair<std::string_view, std::string_view> vars[] = {{"key", key}};
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, vars));
  tail += out.answer_prefix;
  const std::string head(phr.instruction);

  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    RenderedContext body = render_context(item_pieces(pair_at, ", "), units, query_pair);
    body.text = "{" + body.text + "}";
    for (auto& n : body.needles) n.char_offset += 1;
    return assemble_prompt(head, std::move(body), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  out.params["num_pairs"] = out.filled.units + 1;
  return out;
}

}  // namespace kascade::eval
