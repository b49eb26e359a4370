// eval/task_niah.cpp — the needle-in-a-haystack family (RULER's niah_* configurations):
//   task             haystack        keys   values  keys placed  values/key  keys asked
//   niah_single_1    noise           words  numbers 1            1           1
//   niah_single_2    natural text    words  numbers 1            1           1
//   niah_single_3    natural text    words  uuids   1            1           1
//   niah_multikey_1  natural text    words  numbers 4            1           1
//   niah_multikey_2  needles         words  numbers 1            1           1
//   niah_multikey_3  needles         uuids  uuids   1            1           1
//   niah_multivalue  natural text    words  numbers 1            4           1
//   niah_multiquery  natural text    words  numbers 4            1           4
// "needles" haystacks are made of distractor needles (other keys), the filler unit being one
// needle; the others fill with words. Numbers have 7 digits as in RULER. Train split, several values
// of the asked key (niah_multivalue): the completion lists them in prompt order; and the adjective
// of the phrasing's {adj} is drawn per sample (niah_train_adjectives; params["adjective"] its index).
// Tested by tests/unit/eval/test_tasks.cpp.
#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_set>

#include "eval/task_generators.h"
#include "eval/templates.h"
#include "eval/vocab.h"

namespace kascade::eval {
namespace {

enum class Hay { kNoise, kNatural, kNeedles };
enum class Kind { kWords, kNumbers, kUuids };

struct NiahConfig {
  std::string_view name;
  Hay haystack;
  Kind key;
  Kind value;
  int keys;
  int values_per_key;
  int queries;
};

constexpr std::array kConfigs = {
    NiahConfig{"niah_single_1", Hay::kNoise, Kind::kWords, Kind::kNumbers, 1, 1, 1},
    NiahConfig{"niah_single_2", Hay::kNatural, Kind::kWords, Kind::kNumbers, 1, 1, 1},
    NiahConfig{"niah_single_3", Hay::kNatural, Kind::kWords, Kind::kUuids, 1, 1, 1},
    NiahConfig{"niah_multikey_1", Hay::kNatural, Kind::kWords, Kind::kNumbers, 4, 1, 1},
    NiahConfig{"niah_multikey_2", Hay::kNeedles, Kind::kWords, Kind::kNumbers, 1, 1, 1},
    NiahConfig{"niah_multikey_3", Hay::kNeedles, Kind::kUuids, Kind::kUuids, 1, 1, 1},
    NiahConfig{"niah_multivalue", Hay::kNatural, Kind::kWords, Kind::kNumbers, 1, 4, 1},
    NiahConfig{"niah_multiquery", Hay::kNatural, Kind::kWords, Kind::kNumbers, 4, 1, 4},
};

// Draws values of one kind, never repeating one already in `used` (nor occurring in `stream`).
std::string draw_unique(DetRng& rng, Kind kind, Split split, std::unordered_set<std::string>& used,
                        const WordStream* stream) {
  while (true) {
    std::string v = kind == Kind::kWords     ? random_word_key(rng, split)
                    : kind == Kind::kNumbers ? random_number(rng, 7)
                                             : random_uuid(rng);
    if (stream != nullptr && stream->source_contains(v)) continue;
    if (used.insert(v).second) return v;
  }
}

// Distractor needles, drawn on demand from their own stream so that the first n are the same
// whatever n the length search asks for.
class DistractorNeedles {
 public:
  DistractorNeedles(uint64_t seed, const NiahConfig& cfg, Split split, const NiahPhrasing& phr,
                    std::unordered_set<std::string> used, std::string_view types, std::string_view type,
                    std::string_view adj, std::string_view adj_capitalised)
      : rng_(seed), cfg_(cfg), split_(split), phr_(phr), used_(std::move(used)), types_(types), type_(type),
        adj_(adj), adj_capitalised_(adj_capitalised) {}

  Result<std::string_view> get(int64_t i) {
    while (static_cast<int64_t>(needles_.size()) <= i) {
      const std::string key = draw_unique(rng_, cfg_.key, split_, used_, nullptr);
      const std::string value = draw_unique(rng_, cfg_.value, split_, used_, nullptr);
      const std::pair<std::string_view, std::string_view> vars[] = {
          {"types", types_}, {"type", type_}, {"key", key}, {"value", value}, {"adj", adj_}, {"Adj", adj_capitalised_}};
      KC_ASSIGN_OR_RETURN(std::string text, format_template(phr_.needle, vars));
      needles_.push_back(std::move(text));
    }
    return std::string_view(needles_[static_cast<size_t>(i)]);
  }

