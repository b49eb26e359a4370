// eval/templates.h — the phrasings of every task, per split, and the placeholder formatter.
//
// Each split owns its phrasings (instruction, needle / statement / fact sentences, question,
// answer prefix) and its noise sentences; no phrasing is shared between splits, so a model
// trained on the train split never saw the eval wording. Eval uses RULER's own templates
// (scripts/data/synthetic/constants.py) where RULER has the task; train has several variants per
// task so that a model learns the task rather than one wording (niah, vt and multihop_qa: the product
// of needle / statement / fact sentence patterns, instructions and questions, built once on first use,
// with words drawn per sample into their {adj}, {kw}, {place} and {role} placeholders); dev has one.
// Placeholders are {name}; format_template() substitutes them.
// Tested by tests/unit/eval/test_splits.cpp (disjointness, every placeholder resolves).
#pragma once

#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kascade/status.h"
#include "kascade/tasks.h"

namespace kascade::eval {

// Replaces every {name} of `tmpl` by its value; fails on a placeholder without a value or an
// unterminated brace.
using TemplateVars = std::span<const std::pair<std::string_view, std::string_view>>;
Result<std::string> format_template(std::string_view tmpl, TemplateVars vars);

// niah_*: {types} "numbers"/"uuids", {type} singular, {key}, {value}, {query}; train phrasings also
// {adj} / {Adj} (capitalised), one of niah_train_adjectives() per sample, in every field.
struct NiahPhrasing {
  std::string_view instruction;    // {types} ({adj} {Adj})
  std::string_view needle;         // {type} {types} {key} {value} ({adj} {Adj}); the key before the value
  std::string_view question;       // {types} {query} ({adj})
  std::string_view answer_prefix;  // {types} {query} ({adj}); starts with a space
};

// vt: a value statement {var} <- {value}, a copy statement {var} <- {src}; train styles may also
// hold {kw} and {op}, drawn per sample.
struct VtPhrasing {
  std::string_view instruction;
  std::string_view assign_value;   // {var} {value}
  std::string_view assign_var;     // {var} {src}
  std::string_view question;       // {query}
  std::string_view answer_prefix;  // {num} {query}
};

struct CwePhrasing {
  std::string_view instruction;
  std::string_view item;           // {i} {word}
  std::string_view question;       // {num}
  std::string_view answer_prefix;  // {num}
};

struct FwePhrasing {
  std::string_view instruction;
  std::string_view question;
  std::string_view answer_prefix;
};

struct KvPhrasing {
  std::string_view instruction;
  std::string_view question;       // {key}
  std::string_view answer_prefix;
};

// multihop_qa: {country} -> {city} -> {person}; most train phrasings also name the relations with
// {place} and {role}, drawn per sample (draw_fact_train_relations).
struct FactPhrasing {
  std::string_view instruction;
  std::string_view first_fact;     // {country} {city} ({place})
  std::string_view second_fact;    // {city} {person} ({role})
  std::string_view question;       // {country} ({place} {role})
  std::string_view answer_prefix;  // {country} ({place} {role})
};

std::span<const NiahPhrasing> niah_phrasings(Split split);
// Train split only: the adjectives of the {adj} placeholder ("the archived number for ...", also a few
// of two words: "the long forgotten number"), one per
// sample, so that a model learns to find the asked key whatever the needles are called; none is a
// word of a dev or eval needle ("special magic", "secret").
std::span<const std::string_view> niah_train_adjectives();
std::span<const VtPhrasing> vt_phrasings(Split split);
// Train split only: the keywords a vt statement style with a {kw} placeholder draws from, one per
// sample ("DIM ABCDE = DIM FGHIJ."), so that the model learns the chain, not a keyword. None has 5
// letters (variable names do) and none is the eval or dev syntax (VAR, LET).
std::span<const std::string_view> vt_train_keywords();
// Train split only: the operators a vt statement style with an {op} placeholder draws from, one per
// sample ("ABCDE gets FGHIJ."): lower-case words or symbols, never the eval "=" or the dev "BE".
std::span<const std::string_view> vt_train_operators();
// Train split only: the upper-case operator words of the {uop} styles, one per sample ("ABCDE GETS FGHIJ."): 2-4
// letters (a variable name has 5), target first (none of TO / IN / INTO), never the dev "BE" or VAR, LET.
std::span<const std::string_view> vt_train_word_operators();
std::span<const CwePhrasing> cwe_phrasings(Split split);
std::span<const FwePhrasing> fwe_phrasings(Split split);
std::span<const KvPhrasing> kv_phrasings(Split split);
std::span<const FactPhrasing> fact_phrasings(Split split);
// The lower-cased words of a template's literal text: placeholders ({city}) and the function words "the", "of",
// "is", "in", "to", "a" skipped. What the splits' vocabularies are checked against.
std::set<std::string> literal_words(std::string_view text);
// Train split only: the words a fact relation is composed of — a place is an optional modifier and a
// noun ("northern" + "garrison", "" + "spa town"), a role likewise ("chief" + "astronomer"). Each list holds
// first `curated` hand-picked words that suit a realm, then the train split's open vocabulary (its wonderwords
// adjectives as modifiers, its nouns as nouns: "brave" + "lamp"), which draw_relation_word takes half the time,
// so that a model learns to copy a relation from the question rather than recall it from a short list. No word
// of either part is a word of a dev or eval fact ("capital", "mayor", "largest port", "harbour master").
struct RelationWordList {
  std::vector<std::string_view> words;  // the curated words, then the open vocabulary
  size_t curated = 0;
};
struct FactRelationWords {
  RelationWordList place_modifiers, place_nouns, role_modifiers, role_nouns;
};
const FactRelationWords& fact_train_relation_words();
// "modifier noun", or the noun alone when the modifier is empty.
std::string compose_relation(std::string_view modifier, std::string_view noun);

// ---- train-only tasks (copy curriculum; no dev or eval phrasings, so these accessors take no split) ----
// copy_strings: records "{label}" -> "{value}"; {thing} / {things} name the strings ("code" / "codes"), one of
// copy_train_things() per sample; {query} the asked labels in the order their strings are to be copied.
struct CopyPhrasing {
  std::string_view instruction;    // {things}
  std::string_view record;         // {thing} {label} {value}; the label before the value, nothing after the value but "."
  std::string_view question;       // {thing} {things} {query}
  std::string_view answer_prefix;  // ({thing} {things}); starts with a space
};
// Every instruction x record x question pattern (built once).
std::span<const CopyPhrasing> copy_train_phrasings();
// The {thing} of a sample; every plural is the word + "s".
std::span<const std::string_view> copy_train_things();
// hop_drill: facts "{subject}'s {rel} is {object}" between invented persons; the question asks for the {y} of the
// {x} of {subject}. One fact pattern per sample, for every fact and for the completion's restatement.
struct HopPhrasing {
  std::string_view instruction;
  std::string_view fact;           // {subject} {rel} {object}
  std::string_view question;       // {subject} {x} {y}
  std::string_view answer_prefix;  // ({subject} {x} {y}); starts with a space
};
std::span<const HopPhrasing> hop_train_phrasings();
// The words a hop relation is composed of: an optional modifier (the fact relations' role modifiers) and a noun
// of kinship or acquaintance ("elder" + "cousin"), each half the time from the train split's open vocabulary
// (draw_relation_word); no word of a dev or eval fact.
struct HopRelationWords {
  RelationWordList modifiers, nouns;
};
const HopRelationWords& hop_train_relation_words();

// The noise sentences of the split, repeated as a haystack (eval: RULER's "The grass is green. ..."; dev: another
// 5-sentence cycle; train: 128 runs of short cycles of train-book or grammar sentences repeated, and of unrepeated
// grammar sentences, so that no one kind of filler can be learnt: compose_train_noise in templates.cpp).
std::string_view noise_sentences(Split split);

// The word fwe uses as its top-ranked noise (the dots every fwe template tells the model to ignore).
inline constexpr std::string_view kFweNoiseWord = "....";

}  // namespace kascade::eval
