// eval/tasks.cpp — the task catalog (the evaluation suite and the train-only tasks), splits and seeds,
// list parsing, and generate_sample(), which validates a request (a train-only task: the train split
// only), derives the sample's seed and dispatches to the task's generator (task_*.cpp). See
// kascade/tasks.h for the suite.
// Tested by tests/unit/eval/test_tasks.cpp and test_splits.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "eval/rng.h"
#include "eval/task_generators.h"
#include "kascade/tasks.h"

namespace kascade::eval {
namespace {

using Generator = Result<TaskOutput> (*)(const TaskContext&);

struct CatalogEntry {
  TaskInfo info;
  Generator generate;
};

const std::vector<CatalogEntry>& catalog_entries() {
  using enum ScorerKind;
  static const std::vector<CatalogEntry> entries = {
      {{"niah_single_1", "retrieval", kStringMatchAll, 128, "one needle (word key, number) in noise sentences"}, generate_niah},
      {{"niah_single_2", "retrieval", kStringMatchAll, 128, "one needle (word key, number) in natural text"}, generate_niah},
      {{"niah_single_3", "retrieval", kStringMatchAll, 128, "one needle (word key, UUID) in natural text"}, generate_niah},
      {{"niah_multikey_1", "retrieval", kStringMatchAll, 128, "one needle among 3 distractor needles, natural text"}, generate_niah},
      {{"niah_multikey_2", "retrieval", kStringMatchAll, 128, "one needle in a haystack of distractor needles"}, generate_niah},
      {{"niah_multikey_3", "retrieval", kStringMatchAll, 128, "UUID key and value in a haystack of UUID needles"}, generate_niah},
      {{"niah_multivalue", "retrieval", kStringMatchAll, 128, "one key with 4 values, all asked for"}, generate_niah},
      {{"niah_multiquery", "retrieval", kStringMatchAll, 128, "4 needles, all 4 keys asked for"}, generate_niah},
      {{"vt", "multi-hop", kStringMatchAll, 30, "variable tracking: 2 chains of 4 hops in noise"}, generate_vt},
      {{"cwe", "aggregation", kStringMatchAll, 120, "the 10 most common words of a numbered list"}, generate_cwe},
      {{"fwe", "aggregation", kStringMatchAll, 50, "the 3 most frequent coded words (Zipf, alpha 2)"}, generate_fwe},
      {{"kv_retrieval", "retrieval", kStringMatchAll, 64, "the value of one key of a JSON object of UUIDs"}, generate_kv},
      {{"multihop_qa", "multi-hop", kStringMatchPart, 32, "2-hop question over synthetic facts in natural text"}, generate_multihop},
      // Train-only (the copy curriculum): 160 tokens hold 4 answers of up to ~37 tokens with their separators.
      {{"copy_strings", "copy", kStringMatchAll, 160, "1-4 labelled random strings to copy in the order asked", true},
       generate_copy_strings},
      {{"hop_drill", "copy", kStringMatchAll, 64, "short two-hop lookup over invented persons, answer a copied name",
        true},
       generate_hop_drill},
      {{"vt_lookup", "copy", kStringMatchAll, 30, "vt's first lookup: 3-8 chains of 0-1 hops, the asked value's variables",
        true},
       generate_vt_lookup},
  };
  return entries;
}

const CatalogEntry* find_entry(std::string_view name) {
  for (const auto& e : catalog_entries()) {
    if (e.info.name == name) return &e;
  }
  return nullptr;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_commas(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    const size_t comma = list.find(',', i);
    out.push_back(trim(list.substr(i, comma == std::string_view::npos ? std::string_view::npos : comma - i)));
    if (comma == std::string_view::npos) break;
    i = comma + 1;
  }
  return out;
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kDev: return "dev";
    case Split::kEval: return "eval";
  }
  return "?";
}

Result<Split> parse_split(std::string_view name) {
  if (name == "train") return Split::kTrain;
  if (name == "dev") return Split::kDev;
  if (name == "eval") return Split::kEval;
  return invalid_argument("unknown split '", name, "'; expected train, dev or eval");
}

SeedRange split_seed_range(Split split) {
  switch (split) {
    case Split::kEval: return {0, kMaxUserSeed};
    case Split::kDev: return {kMaxUserSeed, 2 * kMaxUserSeed};
    case Split::kTrain: return {2 * kMaxUserSeed, 3 * kMaxUserSeed};
  }
  return {0, 0};
}

Result<uint64_t> effective_seed(Split split, uint64_t user_seed) {
  KC_CHECK_ARG(user_seed < kMaxUserSeed, "seed ", user_seed, " is out of range; seeds are below 2^40 (",
               kMaxUserSeed, ")");
  return split_seed_range(split).begin + user_seed;
}

const char* scorer_name(ScorerKind kind) {
  return kind == ScorerKind::kStringMatchPart ? "string_match_part" : "string_match_all";
}

namespace {
std::vector<TaskInfo> infos_where(bool train_only) {
  std::vector<TaskInfo> v;
  for (const auto& e : catalog_entries()) {
    if (e.info.train_only == train_only) v.push_back(e.info);
  }
  return v;
}

std::string names_of(const std::vector<TaskInfo>& infos) {
  std::string out;
  for (const auto& t : infos) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}
}  // namespace

const std::vector<TaskInfo>& task_catalog() {
  static const std::vector<TaskInfo> infos = infos_where(false);
  return infos;
}

const std::vector<TaskInfo>& train_only_task_catalog() {
  static const std::vector<TaskInfo> infos = infos_where(true);
  return infos;
}

Result<TaskInfo> find_task(std::string_view name) {
  const CatalogEntry* e = find_entry(name);
  if (e == nullptr) {
    return not_found("unknown task '", name, "'; known tasks: ", names_of(task_catalog()),
                     "; train-only tasks: ", names_of(train_only_task_catalog()));
  }
  return e->info;
}

Result<std::vector<std::string>> parse_task_list(std::string_view list) {
  std::vector<std::string> out;
  for (const std::string& item : split_commas(list)) {
    KC_CHECK_ARG(!item.empty(), "task list \"", list, "\" has an empty entry");
    std::vector<std::string> names;
    if (item == "all" || item == "retrieval" || item == "multi-hop" || item == "aggregation") {
      for (const auto& t : task_catalog()) {
        if (item == "all" || t.category == item) names.emplace_back(t.name);
      }
    } else {
      KC_ASSIGN_OR_RETURN(const TaskInfo info, find_task(item));
      names.emplace_back(info.name);
    }
    for (auto& n : names) {
      KC_CHECK_ARG(std::find(out.begin(), out.end(), n) == out.end(), "task list \"", list, "\" names '", n,
                   "' twice");
      out.push_back(std::move(n));
    }
  }
  return out;
}

Result<std::vector<int64_t>> parse_lengths(std::string_view list) {
  std::vector<int64_t> out;
  for (const std::string& item : split_commas(list)) {
    KC_CHECK_ARG(!item.empty(), "length list \"", list, "\" has an empty entry");
    size_t digits = 0;
    while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits]))) ++digits;
    const std::string suffix = item.substr(digits);
    int64_t scale = 1;
    if (suffix == "k" || suffix == "K") scale = 1024;
    else if (suffix == "m" || suffix == "M") scale = 1024 * 1024;
    else if (!suffix.empty()) return invalid_argument("length \"", item, "\": expected a number with an optional k or m suffix");
    KC_CHECK_ARG(digits > 0 && digits <= 9, "length \"", item, "\": expected a number with an optional k or m suffix");
    const int64_t value = std::stoll(item.substr(0, digits)) * scale;
    KC_CHECK_ARG(value > 0, "length \"", item, "\" must be positive");
    KC_CHECK_ARG(std::find(out.begin(), out.end(), value) == out.end(), "length list \"", list, "\" names ", value,
                 " twice");
    out.push_back(value);
  }
  return out;
}