 private:
  DetRng rng_;
  NiahConfig cfg_;
  Split split_;
  NiahPhrasing phr_;
  std::unordered_set<std::string> used_;
  std::string_view types_, type_, adj_, adj_capitalised_;
  std::vector<std::string> needles_;
};

}  // namespace

Result<TaskOutput> generate_niah(const TaskContext& ctx) {
  const NiahConfig* cfg = nullptr;
  for (const auto& c : kConfigs) {
    if (c.name == ctx.task) cfg = &c;
  }
  if (cfg == nullptr) return not_found("niah: no configuration for task '", ctx.task, "'");

  DetRng rng(ctx.rng_seed);
  const auto phrasings = niah_phrasings(ctx.split);
  TaskOutput out;
  out.template_id = static_cast<int>(rng.below(phrasings.size()));
  const NiahPhrasing& phr = phrasings[static_cast<size_t>(out.template_id)];
  const std::string_view types = cfg->value == Kind::kUuids ? "uuids" : "numbers";
  const std::string_view type = cfg->value == Kind::kUuids ? "uuid" : "number";
  // The train phrasings' {adj} (one per sample) and {Adj}, the same capitalised.
  const std::string_view adj =
      ctx.split == Split::kTrain ? draw_train_word(rng, niah_train_adjectives(), "adjective", out) : "";
  std::string adj_capitalised(adj);
  if (!adj_capitalised.empty()) adj_capitalised[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(adj_capitalised[0])));

  const WordStream* stream = nullptr;
  if (cfg->haystack != Hay::kNeedles) {
    stream = &WordStream::get(ctx.split, cfg->haystack == Hay::kNoise ? HaystackKind::kNoise : HaystackKind::kNatural);
  }
  const int64_t start = stream != nullptr ? stream->random_sentence_start(rng) : 0;

  // Keys, values, needles. Key 0 (and its values) is always asked about.
  std::unordered_set<std::string> used;
  std::vector<std::string> keys;
  std::vector<Insertion> needles;
  std::vector<std::string> query_keys;
  for (int k = 0; k < cfg->keys; ++k) {
    keys.push_back(draw_unique(rng, cfg->key, ctx.split, used, stream));
    const bool queried = k < cfg->queries;
    if (queried) query_keys.push_back(keys.back());
    for (int v = 0; v < cfg->values_per_key; ++v) {
      const std::string value = draw_unique(rng, cfg->value, ctx.split, used, stream);
      const std::pair<std::string_view, std::string_view> vars[] = {{"types", types}, {"type", type},
                                                                    {"key", keys.back()}, {"value", value},
                                                                    {"adj", adj}, {"Adj", adj_capitalised}};
      KC_ASSIGN_OR_RETURN(std::string text, format_template(phr.needle, vars));
      const bool first = needles.empty();
      needles.push_back(Insertion{std::move(text), draw_depth(rng, first ? ctx.depth : std::nullopt), queried});
      if (queried) out.answers.push_back(value);
    }
  }

  const std::string query = join_query_list(query_keys);
  const std::pair<std::string_view, std::string_view> head_vars[] = {
      {"types", types}, {"type", type}, {"adj", adj}, {"Adj", adj_capitalised}};
  KC_ASSIGN_OR_RETURN(const std::string head, format_template(phr.instruction, head_vars));
  const std::pair<std::string_view, std::string_view> tail_vars[] = {
      {"types", types}, {"type", type}, {"query", query}, {"adj", adj}, {"Adj", adj_capitalised}};
  KC_ASSIGN_OR_RETURN(std::string tail, format_template(phr.question, tail_vars));
  KC_ASSIGN_OR_RETURN(out.answer_prefix, format_template(phr.answer_prefix, tail_vars));
  tail += out.answer_prefix;

  DistractorNeedles distractors(mix64(ctx.rng_seed ^ 0x6469737472616374ULL), *cfg, ctx.split, phr, used, types, type,
                                adj, adj_capitalised);
  PromptBuilder build = [&](int64_t units) -> Result<BuiltPrompt> {
    if (stream != nullptr) return assemble_prompt(head, render_context(word_pieces(*stream, start), units, needles), tail);
    // Materialise the distractors first: the piece callback cannot fail.
    std::vector<std::string_view> items;
    items.reserve(static_cast<size_t>(units));
    for (int64_t i = 0; i < units; ++i) {
      KC_ASSIGN_OR_RETURN(const std::string_view d, distractors.get(i));
      items.push_back(d);
    }
    const PieceSource source = item_pieces([&items](int64_t i) { return items[static_cast<size_t>(i)]; }, " ");
    return assemble_prompt(head, render_context(source, units, needles), tail);
  };
  KC_ASSIGN_OR_RETURN(out.filled, fill_to_budget(build, *ctx.count_tokens, ctx.budget, max_units_for(ctx.budget), ctx.task));
  if (ctx.split == Split::kTrain && cfg->values_per_key > 1) {
    // Several values of one key: the training completion lists them in prompt order, which the model
    // can read off the text (the answers' own order is the drawing order, which it cannot). The
    // queried placements are in insertion order, the same order as the answers.
    std::vector<std::pair<int64_t, size_t>> at;  // (char offset, answer index)
    for (const NeedlePlacement& n : out.filled.built.needles) {
      if (n.queried) at.emplace_back(n.char_offset, at.size());
    }
    if (at.size() != out.answers.size()) {
      return internal_error("niah: ", at.size(), " queried needles placed for ", out.answers.size(), " answers");
    }
    std::sort(at.begin(), at.end());
    std::vector<std::string> in_order;
    for (const auto& [offset, answer] : at) in_order.push_back(out.answers[answer]);
    out.completion = answer_list_completion(in_order);
  }
  out.params["num_keys"] = cfg->keys;
  out.params["values_per_key"] = cfg->values_per_key;
  out.params["num_queries"] = cfg->queries;
  out.params["haystack_start_word"] = start;
  return out;
}

}  // namespace kascade::eval
