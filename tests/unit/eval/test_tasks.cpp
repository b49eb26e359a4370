// tests/unit/eval/test_tasks.cpp — every task of the suite, on the train and eval splits:
//   - determinism: the same request gives the same sample, other indices other samples;
//   - length: prompt_tokens is the counter's count of the prompt, never above the budget and
//     within one filler unit of it (a whitespace stand-in tokenizer, and a BPE-like one);
//   - needles: each placed sentence occurs exactly once, at its recorded offset, at its recorded
//     depth (recounted from the prompt), near the requested depth;
//   - answers derivable from the prompt: an independent checker per task family re-reads the
//     prompt text only (niah: the sentences that carry the asked keys; vt: parses the
//     assignments and follows the chains; cwe/fwe: counts the words; kv: parses the JSON;
//     multihop: parses the facts and follows the 2 hops; copy_strings: re-reads the record of each
//     asked label; hop_drill: parses the facts and follows the 2 hops past the lures; vt_lookup: as vt);
//   - the train-only tasks (copy_strings, hop_drill, vt_lookup): the same checks on the train split at their short
//     lengths, records dropped where they outgrow the budget, and a clear error for dev and eval;
//   - catalog, list parsing and request validation.
// The text patterns are matched by small hand-written scanners (std::regex trips GCC 12's
// -Wmaybe-uninitialized under the sanitizers, and is slow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "eval/templates.h"
#include "eval/vocab.h"
#include "kascade/tasks.h"

namespace kascade::eval {
namespace {

std::vector<std::string> names_of(const std::vector<TaskInfo>& catalog) {
  std::vector<std::string> v;
  for (const auto& t : catalog) v.emplace_back(t.name);
  return v;
}
const std::vector<std::string>& all_tasks() {
  static const std::vector<std::string> names = names_of(task_catalog());
  return names;
}
// The train-only tasks (the copy curriculum), and the short lengths they are generated at.
const std::vector<std::string>& train_only_tasks() {
  static const std::vector<std::string> names = names_of(train_only_task_catalog());
  return names;
}
constexpr int64_t kShortLengths[] = {512, 1024, 2048};

// A BPE-like stand-in: each whitespace-separated word costs ceil(bytes / 4) tokens.
int64_t bpe_like_tokens(std::string_view text) {
  int64_t n = 0, run = 0;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      n += (run + 3) / 4;
      run = 0;
    } else {
      ++run;
    }
  }
  return n + (run + 3) / 4;
}

Sample make(const std::string& task, Split split, int64_t length, int64_t index, const TokenCounter& counter,
            std::optional<double> depth = std::nullopt) {
  SampleRequest r;
  r.task = task;
  r.split = split;
  r.target_length = length;
  r.seed = 17;
  r.index = index;
  r.depth = depth;
  auto s = generate_sample(r, counter);
  EXPECT_TRUE(s.ok()) << task << " " << split_name(split) << " " << length << ": " << s.status().to_string();
  return s.ok() ? *s : Sample{};
}

// The context: everything between the instruction line and the question line.
std::string context_of(const Sample& s) {
  const size_t first = s.prompt.find('\n');
  const size_t last = s.prompt.rfind('\n');
  return s.prompt.substr(first + 1, last - first - 1);
}
std::string question_of(const Sample& s) { return s.prompt.substr(s.prompt.rfind('\n') + 1); }

size_t count_occurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::vector<std::string> whitespace_words(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Maximal runs of characters satisfying `in_run`, of exactly `length` characters, not touching
// another letter or digit (a \b-delimited token).
std::vector<std::string> runs_of(const std::string& text, bool (*in_run)(char), size_t length) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    if (!in_run(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && in_run(text[j])) ++j;
    const bool bounded = (i == 0 || !is_alnum(text[i - 1])) && (j == text.size() || !is_alnum(text[j]));
    if (j - i == length && bounded) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}
std::vector<std::string> numbers_of(const std::string& text, size_t digits) {
  return runs_of(text, [](char c) { return c >= '0' && c <= '9'; }, digits);
}
std::vector<std::string> upper_names_of(const std::string& text) {
  return runs_of(text, [](char c) { return c >= 'A' && c <= 'Z'; }, 5);
}

// Lower-case hex UUIDs 8-4-4-4-12.
std::vector<std::string> uuids_of(const std::string& text) {
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  std::vector<std::string> out;
  for (size_t i = 0; i + 36 <= text.size(); ++i) {
    if (i > 0 && (is_hex(text[i - 1]) || text[i - 1] == '-')) continue;
    size_t p = i;
    bool ok = true;
    for (size_t g = 0; g < 5 && ok; ++g) {
      for (size_t k = 0; k < kGroups[g]; ++k) ok = ok && is_hex(text[p++]);
      if (g < 4) ok = ok && text[p++] == '-';
    }
    if (ok && (p == text.size() || !is_hex(text[p]))) {
      out.push_back(text.substr(i, 36));
      i = p - 1;
    }
  }
  return out;
}

// Word keys "adjective-noun": lower-case letters, one hyphen, lower-case letters.
std::vector<std::string> word_keys_of(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& w : whitespace_words(text)) {
    std::string t = w;
    while (!t.empty() && !std::isalpha(static_cast<unsigned char>(t.back()))) t.pop_back();
    const size_t dash = t.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == t.size()) continue;
    const bool lower = std::all_of(t.begin(), t.end(), [](char c) { return c == '-' || (c >= 'a' && c <= 'z'); });
    if (lower && t.find('-', dash + 1) == std::string::npos) out.push_back(t);
  }
  return out;
}
// ---- independent answer checkers --------------------------------------------------------------