int64_t count_whitespace_tokens(std::string_view text) {
  int64_t n = 0;
  bool in_token = false;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_token) ++n;
    in_token = !space;
  }
  return n;
}

Result<Sample> generate_sample(const SampleRequest& request, const TokenCounter& count_tokens) {
  const CatalogEntry* entry = find_entry(request.task);
  if (entry == nullptr) return find_task(request.task).status();
  KC_CHECK_ARG(!entry->info.train_only || request.split == Split::kTrain, request.task,
               " is a train-only task (a copy-curriculum drill with train wordings only, not part of the evaluation "
               "suite); it cannot be generated for the ", split_name(request.split), " split, only for train");
  KC_CHECK_ARG(static_cast<bool>(count_tokens), request.task, ": no token counter given");
  KC_CHECK_ARG(request.target_length > 0, request.task, ": target length is ", request.target_length,
               "; it must be positive");
  KC_CHECK_ARG(request.index >= 0, request.task, ": sample index is ", request.index, "; it must be >= 0");
  if (request.depth.has_value()) {
    KC_CHECK_ARG(std::isfinite(*request.depth) && *request.depth >= 0.0 && *request.depth <= 1.0, request.task,
                 ": depth is ", *request.depth, "; it must lie in [0, 1]");
  }
  const int64_t reserve = request.generation_reserve.value_or(entry->info.max_new_tokens);
  KC_CHECK_ARG(reserve >= 0, request.task, ": generation reserve is ", reserve, "; it must be >= 0");
  KC_CHECK_ARG(reserve < request.target_length, request.task, ": target length ", request.target_length,
               " leaves no room for the prompt after reserving ", reserve, " tokens for the answer");
  KC_ASSIGN_OR_RETURN(const uint64_t seed, effective_seed(request.split, request.seed));

  // The sample's seed: every input that identifies it, mixed.
  uint64_t h = mix64(seed);
  h = mix64(h ^ fnv1a64(entry->info.name));
  h = mix64(h ^ static_cast<uint64_t>(request.target_length));
  h = mix64(h ^ static_cast<uint64_t>(request.index));

  TaskContext ctx;
  ctx.task = entry->info.name;
  ctx.split = request.split;
  ctx.target_length = request.target_length;
  ctx.budget = request.target_length - reserve;
  ctx.depth = request.depth;
  ctx.rng_seed = h;
  ctx.count_tokens = &count_tokens;
  auto generated = entry->generate(ctx);
  if (!generated.ok()) {
    Status s = generated.status();
    return s.with_context(std::string(entry->info.name) + " at " + std::to_string(request.target_length) + " tokens");
  }
  TaskOutput& out = *generated;

  Sample s;
  s.task = std::string(entry->info.name);
  s.split = request.split;
  s.target_length = request.target_length;
  s.seed = request.seed;
  s.index = request.index;
  s.rng_seed = h;
  s.template_id = out.template_id;
  s.prompt = std::move(out.filled.built.prompt);
  s.answer_prefix = std::move(out.answer_prefix);
  s.answers = std::move(out.answers);
  s.completion = out.completion.empty() ? answer_list_completion(s.answers) : std::move(out.completion);
  s.scorer = entry->info.scorer;
  s.max_new_tokens = entry->info.max_new_tokens;
  s.token_budget = ctx.budget;
  s.prompt_tokens = out.filled.tokens;
  s.haystack_units = out.filled.units;
  s.needles = std::move(out.filled.built.needles);
  s.params = std::move(out.params);
  return s;
}

}  // namespace kascade::eval
