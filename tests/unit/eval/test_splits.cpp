// tests/unit/eval/test_splits.cpp — train, dev and eval are disjoint in seeds, templates and
// vocabularies: the effective seed ranges never meet; every phrasing belongs to one split and no
// distinctive fragment of one split's phrasings (4+ words) shows up in another split's phrasings
// or generated prompts; word lists, variable names, coded words, synthetic names, noise sentences
// and books are split-specific, checked on the lists and on generated samples; the words drawn into
// the train phrasings per sample (niah adjectives, fact relations, the train-only tasks' {thing} and hop
// relations) are no word of a dev or eval needle or fact, and the drawn ones are the ones the train
// prompts carry. The train-only tasks' phrasings and samples count as the train split's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "eval/templates.h"
#include "eval/vocab.h"
#include "eval/word_stream.h"
#include "kascade/tasks.h"

namespace kascade::eval {
namespace {

constexpr Split kSplits[] = {Split::kTrain, Split::kDev, Split::kEval};

TEST(EvalSplits, SeedRangesAreDisjoint) {
  for (const Split a : kSplits) {
    const SeedRange ra = split_seed_range(a);
    EXPECT_EQ(ra.end - ra.begin, kMaxUserSeed);
    for (const Split b : kSplits) {
      if (a == b) continue;
      const SeedRange rb = split_seed_range(b);
      EXPECT_TRUE(ra.end <= rb.begin || rb.end <= ra.begin) << split_name(a) << " vs " << split_name(b);
    }
    for (const uint64_t s : {uint64_t{0}, uint64_t{12345}, kMaxUserSeed - 1}) {
      auto e = effective_seed(a, s);
      ASSERT_TRUE(e.ok());
      EXPECT_GE(*e, ra.begin);
      EXPECT_LT(*e, ra.end);
    }
    EXPECT_FALSE(effective_seed(a, kMaxUserSeed).ok());
  }
  EXPECT_EQ(*parse_split("dev"), Split::kDev);
  EXPECT_FALSE(parse_split("test").ok());
}

// Every phrasing string of a split, by task family.
std::vector<std::string_view> phrasings_of(Split split) {
  std::vector<std::string_view> v;
  for (const auto& p : niah_phrasings(split)) v.insert(v.end(), {p.instruction, p.needle, p.question, p.answer_prefix});
  for (const auto& p : vt_phrasings(split)) {
    v.insert(v.end(), {p.instruction, p.assign_value, p.assign_var, p.question, p.answer_prefix});
  }
  for (const auto& p : cwe_phrasings(split)) v.insert(v.end(), {p.instruction, p.item, p.question, p.answer_prefix});
  for (const auto& p : fwe_phrasings(split)) v.insert(v.end(), {p.instruction, p.question, p.answer_prefix});
  for (const auto& p : kv_phrasings(split)) v.insert(v.end(), {p.instruction, p.question, p.answer_prefix});
  for (const auto& p : fact_phrasings(split)) {
    v.insert(v.end(), {p.instruction, p.first_fact, p.second_fact, p.question, p.answer_prefix});
  }
  if (split == Split::kTrain) {  // the train-only tasks' phrasings
    for (const auto& p : copy_train_phrasings()) v.insert(v.end(), {p.instruction, p.record, p.question, p.answer_prefix});
    for (const auto& p : hop_train_phrasings()) v.insert(v.end(), {p.instruction, p.fact, p.question, p.answer_prefix});
  }
  v.push_back(noise_sentences(split));
  return v;
}

// The literal pieces of a template between placeholders that have at least 4 words.
std::vector<std::string> distinctive_fragments(std::string_view tmpl) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
    if (b != std::string::npos) {
      const std::string f = cur.substr(b, e - b + 1);
      if (count_whitespace_tokens(f) >= 4) out.push_back(f);
    }
    cur.clear();
  };
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{') {
      flush();
      i = tmpl.find('}', i);
    } else {
      cur.push_back(tmpl[i]);
    }
  }
  flush();
  return out;
}