::testing::AssertionResult check_niah(const Sample& s) {
  const std::string context = context_of(s), question = question_of(s);
  const bool uuid_keys = s.task == "niah_multikey_3";
  const bool uuid_values = s.task == "niah_single_3" || s.task == "niah_multikey_3";
  std::vector<std::string> keys = uuid_keys ? uuids_of(question) : word_keys_of(question);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys.empty()) return ::testing::AssertionFailure() << "no key in the question: " << question;
  std::vector<std::string> values;
  for (const auto& key : keys) {
    for (size_t at = context.find(key); at != std::string::npos; at = context.find(key, at + 1)) {
      const size_t from = at + key.size();
      const std::string sentence = context.substr(from, context.find('.', from) - from);
      const auto found = uuid_values ? uuids_of(sentence) : numbers_of(sentence, 7);
      if (found.size() != 1) {
        return ::testing::AssertionFailure() << "sentence after key " << key << " holds " << found.size()
                                             << " values: " << sentence;
      }
      values.push_back(found[0]);
    }
  }
  std::vector<std::string> expected = s.answers;
  std::sort(values.begin(), values.end());
  std::sort(expected.begin(), expected.end());
  if (values != expected) return ::testing::AssertionFailure() << "values next to the asked keys differ from the answers";
  for (const auto& a : s.answers) {
    if (count_occurrences(s.prompt, a) != 1) return ::testing::AssertionFailure() << a << " is not in the prompt exactly once";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_vt(const Sample& s) {
  const std::string context = context_of(s), question = question_of(s);
  auto query = numbers_of(question, 5);
  query.erase(std::unique(query.begin(), query.end()), query.end());  // the answer prefix repeats it
  if (query.size() != 1) return ::testing::AssertionFailure() << "no single value in the question: " << question;
  std::map<std::string, std::string> value_of;
  size_t statements = 0;
  size_t begin = 0;
  while (begin < context.size()) {
    size_t end = context.find('.', begin);
    if (end == std::string::npos) end = context.size();
    const std::string segment = context.substr(begin, end - begin);
    begin = end + 1;
    const auto names = upper_names_of(segment);
    const auto numbers = numbers_of(segment, 5);
    if (names.empty()) continue;
    ++statements;
    if (names.size() == 1 && numbers.size() == 1) {
      value_of[names[0]] = numbers[0];
    } else if (names.size() == 2 && numbers.empty()) {
      // "COPY src INTO var", "SAVE src IN var", "ASSIGN src TO var": the source comes first.
      const bool reversed = segment.find(" INTO ") != std::string::npos || segment.find(" IN ") != std::string::npos ||
                            segment.find(" TO ") != std::string::npos;
      const std::string& lhs = reversed ? names[1] : names[0];
      const std::string& rhs = reversed ? names[0] : names[1];
      if (!value_of.count(rhs)) return ::testing::AssertionFailure() << rhs << " is used before it is assigned";
      value_of[lhs] = value_of[rhs];
    } else {
      return ::testing::AssertionFailure() << "unparsable statement: " << segment;
    }
  }
  std::set<std::string> holders;
  for (const auto& [name, value] : value_of) {
    if (value == query[0]) holders.insert(name);
  }
  const std::set<std::string> expected(s.answers.begin(), s.answers.end());
  if (holders != expected) return ::testing::AssertionFailure() << "following the chains gives other variables";
  const int64_t chains = s.params.at("num_chains"), hops = s.params.at("num_hops");
  if (static_cast<int64_t>(statements) != chains * (hops + 1)) {
    return ::testing::AssertionFailure() << statements << " statements, expected " << chains * (hops + 1);
  }
  return ::testing::AssertionSuccess();
}

// Word counts of the context, most frequent first; numbering tokens ("12." "#12" "[12]" "12:" "12)") skipped.
std::vector<std::pair<int64_t, std::string>> ranked_words(const std::string& context, std::string_view skip) {
  // "12." "#12" "[12]" "12:" "12)": optional '#' or '[', digits, optional closing mark.
  auto is_numbering = [](const std::string& w) {
    size_t b = (!w.empty() && (w[0] == '#' || w[0] == '[')) ? 1 : 0;
    size_t e = w.size();
    if (e > b && std::string_view(".):]").find(w[e - 1]) != std::string_view::npos) --e;
    return e > b && std::all_of(w.begin() + static_cast<std::ptrdiff_t>(b), w.begin() + static_cast<std::ptrdiff_t>(e),
                                [](char c) { return c >= '0' && c <= '9'; });
  };
  std::map<std::string, int64_t> counts;
  for (const auto& w : whitespace_words(context)) {
    if (is_numbering(w) || w == skip) continue;
    ++counts[w];
  }
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [w, c] : counts) ranked.emplace_back(-c, w);
  std::sort(ranked.begin(), ranked.end());
  return ranked;
}