TEST(EvalSplits, EveryTemplateFormats) {
  const std::pair<std::string_view, std::string_view> all_vars[] = {
      {"types", "numbers"}, {"type", "number"}, {"key", "k"},   {"value", "1"},   {"query", "q"},
      {"var", "ABCDE"},     {"src", "FGHIJ"},   {"num", "5"},   {"i", "3"},       {"word", "w"},
      {"country", "Zorvia"}, {"city", "Melkat"}, {"person", "Tirona Vask"}, {"kw", "DIM"},
      {"adj", "hidden"},    {"Adj", "Hidden"},  {"op", "gets"},  {"uop", "GETS"}, {"place", "spa town"}, {"role", "chief judge"},
      {"thing", "code"},    {"things", "codes"}, {"label", "quiet-harbor"}, {"subject", "Balo Kesrook"},
      {"object", "Tevo Zanberg"}, {"rel", "elder cousin"}, {"x", "mentor"}, {"y", "sister"}};
  for (const Split split : kSplits) {
    EXPECT_FALSE(niah_phrasings(split).empty());
    EXPECT_FALSE(vt_phrasings(split).empty());
    EXPECT_FALSE(cwe_phrasings(split).empty());
    EXPECT_FALSE(fwe_phrasings(split).empty());
    EXPECT_FALSE(kv_phrasings(split).empty());
    EXPECT_FALSE(fact_phrasings(split).empty());
    for (const auto t : phrasings_of(split)) {
      auto f = format_template(t, all_vars);
      ASSERT_TRUE(f.ok()) << t << ": " << f.status().to_string();
      EXPECT_EQ(f->find_first_of("{}\n"), std::string::npos) << t;
    }
  }
  const std::pair<std::string_view, std::string_view> one[] = {{"a", "x"}};
  EXPECT_EQ(*format_template("<{a}{a}>", one), "<xx>");
  EXPECT_FALSE(format_template("{b}", one).ok());
  EXPECT_FALSE(format_template("{a", one).ok());
  EXPECT_FALSE(format_template("a}", one).ok());
}

TEST(EvalSplits, TemplatesAreDisjoint) {
  for (const Split a : kSplits) {
    for (const Split b : kSplits) {
      if (a == b) continue;
      const auto pa = phrasings_of(a);
      const auto pb = phrasings_of(b);
      for (const auto ta : pa) {
        for (const auto tb : pb) {
          EXPECT_NE(ta, tb) << split_name(a) << " and " << split_name(b) << " share a phrasing";
          for (const auto& frag : distinctive_fragments(ta)) {
            EXPECT_EQ(tb.find(frag), std::string_view::npos)
                << "\"" << frag << "\" of " << split_name(a) << " appears in " << split_name(b) << ": " << tb;
          }
        }
      }
    }
  }
}

std::vector<Sample> samples_of(Split split) {
  std::vector<Sample> out;
  std::vector<TaskInfo> tasks = task_catalog();
  if (split == Split::kTrain) tasks.insert(tasks.end(), train_only_task_catalog().begin(), train_only_task_catalog().end());
  for (const auto& t : tasks) {
    for (int64_t index = 0; index < 4; ++index) {
      SampleRequest r{std::string(t.name), split, 1200, 3, index, std::nullopt, std::nullopt};
      auto s = generate_sample(r, count_whitespace_tokens);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      if (s.ok()) out.push_back(std::move(*s));
    }
  }
  return out;
}

TEST(EvalSplits, PromptsCarryNoOtherSplitsPhrasing) {
  std::map<Split, std::vector<Sample>> samples;
  for (const Split s : kSplits) samples[s] = samples_of(s);
  for (const Split a : kSplits) {
    std::vector<std::string> fragments;
    for (const auto t : phrasings_of(a)) {
      for (auto& f : distinctive_fragments(t)) fragments.push_back(std::move(f));
    }
    // Each split's own prompts do use its phrasings (the check below can fail).
    size_t own_hits = 0;
    for (const auto& s : samples[a]) {
      for (const auto& f : fragments) own_hits += s.prompt.find(f) != std::string::npos;
    }
    EXPECT_GT(own_hits, samples[a].size());
    for (const Split b : kSplits) {
      if (a == b) continue;
      for (const auto& s : samples[b]) {
        for (const auto& f : fragments) {
          EXPECT_EQ(s.prompt.find(f), std::string::npos)
              << split_name(a) << " fragment \"" << f << "\" in a " << split_name(b) << " " << s.task << " prompt";
        }
      }
    }
  }
}

// literal_words (templates.h) extracts the words compared below; it is checked on its own first.
TEST(EvalSplits, LiteralWordsSkipPlaceholdersAndFunctionWords) {
  EXPECT_EQ(literal_words("The harbour Master of {city} is {person}."), (std::set<std::string>{"harbour", "master"}));
  EXPECT_EQ(literal_words("{country}"), std::set<std::string>{});
  EXPECT_EQ(literal_words("a seat-of parliament"), (std::set<std::string>{"seat", "parliament"}));
  EXPECT_EQ(literal_words("Royal {seat"), std::set<std::string>{"royal"}) << "an unclosed placeholder ends the text";
}

TEST(EvalSplits, TrainDrawnWordsAreNoDevOrEvalNeedleOrFactWords) {
  std::set<std::string> needle_words, fact_words;
  for (const Split split : {Split::kDev, Split::kEval}) {
    for (const auto& p : niah_phrasings(split)) needle_words.merge(literal_words(p.needle));
    for (const auto& p : fact_phrasings(split)) {
      fact_words.merge(literal_words(p.first_fact));
      fact_words.merge(literal_words(p.second_fact));
    }
  }
  // The extraction sees the words that matter (so the checks below can fail).
  for (const char* w : {"special", "magic", "secret"}) EXPECT_TRUE(needle_words.count(w)) << w;
  for (const char* w : {"capital", "mayor", "largest", "port", "harbour", "master"}) EXPECT_TRUE(fact_words.count(w)) << w;
  ASSERT_GE(niah_train_adjectives().size(), 20u);
  for (const auto adj : niah_train_adjectives()) {
    EXPECT_FALSE(adj.empty());
    for (const auto& w : literal_words(adj)) EXPECT_FALSE(needle_words.count(w)) << "train adjective " << adj;
  }
  const FactRelationWords& r = fact_train_relation_words();
  for (const RelationWordList* list : {&r.place_modifiers, &r.place_nouns, &r.role_modifiers, &r.role_nouns}) {
    EXPECT_GE(list->words.size(), list->curated + 300) << "the open vocabulary follows the curated words";
    for (const auto phrase : list->words) {
      for (const auto& w : literal_words(phrase)) EXPECT_FALSE(fact_words.count(w)) << "train relation word " << phrase;
    }
  }
  // copy_strings' {thing}: no word of a dev or eval needle; hop_drill's relations: no word of a dev or eval fact.
  ASSERT_GE(copy_train_things().size(), 12u);
  for (const auto thing : copy_train_things()) {
    for (const auto& w : literal_words(thing)) EXPECT_FALSE(needle_words.count(w)) << "copy thing " << thing;
  }
  const HopRelationWords& hop = hop_train_relation_words();
  for (const RelationWordList* list : {&hop.modifiers, &hop.nouns}) {
    EXPECT_GE(list->words.size(), list->curated + 300) << "the open vocabulary follows the curated words";
    for (const auto phrase : list->words) {
      for (const auto& w : literal_words(phrase)) EXPECT_FALSE(fact_words.count(w)) << "hop relation word " << phrase;
    }
  }
  // vt operators: no upper-case letter (a variable name is 5 of them), never the eval "=" or the dev "BE".
  std::set<std::string> vt_words;
  for (const Split split : {Split::kDev, Split::kEval}) {
    for (const auto& p : vt_phrasings(split)) vt_words.merge(literal_words(p.assign_var));
  }
  EXPECT_TRUE(vt_words.count("var") && vt_words.count("let") && vt_words.count("be"));
  ASSERT_GE(vt_train_operators().size(), 10u);
  for (const auto op : vt_train_operators()) {
    EXPECT_NE(op, "=");
    EXPECT_EQ(std::count_if(op.begin(), op.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); }), 0) << op;
    for (const auto& w : literal_words(op)) EXPECT_FALSE(vt_words.count(w)) << "train operator " << op;
  }
  // vt word operators ({uop}): upper case, 2-4 letters (a variable name has 5), never the dev "BE" or VAR / LET, and
  // none of the source-first words of "ASSIGN src TO var", "COPY src INTO var", "SAVE src IN var".
  ASSERT_GE(vt_train_word_operators().size(), 20u);
  for (const auto op : vt_train_word_operators()) {
    EXPECT_TRUE(op.size() >= 2 && op.size() <= 4) << op;
    EXPECT_TRUE(std::all_of(op.begin(), op.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) << op;
    for (const std::string_view banned : {"BE", "VAR", "LET", "TO", "IN", "INTO"}) EXPECT_NE(op, banned);
  }
  EXPECT_GE(r.place_modifiers.curated * r.place_nouns.curated, 200u);
  EXPECT_GE(r.role_modifiers.curated * r.role_nouns.curated, 150u);
  EXPECT_EQ(compose_relation("", "spa town"), "spa town");
  EXPECT_EQ(compose_relation("northern", "garrison"), "northern garrison");
}