::testing::AssertionResult check_top_words(const Sample& s, size_t top, std::string_view skip) {
  const auto ranked = ranked_words(context_of(s), skip);
  if (ranked.size() <= top) return ::testing::AssertionFailure() << "only " << ranked.size() << " distinct words";
  if (ranked[top - 1].first >= ranked[top].first) {
    return ::testing::AssertionFailure() << "rank " << top << " and " << top + 1 << " tie at " << -ranked[top].first;
  }
  std::set<std::string> got;
  for (size_t i = 0; i < top; ++i) got.insert(ranked[i].second);
  const std::set<std::string> expected(s.answers.begin(), s.answers.end());
  if (got != expected || s.answers.size() != top) return ::testing::AssertionFailure() << "top words differ from the answers";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_kv(const Sample& s) {
  const std::string context = context_of(s);
  nlohmann::json obj;
  try {
    obj = nlohmann::json::parse(context);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "context is not JSON: " << e.what();
  }
  const auto keys = uuids_of(question_of(s));
  if (keys.size() != 1) return ::testing::AssertionFailure() << "no single key in the question";
  if (count_occurrences(context, keys[0]) != 1) return ::testing::AssertionFailure() << "key not unique in the JSON";
  if (!obj.contains(keys[0])) return ::testing::AssertionFailure() << "asked key missing from the JSON";
  if (s.answers.size() != 1 || obj[keys[0]].get<std::string>() != s.answers[0]) {
    return ::testing::AssertionFailure() << "JSON value differs from the answer";
  }
  if (static_cast<int64_t>(obj.size()) != s.params.at("num_pairs")) return ::testing::AssertionFailure() << "pair count";
  return ::testing::AssertionSuccess();
}

// All matches of a fact template in `text`: {country} and {city} match one capitalised word
// ([A-Z][a-z]+), {person} (and hop_drill's {subject}, {object}) two; the captures by placeholder name (a
// pattern may name the city first).
std::vector<std::map<std::string, std::string>> match_template(std::string_view tmpl, const std::string& text) {
  std::vector<std::map<std::string, std::string>> out;
  auto name_at = [&](size_t p, int words, size_t* end) {
    size_t q = p;
    for (int w = 0; w < words; ++w) {
      if (w > 0) {
        if (q >= text.size() || text[q] != ' ') return false;
        ++q;
      }
      if (q >= text.size() || !(text[q] >= 'A' && text[q] <= 'Z')) return false;
      ++q;
      if (q >= text.size() || !(text[q] >= 'a' && text[q] <= 'z')) return false;
      while (q < text.size() && text[q] >= 'a' && text[q] <= 'z') ++q;
    }
    *end = q;
    return true;
  };
  for (size_t start = 0; start < text.size(); ++start) {
    if (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) continue;
    std::map<std::string, std::string> caps;
    size_t p = start, t = 0;
    bool ok = true;
    while (ok && t < tmpl.size()) {
      if (tmpl[t] == '{') {
        const size_t close = tmpl.find('}', t);
        const std::string placeholder(tmpl.substr(t + 1, close - t - 1));
        const int words = placeholder == "person" || placeholder == "subject" || placeholder == "object" ? 2 : 1;
        size_t end = 0;
        ok = name_at(p, words, &end);
        if (ok) caps[placeholder] = text.substr(p, end - p);
        p = end;
        t = close + 1;
      } else {
        ok = p < text.size() && text[p] == tmpl[t];
        ++p;
        ++t;
      }
    }
    if (ok) out.push_back(std::move(caps));
  }
  return out;
}

// `tmpl` with every {name} of `vars` replaced by its value (other placeholders kept).
std::string fill_in(std::string_view tmpl, const std::vector<std::pair<std::string, std::string>>& vars) {
  std::string out(tmpl);
  for (const auto& [name, value] : vars) {
    const std::string placeholder = "{" + name + "}";
    for (size_t at = out.find(placeholder); at != std::string::npos; at = out.find(placeholder, at + value.size())) {
      out.replace(at, placeholder.size(), value);
    }
  }
  return out;
}

// The relation a train sample drew: modifier and noun, the indices the params name.
std::string drawn_relation(const Sample& s, const RelationWordList& modifiers, const char* modifier_param,
                           const RelationWordList& nouns, const char* noun_param) {
  return compose_relation(modifiers.words[static_cast<size_t>(s.params.at(modifier_param))],
                          nouns.words[static_cast<size_t>(s.params.at(noun_param))]);
}

// A train fact template with the sample's relations ({place}, {role}: the words the params name).
std::string with_relations(std::string_view tmpl, const Sample& s) {
  if (!s.params.contains("place_noun")) return std::string(tmpl);
  const FactRelationWords& w = fact_train_relation_words();
  return fill_in(tmpl, {{"place", drawn_relation(s, w.place_modifiers, "place_modifier", w.place_nouns, "place_noun")},
                        {"role", drawn_relation(s, w.role_modifiers, "role_modifier", w.role_nouns, "role_noun")}});
}

::testing::AssertionResult check_multihop(const Sample& s) {
  const FactPhrasing& phr = fact_phrasings(s.split)[static_cast<size_t>(s.template_id)];
  const std::string context = context_of(s);
  std::map<std::string, std::vector<std::string>> city_of, person_of;
  for (const auto& m : match_template(with_relations(phr.first_fact, s), context)) {
    city_of[m.at("country")].push_back(m.at("city"));
  }
  for (const auto& m : match_template(with_relations(phr.second_fact, s), context)) {
    person_of[m.at("city")].push_back(m.at("person"));
  }
  const auto q = match_template(with_relations(phr.question, s), question_of(s));
  if (q.size() != 1) return ::testing::AssertionFailure() << "question unparsed";
  const std::string country = q[0].at("country");
  if (city_of[country].size() != 1) return ::testing::AssertionFailure() << country << ": " << city_of[country].size() << " first facts";
  const std::string city = city_of[country][0];
  if (person_of[city].size() != 1) return ::testing::AssertionFailure() << city << ": " << person_of[city].size() << " second facts";
  if (static_cast<int64_t>(city_of.size()) != s.params.at("num_chains") ||
      static_cast<int64_t>(person_of.size()) != s.params.at("num_chains")) {
    return ::testing::AssertionFailure() << "expected " << s.params.at("num_chains") << " chains";
  }
  if (s.answers != std::vector<std::string>{person_of[city][0]}) return ::testing::AssertionFailure() << "answer differs";
  return ::testing::AssertionSuccess();
}

// copy_strings: whether `value` has the form of its kind (0 UUID, 1 digits, 2 hex, 3 invented names, 4 vt names).
bool has_copy_form(const std::string& value, int64_t kind) {
  const auto all = [&](bool (*in)(char)) { return std::all_of(value.begin(), value.end(), in); };
  const std::vector<std::string> words = whitespace_words(value);
  const bool long_enough = value.size() >= 20 && value.size() <= 36;
  switch (kind) {
    case 0: return uuids_of(value) == std::vector<std::string>{value};
    case 1: return long_enough && all([](char c) { return c >= '0' && c <= '9'; });
    case 2: return long_enough && all(is_hex);
    case 3:  // 2-3 invented person names of two capitalised words each
      return (words.size() == 4 || words.size() == 6) && std::all_of(words.begin(), words.end(), [](const std::string& w) {
               return w.size() >= 2 && std::isupper(static_cast<unsigned char>(w[0])) &&
                      std::all_of(w.begin() + 1, w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
             });
    case 4:
      return words.size() >= 4 && words.size() <= 6 && std::all_of(words.begin(), words.end(), [](const std::string& w) {
               return is_split_variable_name(w, Split::kTrain);
             });
    default: return false;
  }
}

::testing::AssertionResult check_copy_strings(const Sample& s) {
  const CopyPhrasing& phr = copy_train_phrasings()[static_cast<size_t>(s.template_id)];
  const std::string record = fill_in(phr.record, {{"thing", std::string(copy_train_things()[static_cast<size_t>(s.params.at("thing"))])}});
  const size_t l = record.find("{label}"), v = record.find("{value}");
  const std::string before = record.substr(0, l), between = record.substr(l + 7, v - l - 7), after = record.substr(v + 7);
  const std::string context = context_of(s);
  // Every record: `before`, a word key, `between`.
  size_t records = 0;
  for (size_t at = context.find(between); at != std::string::npos; at = context.find(between, at + 1)) {
    size_t b = at;
    while (b > 0 && (context[b - 1] == '-' || (context[b - 1] >= 'a' && context[b - 1] <= 'z'))) --b;
    const std::string key = context.substr(b, at - b);
    records += word_keys_of(key) == std::vector<std::string>{key} && context.substr(0, b).ends_with(before);
  }
  if (records != static_cast<size_t>(s.params.at("num_strings"))) {
    return ::testing::AssertionFailure() << records << " records, not " << s.params.at("num_strings");
  }
  const std::vector<std::string> labels = word_keys_of(question_of(s));  // in the question's order
  if (labels.size() != s.answers.size() || static_cast<int64_t>(labels.size()) != s.params.at("num_asked")) {
    return ::testing::AssertionFailure() << labels.size() << " labels asked, " << s.answers.size() << " answers";
  }
  for (size_t j = 0; j < labels.size(); ++j) {
    const std::string cue = before + labels[j] + between;
    if (count_occurrences(context, cue) != 1) return ::testing::AssertionFailure() << "no single record \"" << cue << "\"";
    const size_t from = context.find(cue) + cue.size();
    const std::string value = context.substr(from, context.find(after, from) - from);
    if (value != s.answers[j]) return ::testing::AssertionFailure() << "answer " << j << " is not the string under " << labels[j];
    if (!has_copy_form(value, s.params.at("asked_kind_" + std::to_string(j)))) {
      return ::testing::AssertionFailure() << value << " is not of kind " << s.params.at("asked_kind_" + std::to_string(j));
    }
    if (count_occurrences(s.prompt, value) != 1) return ::testing::AssertionFailure() << value << " is not in the prompt once";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_hop_drill(const Sample& s) {
  const HopPhrasing& phr = hop_train_phrasings()[static_cast<size_t>(s.template_id)];
  const HopRelationWords& w = hop_train_relation_words();
  const std::string x = drawn_relation(s, w.modifiers, "x_modifier", w.nouns, "x_noun");
  const std::string y = drawn_relation(s, w.modifiers, "y_modifier", w.nouns, "y_noun");
  if (x.find(y) != std::string::npos || y.find(x) != std::string::npos) return ::testing::AssertionFailure() << x << " / " << y;
  const std::string context = context_of(s);
  std::map<std::string, std::vector<std::string>> x_of, y_of;
  size_t facts = 0;
  for (const auto& [rel, of] : {std::pair{x, &x_of}, std::pair{y, &y_of}}) {
    for (const auto& m : match_template(fill_in(phr.fact, {{"rel", rel}}), context)) {
      (*of)[m.at("subject")].push_back(m.at("object"));
      ++facts;
    }
  }
  const auto q = match_template(fill_in(phr.question, {{"x", x}, {"y", y}}), question_of(s));
  if (q.size() != 1) return ::testing::AssertionFailure() << "question unparsed";
  const std::string a = q[0].at("subject");
  if (x_of[a].size() != 1) return ::testing::AssertionFailure() << a << ": " << x_of[a].size() << " first facts";
  const std::string b = x_of[a][0];
  if (y_of[b].size() != 1) return ::testing::AssertionFailure() << b << ": " << y_of[b].size() << " second facts";
  if (s.answers != std::vector<std::string>{y_of[b][0]}) return ::testing::AssertionFailure() << "answer differs";
  const int64_t lures = s.params.at("lure_one_hop") + s.params.at("lure_double_x");
  if (static_cast<int64_t>(facts) != 2 * s.params.at("num_chains") + lures) {
    return ::testing::AssertionFailure() << facts << " facts for " << s.params.at("num_chains") << " chains and " << lures << " lures";
  }
  // The lures are there, and a one-hop shortcut through them misses the answer.
  if (s.params.at("lure_one_hop") != static_cast<int64_t>(y_of.count(a))) return ::testing::AssertionFailure() << "one-hop lure";
  if (s.params.at("lure_double_x") != static_cast<int64_t>(x_of.count(b))) return ::testing::AssertionFailure() << "x-twice lure";
  if (y_of.count(a) && y_of[a][0] == s.answers[0]) return ::testing::AssertionFailure() << "the lure gives the answer";
  // The completion restates both hops as the prompt states them.
  const std::string first = fill_in(phr.fact, {{"rel", x}, {"subject", a}, {"object", b}});
  const std::string second = fill_in(phr.fact, {{"rel", y}, {"subject", b}, {"object", s.answers[0]}});
  if (s.completion != " " + first + " " + second) return ::testing::AssertionFailure() << "completion " << s.completion;
  if (count_occurrences(s.prompt, first) != 1 || count_occurrences(s.prompt, second) != 1) {
    return ::testing::AssertionFailure() << "the restated facts are not the prompt's";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_answers(const Sample& s) {
  if (s.task.starts_with("niah_")) return check_niah(s);
  if (s.task == "vt" || s.task == "vt_lookup") return check_vt(s);
  if (s.task == "cwe") return check_top_words(s, static_cast<size_t>(s.params.at("num_cw")), "");
  if (s.task == "fwe") return check_top_words(s, 3, kFweNoiseWord);
  if (s.task == "kv_retrieval") return check_kv(s);
  if (s.task == "multihop_qa") return check_multihop(s);
  if (s.task == "copy_strings") return check_copy_strings(s);
  if (s.task == "hop_drill") return check_hop_drill(s);
  return ::testing::AssertionFailure() << "no checker for " << s.task;
}

// ---- tests ------------------------------------------------------------------------------------

TEST(EvalTasks, CatalogListsThirteenTasksWithRulerScorers) {
  ASSERT_EQ(task_catalog().size(), 13u);
  for (const auto& t : task_catalog()) {
    EXPECT_EQ(t.scorer, t.name == "multihop_qa" ? ScorerKind::kStringMatchPart : ScorerKind::kStringMatchAll) << t.name;
    EXPECT_GT(t.max_new_tokens, 0);
    EXPECT_TRUE(find_task(t.name).ok());
  }
  EXPECT_EQ(find_task("vt")->max_new_tokens, 30);
  auto unknown = find_task("niah_single_9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("niah_single_1"), std::string::npos);  // lists the known ones
  EXPECT_NE(unknown.status().message().find("copy_strings"), std::string::npos);
  // The train-only tasks: found by name, outside the suite, scored like the needles.
  EXPECT_EQ(train_only_tasks(), (std::vector<std::string>{"copy_strings", "hop_drill", "vt_lookup"}));
  for (const auto& t : task_catalog()) EXPECT_FALSE(t.train_only) << t.name;
  for (const auto& t : train_only_task_catalog()) {
    EXPECT_TRUE(t.train_only);
    EXPECT_EQ(t.scorer, ScorerKind::kStringMatchAll) << t.name;
    ASSERT_TRUE(find_task(t.name).ok());
    EXPECT_TRUE(find_task(t.name)->train_only);
  }
}

TEST(EvalTasks, AnswersAreDerivableFromThePrompt) {
  for (const auto& task : all_tasks()) {
    for (const Split split : {Split::kEval, Split::kTrain}) {
      for (const int64_t length : {1024, 2900}) {
        for (int64_t index = 0; index < 3; ++index) {
          const Sample s = make(task, split, length, index, count_whitespace_tokens);
          EXPECT_TRUE(check_answers(s)) << task << " " << split_name(split) << " " << length << " #" << index;
          EXPECT_TRUE(s.prompt.ends_with(s.answer_prefix));
          EXPECT_FALSE(s.answers.empty());
          for (const auto& a : s.answers) EXPECT_NE(s.completion.find(a), std::string::npos);
        }
      }
    }
  }
  for (const auto& task : train_only_tasks()) {
    for (const int64_t length : kShortLengths) {
      for (int64_t index = 0; index < 8; ++index) {
        for (const TokenCounter& counter : {TokenCounter(count_whitespace_tokens), TokenCounter(bpe_like_tokens)}) {
          const Sample s = make(task, Split::kTrain, length, index, counter);
          EXPECT_TRUE(check_answers(s)) << task << " " << length << " #" << index;
          EXPECT_TRUE(s.prompt.ends_with(s.answer_prefix));
          EXPECT_FALSE(s.answers.empty());
          EXPECT_DOUBLE_EQ(*score_prediction(s.scorer, s.completion, s.answers), 1.0) << s.completion;
        }
      }
    }
  }
}

TEST(EvalTasks, VtHopsAreRulersFourOnEvalAndDevAndOneToFourOnTrain) {
  std::set<int64_t> train_hops;
  int64_t train_four_hops = 0;
  for (int64_t index = 0; index < 40; ++index) {
    for (const Split split : {Split::kEval, Split::kDev}) {
      const Sample s = make("vt", split, 1024, index, count_whitespace_tokens);
      EXPECT_EQ(s.params.at("num_hops"), 4) << split_name(split) << " #" << index;
      EXPECT_EQ(s.answers.size(), 5u);
    }
    const Sample t = make("vt", Split::kTrain, 1024, index, count_whitespace_tokens);
    ASSERT_TRUE(check_answers(t)) << "train #" << index;  // re-parses the chains of t.params' hops
    EXPECT_EQ(static_cast<int64_t>(t.answers.size()), t.params.at("num_hops") + 1);
    EXPECT_NE(t.prompt.find(std::to_string(t.answers.size()) + " variables"), std::string::npos) << t.answer_prefix;
    train_hops.insert(t.params.at("num_hops"));
  }
  EXPECT_EQ(train_hops, (std::set<int64_t>{1, 2, 3, 4})) << "40 train samples draw every hop count";
  // The full chain (eval's 4 hops) is half of the train samples: 200 draws, expected 100, sd ~7.
  for (int64_t index = 0; index < 200; ++index) {
    train_four_hops += make("vt", Split::kTrain, 1024, index, count_whitespace_tokens).params.at("num_hops") == 4;
  }
  EXPECT_GE(train_four_hops, 75);
  EXPECT_LE(train_four_hops, 125);
  // The {kw} statement styles of the train split draw their keyword per sample ("DIM ABCDE = ..."), the {uop} styles
  // an upper-case operator word between a variable and its source ("ABCDE GETS FGHIJ.").
  std::set<std::string_view> keywords_seen, word_operators_seen;
  for (int64_t index = 0; index < 400; ++index) {
    const Sample t = make("vt", Split::kTrain, 1024, index, count_whitespace_tokens);
    for (const std::string_view kw : vt_train_keywords()) {
      for (const auto& name : t.answers) {
        if (index < 200 && t.prompt.find(std::string(kw) + " " + name) != std::string::npos) keywords_seen.insert(kw);
      }
    }
    for (const std::string_view op : vt_train_word_operators()) {
      for (size_t j = 1; j < t.answers.size(); ++j) {
        if (t.prompt.find(t.answers[j] + " " + std::string(op) + " ") != std::string::npos) word_operators_seen.insert(op);
      }
    }
  }
  EXPECT_GE(keywords_seen.size(), 8u) << "200 train samples use several keywords";
  EXPECT_GE(word_operators_seen.size(), 6u) << "400 train samples use several upper-case operator words";
  for (int64_t index = 0; index < 20; ++index) {
    const Sample e = make("vt", Split::kEval, 1024, index, count_whitespace_tokens);
    for (const std::string_view kw : vt_train_keywords())
      EXPECT_EQ(e.prompt.find(" " + std::string(kw) + " " + e.answers[0]), std::string::npos) << kw;
  }
}

// Words of a completion " a, b, c.".
std::vector<std::string> completion_items(const std::string& completion) {
  std::vector<std::string> out;
  std::string body = completion.substr(1, completion.size() - 2);  // no leading space, no final '.'
  size_t start = 0;
  while (true) {
    const size_t comma = body.find(", ", start);
    out.push_back(body.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 2;
  }
}

// Train-split completions of several answers list them in an order the prompt shows: niah_multivalue's
// values by position, cwe's common words by first appearance in the list. Eval and dev keep the
// answers' own order (their completions are not trained on, and their samples stay as they were).
TEST(EvalTasks, TrainCompletionsListSeveralAnswersInPromptOrder) {
  for (int64_t index = 0; index < 8; ++index) {
    const Sample mv = make("niah_multivalue", Split::kTrain, 2048, index, count_whitespace_tokens);
    const std::vector<std::string> values = completion_items(mv.completion);
    ASSERT_EQ(std::set<std::string>(values.begin(), values.end()),
              std::set<std::string>(mv.answers.begin(), mv.answers.end())) << mv.completion;
    for (size_t i = 1; i < values.size(); ++i)
      EXPECT_LT(mv.prompt.find(values[i - 1]), mv.prompt.find(values[i])) << "#" << index << ": " << mv.completion;

    const Sample cwe = make("cwe", Split::kTrain, 2048, index, count_whitespace_tokens);
    const std::vector<std::string> words = completion_items(cwe.completion);
    ASSERT_EQ(std::set<std::string>(words.begin(), words.end()),
              std::set<std::string>(cwe.answers.begin(), cwe.answers.end())) << cwe.completion;
    // First appearance of each word as a whole word of the list.
    const std::vector<std::string> list = whitespace_words(context_of(cwe));
    const auto first = [&](const std::string& w) { return std::find(list.begin(), list.end(), w) - list.begin(); };
    for (size_t i = 1; i < words.size(); ++i)
      EXPECT_LT(first(words[i - 1]), first(words[i])) << "#" << index << ": " << cwe.completion;

    for (const std::string task : {"niah_multivalue", "cwe"}) {
      for (const Split split : {Split::kEval, Split::kDev}) {
        const Sample e = make(task, split, 2048, index, count_whitespace_tokens);
        std::string joined = " ";
        for (size_t i = 0; i < e.answers.size(); ++i) joined += (i > 0 ? ", " : "") + e.answers[i];
        EXPECT_EQ(e.completion, joined + ".") << task << " " << split_name(split) << " #" << index;
      }
    }
  }
}

// The train vt styles with a drawn operator ("ABCDE gets FGHIJ.", "ABCDE GETS FGHIJ.") parse and follow like the
// others.
TEST(EvalTasks, VtTrainOperatorStylesAreDerivable) {
  for (const std::string_view placeholder : {"{op}", "{uop}"}) {
    int found = 0;
    for (int64_t index = 0; index < 300 && found < 6; ++index) {
      const Sample s = make("vt", Split::kTrain, 1024, index, count_whitespace_tokens);
      const VtPhrasing& phr = vt_phrasings(Split::kTrain)[static_cast<size_t>(s.template_id)];
      if (phr.assign_var.find(placeholder) == std::string_view::npos) continue;
      ++found;
      EXPECT_TRUE(check_answers(s)) << "train vt #" << index << " (" << phr.assign_var << ")";
    }
    EXPECT_EQ(found, 6) << "too few " << placeholder << " styles drawn in 300 samples";
  }
}

TEST(EvalTasks, MultihopTrainCompletionSpellsOutTheHop) {
  for (int64_t index = 0; index < 6; ++index) {
    for (const Split split : {Split::kEval, Split::kDev}) {
      const Sample s = make("multihop_qa", split, 1024, index, count_whitespace_tokens);
      EXPECT_EQ(s.completion, " " + s.answers.at(0) + ".") << split_name(split) << " #" << index;
    }
    const Sample t = make("multihop_qa", Split::kTrain, 1024, index, count_whitespace_tokens);
    // " City. <the second fact, as in the prompt>": the intermediate city, then the fact naming the person.
    const size_t dot = t.completion.find(". ");
    ASSERT_NE(dot, std::string::npos) << t.completion;
    const std::string city = t.completion.substr(1, dot - 1), fact = t.completion.substr(dot + 2);
    EXPECT_FALSE(city.empty());
    EXPECT_NE(t.prompt.find(fact), std::string::npos) << "the restated fact is not the prompt's: " << fact;
    EXPECT_NE(fact.find(city), std::string::npos) << fact;
    EXPECT_NE(fact.find(t.answers.at(0)), std::string::npos) << fact;
    EXPECT_DOUBLE_EQ(*score_prediction(t.scorer, t.completion, t.answers), 1.0);
  }
}

TEST(EvalTasks, CheckersRejectDoctoredSamples) {
  std::vector<Sample> samples;
  for (const auto& task : all_tasks()) samples.push_back(make(task, Split::kEval, 1024, 0, count_whitespace_tokens));
  for (const auto& task : train_only_tasks()) samples.push_back(make(task, Split::kTrain, 1024, 0, count_whitespace_tokens));
  for (const Sample& s : samples) {
    const std::string& task = s.task;
    ASSERT_TRUE(check_answers(s)) << task;
    Sample wrong_answer = s;
    char& last = wrong_answer.answers[0].back();
    last = last == 'a' ? 'b' : (last == '0' ? '1' : static_cast<char>(last == 'z' || last == '9' ? last - 1 : last + 1));
    EXPECT_FALSE(check_answers(wrong_answer)) << task;
    if (s.needles.empty()) continue;
    // Drop the first queried needle from the prompt: the answer is no longer derivable.
    Sample no_needle = s;
    const auto it = std::find_if(s.needles.begin(), s.needles.end(), [](const auto& p) { return p.queried; });
    no_needle.prompt.erase(static_cast<size_t>(it->char_offset), it->text.size());
    EXPECT_FALSE(check_answers(no_needle)) << task;
  }
}

TEST(EvalTasks, SameRequestSameSample) {
  std::vector<std::pair<std::string, Split>> cases;
  for (const auto& task : all_tasks()) cases.emplace_back(task, Split::kEval);
  for (const auto& task : train_only_tasks()) cases.emplace_back(task, Split::kTrain);
  for (const auto& [task, split] : cases) {
    const Sample a = make(task, split, 1500, 4, count_whitespace_tokens);
    make(task, split, 1500, 5, count_whitespace_tokens);  // unrelated work in between
    const Sample b = make(task, split, 1500, 4, count_whitespace_tokens);
    EXPECT_EQ(a.prompt, b.prompt) << task;
    EXPECT_EQ(a.answers, b.answers) << task;
    EXPECT_EQ(a.rng_seed, b.rng_seed) << task;
    ASSERT_EQ(a.needles.size(), b.needles.size());
    for (size_t i = 0; i < a.needles.size(); ++i) {
      EXPECT_EQ(a.needles[i].char_offset, b.needles[i].char_offset);
      EXPECT_EQ(a.needles[i].depth, b.needles[i].depth);
    }
    EXPECT_EQ(a.completion, b.completion) << task;
    EXPECT_EQ(a.params, b.params) << task;
    const Sample other_index = make(task, split, 1500, 6, count_whitespace_tokens);
    EXPECT_NE(a.prompt, other_index.prompt) << task;
    EXPECT_NE(a.answers, other_index.answers) << task;
    SampleRequest r{task, split, 1500, 18, 4, std::nullopt, std::nullopt};
    EXPECT_NE(generate_sample(r, count_whitespace_tokens)->answers, a.answers) << task << " (other seed)";
  }
}

// Whitespace tokens of one filler unit of the task.
int64_t unit_tokens(const Sample& s) {
  if (s.task == "niah_multikey_2" || s.task == "niah_multikey_3") return count_whitespace_tokens(s.needles[0].text);
  if (s.task == "kv_retrieval") return 2;
  if (s.task == "cwe") return 2 * s.params.at("freq_ucw");
  return 1;  // one haystack word (fwe: one coded word)
}

TEST(EvalTasks, LengthIsWithinOneUnitOfTheBudgetAndNeverAbove) {
  for (const auto& task : all_tasks()) {
    for (const int64_t length : {1024, 2900, 8192}) {
      const Sample s = make(task, Split::kEval, length, 1, count_whitespace_tokens);
      const int64_t reserve = find_task(task)->max_new_tokens;
      EXPECT_EQ(s.token_budget, length - reserve);
      EXPECT_EQ(s.prompt_tokens, count_whitespace_tokens(s.prompt));
      EXPECT_LE(s.prompt_tokens, s.token_budget) << task << " " << length;
      EXPECT_LT(s.token_budget - s.prompt_tokens, unit_tokens(s)) << task << " " << length;
    }
    // A BPE-like counter: units cost several tokens, the prompt still fits tightly.
    const Sample b = make(task, Split::kEval, 4096, 2, bpe_like_tokens);
    EXPECT_EQ(b.prompt_tokens, bpe_like_tokens(b.prompt));
    EXPECT_LE(b.prompt_tokens, b.token_budget) << task;
    EXPECT_LT(b.token_budget - b.prompt_tokens, 48) << task;
  }
  // The train-only tasks at their short lengths (a haystack word is their filler unit).
  for (const auto& task : train_only_tasks()) {
    for (const int64_t length : kShortLengths) {
      for (int64_t index = 0; index < 4; ++index) {
        const Sample s = make(task, Split::kTrain, length, index, count_whitespace_tokens);
        EXPECT_EQ(s.token_budget, length - find_task(task)->max_new_tokens);
        EXPECT_EQ(s.prompt_tokens, count_whitespace_tokens(s.prompt));
        EXPECT_LE(s.prompt_tokens, s.token_budget) << task << " " << length;
        EXPECT_LT(s.token_budget - s.prompt_tokens, 1) << task << " " << length;
        const Sample b = make(task, Split::kTrain, length, index, bpe_like_tokens);
        EXPECT_LE(b.prompt_tokens, b.token_budget) << task << " " << length;
        EXPECT_LT(b.token_budget - b.prompt_tokens, 48) << task << " " << length;
      }
    }
  }
}

TEST(EvalTasks, LongTargetsFillAndStayAnswerable) {
  for (const std::string task : {"niah_single_2", "niah_multikey_3", "cwe", "fwe", "kv_retrieval"}) {
    const Sample s = make(task, Split::kEval, 32768, 0, count_whitespace_tokens);
    EXPECT_LE(s.prompt_tokens, s.token_budget);
    EXPECT_GT(s.prompt_tokens, s.token_budget - unit_tokens(s)) << task;
    EXPECT_TRUE(check_answers(s)) << task;
  }
}

TEST(EvalTasks, GenerationReserveIsHonoured) {
  SampleRequest r{"niah_single_1", Split::kEval, 2048, 0, 0, std::nullopt, int64_t{0}};
  auto s = generate_sample(r, count_whitespace_tokens);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->token_budget, 2048);
  EXPECT_EQ(s->prompt_tokens, 2048);
  r.generation_reserve = 500;
  s = generate_sample(r, count_whitespace_tokens);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->prompt_tokens, 1548);
}

// Haystack units before needle n, recounted from the prompt.
double recount_depth(const Sample& s, size_t n) {
  const NeedlePlacement& p = s.needles[n];
  const size_t context_start = s.prompt.find('\n') + 1;
  const std::string before = s.prompt.substr(context_start, static_cast<size_t>(p.char_offset) - context_start);
  int64_t units;
  if (s.task == "kv_retrieval") {
    units = static_cast<int64_t>(count_occurrences(before, "\": \""));
  } else if (s.task == "niah_multikey_2" || s.task == "niah_multikey_3") {
    units = static_cast<int64_t>(count_occurrences(before, "."));  // one full stop per needle
  } else {
    units = count_whitespace_tokens(before);
    for (const auto& other : s.needles) {
      if (other.char_offset < p.char_offset) units -= count_whitespace_tokens(other.text);
    }
  }
  return s.haystack_units > 0 ? static_cast<double>(units) / static_cast<double>(s.haystack_units) : 0.0;
}

TEST(EvalTasks, NeedlesOccurOnceAtTheirRecordedDepth) {
  std::vector<std::string> tasks = all_tasks();
  tasks.insert(tasks.end(), train_only_tasks().begin(), train_only_tasks().end());
  for (const auto& task : tasks) {
    if (task == "cwe" || task == "fwe") continue;
    const bool train_only = find_task(task)->train_only;
    for (const Split split : {Split::kEval, Split::kTrain}) {
      if (train_only && split != Split::kTrain) continue;
      for (int64_t index = 0; index < 3; ++index) {
        const Sample s = make(task, split, 2900, index, count_whitespace_tokens);
        ASSERT_FALSE(s.needles.empty()) << task;
        const bool natural = train_only ? s.params.at("natural") == 1
                                        : task != "niah_single_1" && task != "vt" && task != "kv_retrieval" &&
                                              task != "niah_multikey_2" && task != "niah_multikey_3";
        const bool noise_words = task == "vt" || task == "niah_single_1" || train_only;
        // Needles sit at sentence ends: half a sentence of slack (the train noise's book sentences have <= 14 words,
        // the eval noise's <= 5).
        const double noise_slack = split == Split::kTrain ? 7.0 : 3.0;
        const double slack = (natural ? 90.0 : noise_words ? noise_slack : 0.5) / static_cast<double>(s.haystack_units);
        for (size_t n = 0; n < s.needles.size(); ++n) {
          const auto& p = s.needles[n];
          EXPECT_EQ(count_occurrences(s.prompt, p.text), 1u) << task << ": " << p.text;
          EXPECT_EQ(s.prompt.compare(static_cast<size_t>(p.char_offset), p.text.size(), p.text), 0) << task;
          EXPECT_NEAR(recount_depth(s, n), p.depth, 1e-12) << task << " needle " << n;
          EXPECT_LE(std::abs(p.depth - p.requested_depth), slack + 1e-12) << task << " needle " << n;
        }
      }
    }
  }
}

TEST(EvalTasks, RequestedDepthPlacesTheQueriedNeedle) {
  for (const std::string task : {"niah_single_1", "niah_multikey_2", "kv_retrieval", "vt"}) {
    for (const double depth : {0.0, 0.25, 0.5, 0.9, 1.0}) {
      const Sample s = make(task, Split::kEval, 3000, 0, count_whitespace_tokens, depth);
      const auto it = std::find_if(s.needles.begin(), s.needles.end(), [](const auto& p) { return p.queried; });
      ASSERT_NE(it, s.needles.end());
      EXPECT_DOUBLE_EQ(it->requested_depth, depth);
      EXPECT_LE(std::abs(it->depth - depth), 3.0 / static_cast<double>(s.haystack_units)) << task << " " << depth;
      EXPECT_TRUE(check_answers(s)) << task << " " << depth;
    }
  }
}

TEST(EvalTasks, RequestedDepthPlacesTheFirstAskedRecordOfTrainOnlyTasks) {
  for (const auto& task : train_only_tasks()) {
    for (const double depth : {0.0, 0.5, 1.0}) {
      const Sample s = make(task, Split::kTrain, 2048, 0, count_whitespace_tokens, depth);
      ASSERT_FALSE(s.needles.empty());
      EXPECT_TRUE(s.needles[0].queried) << task;
      EXPECT_DOUBLE_EQ(s.needles[0].requested_depth, depth);
      const double slack = (s.params.at("natural") == 1 ? 90.0 : 7.0) / static_cast<double>(s.haystack_units);
      EXPECT_LE(std::abs(s.needles[0].depth - depth), slack) << task << " " << depth;
      EXPECT_TRUE(check_answers(s)) << task << " " << depth;
    }
  }
}

// Train-only tasks have train wordings only and are not part of the suite: dev and eval requests fail,
// naming the problem, and no group or "all" lists them.
TEST(EvalTasks, TrainOnlyTasksAreRefusedForDevAndEval) {
  for (const auto& task : train_only_tasks()) {
    for (const Split split : {Split::kDev, Split::kEval}) {
      SampleRequest r{task, split, 1024, 0, 0, std::nullopt, std::nullopt};
      auto s = generate_sample(r, count_whitespace_tokens);
      ASSERT_FALSE(s.ok()) << task << " " << split_name(split);
      EXPECT_NE(s.status().message().find("train-only"), std::string::npos) << s.status().to_string();
      EXPECT_NE(s.status().message().find(split_name(split)), std::string::npos) << s.status().to_string();
    }
    for (const char* group : {"all", "retrieval", "multi-hop", "aggregation"}) {
      const auto names = parse_task_list(group);
      ASSERT_TRUE(names.ok());
      EXPECT_EQ(std::find(names->begin(), names->end(), task), names->end()) << group << " lists " << task;
    }
  }
}

TEST(EvalTasks, CopyStringsDrawEveryKindCountAndOrder) {
  std::set<int64_t> kinds, counts;
  std::set<std::pair<int64_t, int64_t>> placed_asked;
  int reordered = 0;
  for (int64_t index = 0; index < 200; ++index) {
    const Sample s = make("copy_strings", Split::kTrain, 1024, index, count_whitespace_tokens);
    ASSERT_TRUE(check_answers(s)) << "#" << index;
    const int64_t placed = s.params.at("num_strings"), asked = s.params.at("num_asked");
    EXPECT_TRUE(placed >= 1 && placed <= 4 && asked >= 1 && asked <= placed) << placed << " " << asked;
    placed_asked.emplace(placed, asked);
    counts.insert(asked);
    for (int64_t j = 0; j < asked; ++j) kinds.insert(s.params.at("asked_kind_" + std::to_string(j)));
    // The question's order, not the prompt's: some samples ask for a later string first.
    for (size_t j = 1; j < s.answers.size(); ++j) reordered += s.prompt.find(s.answers[j]) < s.prompt.find(s.answers[j - 1]);
    std::string joined;
    for (const auto& a : s.answers) joined += (joined.empty() ? " " : ", ") + a;
    EXPECT_EQ(s.completion, joined + ".");
  }
  EXPECT_EQ(kinds, (std::set<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(counts, (std::set<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(placed_asked.size(), 10u) << "every (placed, asked) pair with 1 <= asked <= placed <= 4";
  EXPECT_GT(reordered, 10);
}

// Where four long records under long labels do not fit the budget, the last drawn are dropped (the unasked
// ones first) and the sample stays consistent; a budget too small for one record is an error.
TEST(EvalTasks, CopyStringsDropRecordsThatOutgrowTheBudget) {
  int dropped = 0;
  for (int64_t index = 0; index < 40 && dropped < 3; ++index) {
    const Sample full = make("copy_strings", Split::kTrain, 2048, index, count_whitespace_tokens);
    if (full.params.at("num_strings") < 3) continue;
    // The same draws (the reserve is no part of the seed) with a budget one token short of the bare prompt.
    const int64_t bare = full.prompt_tokens - full.haystack_units;
    SampleRequest r{"copy_strings", Split::kTrain, 2048, 17, index, std::nullopt, 2048 - (bare - 1)};
    auto s = generate_sample(r, count_whitespace_tokens);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ++dropped;
    EXPECT_LT(s->params.at("num_strings"), full.params.at("num_strings"));
    EXPECT_LE(s->prompt_tokens, s->token_budget);
    EXPECT_TRUE(check_answers(*s)) << "#" << index;
    // The kept answers are the full sample's, minus dropped records, in the same order.
    std::vector<std::string> kept;
    for (const auto& a : full.answers) {
      if (std::find(s->answers.begin(), s->answers.end(), a) != s->answers.end()) kept.push_back(a);
    }
    EXPECT_EQ(kept, s->answers);
    SampleRequest tiny{"copy_strings", Split::kTrain, 2048, 17, index, std::nullopt, 2048 - 20};
    auto t = generate_sample(tiny, count_whitespace_tokens);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("without any filler"), std::string::npos) << t.status().to_string();
  }
  EXPECT_EQ(dropped, 3);
}

TEST(EvalTasks, HopDrillDrawsLuresAndDistractorChains) {
  std::set<std::pair<int64_t, int64_t>> lures;
  std::set<int64_t> chains;
  std::set<int64_t> x_nouns;
  for (int64_t index = 0; index < 100; ++index) {
    const Sample s = make("hop_drill", Split::kTrain, 1024, index, count_whitespace_tokens);
    ASSERT_TRUE(check_answers(s)) << "#" << index;
    lures.emplace(s.params.at("lure_one_hop"), s.params.at("lure_double_x"));
    chains.insert(s.params.at("num_chains"));
    x_nouns.insert(s.params.at("x_noun"));
    EXPECT_EQ(std::count_if(s.needles.begin(), s.needles.end(), [](const auto& n) { return n.queried; }), 2);
  }
  EXPECT_EQ(lures.size(), 4u) << "both lures, either, or none";
  EXPECT_EQ(chains, (std::set<int64_t>{1, 2, 3}));
  EXPECT_GE(x_nouns.size(), 30u) << "relations drawn per sample";
}

// vt_lookup: 3-8 chains of 0 or 1 hops, every shape drawn; the answer is the asked value's chain (1 or 2
// names, found by following the parsed statements); one chain of the prompt is the queried one.
TEST(EvalTasks, VtLookupDrawsManyShortChains) {
  std::set<int64_t> chains, hops;
  for (int64_t index = 0; index < 100; ++index) {
    const Sample s = make("vt_lookup", Split::kTrain, 768, index, count_whitespace_tokens);
    ASSERT_TRUE(check_answers(s)) << "#" << index;
    chains.insert(s.params.at("num_chains"));
    hops.insert(s.params.at("num_hops"));
    EXPECT_EQ(static_cast<int64_t>(s.answers.size()), s.params.at("num_hops") + 1) << "#" << index;
    EXPECT_EQ(std::count_if(s.needles.begin(), s.needles.end(), [](const auto& n) { return n.queried; }),
              s.params.at("num_hops") + 1);
  }
  EXPECT_EQ(chains, (std::set<int64_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(hops, (std::set<int64_t>{0, 1}));
}

TEST(EvalTasks, RejectsBadRequests) {
  auto expect_error = [](SampleRequest r, const char* fragment, TokenCounter c = count_whitespace_tokens) {
    auto s = generate_sample(r, c);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_NE(s.status().message().find(fragment), std::string::npos) << s.status().to_string();
  };
  expect_error({"nope", Split::kEval, 4096, 0, 0, std::nullopt, std::nullopt}, "unknown task");
  expect_error({"vt", Split::kEval, 0, 0, 0, std::nullopt, std::nullopt}, "target length");
  expect_error({"vt", Split::kEval, 4096, kMaxUserSeed, 0, std::nullopt, std::nullopt}, "seed");
  expect_error({"vt", Split::kEval, 4096, 0, -1, std::nullopt, std::nullopt}, "index");
  expect_error({"vt", Split::kEval, 4096, 0, 0, 1.5, std::nullopt}, "depth");
  expect_error({"vt", Split::kEval, 4096, 0, 0, std::nan(""), std::nullopt}, "depth");
  expect_error({"vt", Split::kEval, 4096, 0, 0, std::nullopt, int64_t{4096}}, "reserv");
  expect_error({"vt", Split::kEval, 4096, 0, 0, std::nullopt, int64_t{-1}}, "reserve");
  expect_error({"cwe", Split::kEval, 150, 0, 0, std::nullopt, std::nullopt}, "without any filler");
  expect_error({"vt", Split::kEval, 4096, 0, 0, std::nullopt, std::nullopt}, "token counter", TokenCounter());
  expect_error({"vt", Split::kEval, 4096, 0, 0, std::nullopt, std::nullopt}, "returned -3",
               [](std::string_view) -> int64_t { return -3; });
}

TEST(EvalTasks, ParsesTaskAndLengthLists) {
  auto all = parse_task_list("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 13u);
  auto named = parse_task_list("copy_strings, hop_drill,vt");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(*named, (std::vector<std::string>{"copy_strings", "hop_drill", "vt"}));
  auto agg = parse_task_list("aggregation, vt");
  ASSERT_TRUE(agg.ok());
  EXPECT_EQ(*agg, (std::vector<std::string>{"cwe", "fwe", "vt"}));
  EXPECT_FALSE(parse_task_list("vt,vt").ok());
  EXPECT_FALSE(parse_task_list("vt,,cwe").ok());
  EXPECT_FALSE(parse_task_list("retrieval,niah_single_1").ok());  // duplicate through the group
  EXPECT_FALSE(parse_task_list("bogus").ok());

  auto lens = parse_lengths("2k,4K,100,1m");
  ASSERT_TRUE(lens.ok());
  EXPECT_EQ(*lens, (std::vector<int64_t>{2048, 4096, 100, 1048576}));
  EXPECT_FALSE(parse_lengths("2k,2048").ok());
  EXPECT_FALSE(parse_lengths("0").ok());
  EXPECT_FALSE(parse_lengths("4kb").ok());
  EXPECT_FALSE(parse_lengths("k").ok());
  EXPECT_FALSE(parse_lengths("-5").ok());
  EXPECT_FALSE(parse_lengths("99999999999").ok());
}

TEST(EvalTasks, WhitespaceCounter) {
  EXPECT_EQ(count_whitespace_tokens(""), 0);
  EXPECT_EQ(count_whitespace_tokens("   "), 0);
  EXPECT_EQ(count_whitespace_tokens("a"), 1);
  EXPECT_EQ(count_whitespace_tokens(" a  b\nc\t"), 3);
}

}  // namespace
}  // namespace kascade::eval