TEST(EvalSplits, TrainPromptsCarryTheirDrawnWords) {
  std::set<int64_t> adjectives, place_nouns, role_nouns;
  int curated_roles = 0, open_roles = 0;
  for (int64_t index = 0; index < 24; ++index) {
    for (const std::string task : {"niah_single_2", "niah_multivalue", "niah_multikey_3"}) {
      SampleRequest req{task, Split::kTrain, 800, 5, index, std::nullopt, std::nullopt};
      auto s = generate_sample(req, count_whitespace_tokens);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      ASSERT_TRUE(s->params.contains("adjective")) << task;
      const int64_t a = s->params.at("adjective");
      adjectives.insert(a);
      const std::string adj(niah_train_adjectives()[static_cast<size_t>(a)]);
      for (const auto& n : s->needles) {
        std::string lower = n.text;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        EXPECT_NE(lower.find(adj + " "), std::string::npos) << task << ": '" << adj << "' not in " << n.text;
      }
    }
    SampleRequest req{"multihop_qa", Split::kTrain, 800, 5, index, std::nullopt, std::nullopt};
    auto s = generate_sample(req, count_whitespace_tokens);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    if (!s->params.contains("place_noun")) continue;
    const FactRelationWords& r = fact_train_relation_words();
    const auto idx = [&](const char* p) { return static_cast<size_t>(s->params.at(p)); };
    const std::string place =
        compose_relation(r.place_modifiers.words[idx("place_modifier")], r.place_nouns.words[idx("place_noun")]);
    const std::string role =
        compose_relation(r.role_modifiers.words[idx("role_modifier")], r.role_nouns.words[idx("role_noun")]);
    place_nouns.insert(s->params.at("place_noun"));
    role_nouns.insert(s->params.at("role_noun"));
    (idx("role_noun") < r.role_nouns.curated ? curated_roles : open_roles) += 1;
    // The 3 hand-written phrasings name their own relations; the patterns name the drawn ones.
    if (s->template_id >= 3) {
      EXPECT_NE(s->prompt.find(place), std::string::npos) << place;
      EXPECT_NE(s->prompt.find(role), std::string::npos) << role;
    }
  }
  EXPECT_GE(adjectives.size(), 12u) << "the adjective is drawn per sample";
  EXPECT_GE(place_nouns.size(), 8u);
  EXPECT_GE(role_nouns.size(), 8u);
  // Both halves of a relation list are drawn (24 samples: each side at least 4 times, p < 1e-3 to fail by chance).
  EXPECT_GE(curated_roles, 4) << "curated role nouns drawn";
  EXPECT_GE(open_roles, 4) << "open-vocabulary role nouns drawn";
  for (const Split split : {Split::kDev, Split::kEval}) {
    SampleRequest req{"niah_single_2", split, 800, 5, 0, std::nullopt, std::nullopt};
    auto s = generate_sample(req, count_whitespace_tokens);
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE(s->params.contains("adjective")) << split_name(split);
  }
}

TEST(EvalSplits, WordListsAreDisjointAndLargeEnough) {
  std::map<std::string_view, Split> owner;
  for (const Split split : kSplits) {
    const SplitWords& w = split_words(split);
    EXPECT_GE(w.adjectives.size(), 100u) << split_name(split);
    EXPECT_GE(w.nouns.size(), 1000u) << split_name(split);
    EXPECT_GE(w.verbs.size(), 50u) << split_name(split);
    for (const auto* list : {&w.adjectives, &w.nouns, &w.verbs}) {
      for (const auto word : *list) {
        auto [it, inserted] = owner.emplace(word, split);
        EXPECT_TRUE(inserted) << word << " is in " << split_name(it->second) << " and " << split_name(split);
      }
    }
  }
}

TEST(EvalSplits, SampleVocabulariesBelongToTheirSplit) {
  for (const Split split : kSplits) {
    const SplitWords& w = split_words(split);
    std::set<std::string_view> words(w.adjectives.begin(), w.adjectives.end());
    words.insert(w.nouns.begin(), w.nouns.end());
    words.insert(w.verbs.begin(), w.verbs.end());
    const auto& onsets = name_onsets(split);
    for (const auto& s : samples_of(split)) {
      if (s.task == "vt" || s.task == "vt_lookup") {
        for (const auto& a : s.answers) EXPECT_TRUE(is_split_variable_name(a, split)) << a;
      } else if (s.task == "fwe") {
        for (const auto& a : s.answers) EXPECT_TRUE(is_split_coded_word(a, split)) << a;
      } else if (s.task == "cwe") {
        for (const auto& a : s.answers) EXPECT_TRUE(words.count(a)) << a;
      } else if (s.task == "copy_strings") {
        // Labels are the split's word keys; invented names and variable names are the split's.
        for (const auto& n : s.needles) {
          bool label_found = false;
          for (size_t dash = n.text.find('-'); dash != std::string::npos && !label_found; dash = n.text.find('-', dash + 1)) {
            const size_t b = n.text.find_last_of(" ,", dash) + 1, e = n.text.find_first_of(" ,:", dash);
            const std::string adjective = n.text.substr(b, dash - b), noun = n.text.substr(dash + 1, e - dash - 1);
            label_found = words.count(adjective) && words.count(noun);
          }
          EXPECT_TRUE(label_found) << "no label of the split in " << n.text;
        }
      } else if (s.task == "multihop_qa" || s.task == "hop_drill") {
        for (const auto& a : s.answers) {
          EXPECT_TRUE(std::find(onsets.begin(), onsets.end(), a.substr(0, 3)) != onsets.end()) << a;
        }
      } else if (s.task.starts_with("niah_") && s.task != "niah_multikey_3") {
        // Word keys "adjective-noun" of the split, read from the needles.
        for (const auto& n : s.needles) {
          const size_t dash = n.text.find('-');
          ASSERT_NE(dash, std::string::npos);
          const size_t b = n.text.rfind(' ', dash) + 1;
          const size_t e = n.text.find_first_of(" :", dash);
          const std::string adjective = n.text.substr(b, dash - b), noun = n.text.substr(dash + 1, e - dash - 1);
          EXPECT_TRUE(words.count(adjective)) << adjective << " in " << n.text;
          EXPECT_TRUE(words.count(noun)) << noun << " in " << n.text;
        }
      }
    }
  }
}

TEST(EvalSplits, VariableNamesCodedWordsAndNamesPartition) {
  DetRng rng(77);
  for (const Split split : kSplits) {
    for (int i = 0; i < 200; ++i) {
      const std::string v = random_variable_name(rng, split);
      int owners = 0;
      for (const Split other : kSplits) owners += is_split_variable_name(v, other);
      EXPECT_EQ(owners, 1) << v;
      EXPECT_TRUE(is_split_variable_name(v, split)) << v;
      const std::string c = random_coded_word(rng, split);
      owners = 0;
      for (const Split other : kSplits) owners += is_split_coded_word(c, other);
      EXPECT_EQ(owners, 1) << c;
      EXPECT_TRUE(is_split_coded_word(c, split)) << c;
    }
    for (const auto o : name_onsets(split)) {
      EXPECT_EQ(o.size(), 3u) << o;
      for (const Split other : kSplits) {
        if (other == split) continue;
        const auto& os = name_onsets(other);
        EXPECT_EQ(std::find(os.begin(), os.end(), o), os.end()) << o;
      }
    }
  }
}

TEST(EvalSplits, HaystacksDiffer) {
  for (const Split a : kSplits) {
    for (const Split b : kSplits) {
      if (a == b) continue;
      EXPECT_NE(noise_sentences(a), noise_sentences(b));
      const WordStream& na = WordStream::get(a, HaystackKind::kNatural);
      const WordStream& nb = WordStream::get(b, HaystackKind::kNatural);
      // Phrases of 8 consecutive words of a's book (within one paragraph) never occur in b's.
      int checked = 0;
      for (int64_t start = 500; checked < 20 && start < na.period(); start += 997) {
        std::string phrase(na.word(start, 0));
        for (int64_t i = 1; i < 8; ++i) phrase.append(" ").append(na.word(start, i));
        if (!na.source_contains(phrase)) continue;  // crosses a paragraph break
        ++checked;
        EXPECT_FALSE(nb.source_contains(phrase)) << split_name(a) << " text in " << split_name(b) << ": " << phrase;
      }
      EXPECT_EQ(checked, 20);
    }
  }
}

}  // namespace
}  // namespace kascade::eval
