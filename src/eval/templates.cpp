// eval/templates.cpp — the per-split phrasings of every task (see templates.h). Eval: RULER's
// wording (niah, vt, cwe, fwe), the InfiniteBench / "lost in the middle" kv-retrieval wording, and
// our own fact relations; train and dev: our own rewordings, disjoint from eval and each other; the
// train-only tasks (copy_strings, hop_drill; vt_lookup uses vt's train phrasings) have train phrasings alone.
// Tested by tests/unit/eval/test_splits.cpp.
#include "eval/templates.h"

#include <array>
#include <cctype>
#include <span>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/rng.h"
#include "eval/vocab.h"
#include "eval/word_stream.h"

namespace kascade::eval {

Result<std::string> format_template(std::string_view tmpl, TemplateVars vars) {
  std::string out;
  out.reserve(tmpl.size() + 64);
  size_t i = 0;
  while (i < tmpl.size()) {
    const char c = tmpl[i];
    if (c == '}') return invalid_argument("template \"", tmpl, "\": '}' without '{' at offset ", i);
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    const size_t close = tmpl.find('}', i + 1);
    if (close == std::string_view::npos) {
      return invalid_argument("template \"", tmpl, "\": unterminated '{' at offset ", i);
    }
    const std::string_view name = tmpl.substr(i + 1, close - i - 1);
    bool found = false;
    for (const auto& [key, value] : vars) {
      if (key == name) {
        out.append(value);
        found = true;
        break;
      }
    }
    if (!found) return invalid_argument("template \"", tmpl, "\": no value for placeholder {", name, "}");
    i = close + 1;
  }
  return out;
}

namespace {

// ---- niah ---------------------------------------------------------------------------------------
constexpr std::array kNiahEval = {
    NiahPhrasing{"Some special magic {types} are hidden within the following text. Make sure to memorize it. "
                 "I will quiz you about the {types} afterwards.",
                 "One of the special magic {types} for {key} is: {value}.",
                 "What are all the special magic {types} for {query} mentioned in the provided text?",
                 " The special magic {types} for {query} mentioned in the provided text are"},
};
constexpr std::array kNiahDev = {
    NiahPhrasing{"A few secret {types} are tucked away in the text below. Keep track of them, because you "
                 "will be asked about them later.",
                 "The secret {type} assigned to {key} is {value}.",
                 "Which secret {types} were assigned to {query} in the text above?",
                 " The secret {types} assigned to {query} are"},
};
// Train: every instruction x needle x question pattern (niah_phrasings builds the product once); the
// {adj} / {Adj} of each is one of kNiahTrainAdjectives, drawn per sample. Every needle names the key
// before its value, with no full stop between them.
constexpr std::array<std::string_view, 6> kNiahTrainInstructions = {
    "The text below hides a few {adj} {types}. Read carefully and remember them; questions about the {types} "
    "follow.",
    "Somewhere in the following passage there are {adj} {types}. Memorize each of them, since you will need "
    "them at the end.",
    "{Adj} {types} appear inside the document that follows. Pay attention to them; you will be tested on the "
    "{types}.",
    "Below is a long text containing several {adj} {types}. Store them in memory for the question afterwards.",
    "This document mixes a handful of {adj} {types} into ordinary prose. Find them and keep them in mind.",
    "Watch for {adj} {types} in the passage below; a question about them comes at the end.",
};
constexpr std::array<std::string_view, 10> kNiahTrainNeedles = {
    "Note that the {adj} {type} for {key} is {value}.",
    "Remember this: {key} has the {adj} {type} {value}.",
    "The {adj} {type} linked to {key} reads {value}.",
    "{Adj} {type} of {key}: {value}.",
    "For {key} the {adj} {type} is {value}.",
    "{key} was given the {adj} {type} {value}.",
    "The {adj} {type} on file for {key} is {value}.",
    "Keep in mind that {key} carries the {adj} {type} {value}.",
    "In the records {key} holds the {adj} {type} {value}.",
    "The {adj} {type} belonging to {key} equals {value}.",
};
struct NiahQuestion {
  std::string_view question;
  std::string_view answer_prefix;
};
constexpr std::array kNiahTrainQuestions = {
    NiahQuestion{"What {adj} {types} does the text give for {query}?", " The {adj} {types} given for {query} are"},
    NiahQuestion{"Which {adj} {types} belong to {query} according to the passage?",
                 " The {adj} {types} belonging to {query} are"},
    NiahQuestion{"List every {adj} {type} linked to {query} in the document.", " The {adj} {types} linked to {query} are"},
    NiahQuestion{"What {adj} {types} are recorded for {query} in the text?", " The {adj} {types} recorded for {query} are"},
    NiahQuestion{"Give all the {adj} {types} of {query}.", " All the {adj} {types} of {query} are"},
    NiahQuestion{"Name each {adj} {type} that goes with {query}.", " The {adj} {types} that go with {query} are"},
};
constexpr std::array<std::string_view, 28> kNiahTrainAdjectives = {
    "hidden",   "reserved",     "code",     "key",      "private",  "stored",   "registered",
    "recorded", "listed",       "chosen",   "official", "personal", "designated", "protected",
    "confidential", "unique",   "archived", "tagged",   "lucky",    "marked",   "noted",
    "filed",    "logged",       "labelled", "well hidden", "long forgotten", "carefully stored", "rarely used",
};

// ---- vt -----------------------------------------------------------------------------------------
constexpr std::array kVtEval = {
    VtPhrasing{"Memorize and track the chain(s) of variable assignment hidden in the following text.",
               "VAR {var} = {value}.", "VAR {var} = VAR {src}.",
               "Question: Find all variables that are assigned the value {query} in the text above.",
               " Answer: According to the chain(s) of variable assignment in the text above, {num} variables "
               "are assigned the value {query}, they are:"},
};
constexpr std::array kVtDev = {
    VtPhrasing{"Follow the assignment chains hidden in the text below and keep track of every variable.",
               "LET {var} BE {value}.", "LET {var} BE {src}.",
               "Question: Which variables end up holding the number {query} in that passage?",
               " Answer: Following the assignments in the text above, {num} variables hold the number {query}, "
               "namely:"},
};
// Train: every statement style x instruction x question/answer wording (vt_phrasings builds the
// product once), so that a small model learns the chain structure rather than one syntax: the eval
// syntax (RULER's "VAR x = VAR y") and the dev syntax ("LET x BE y") are among none of them.
struct VtStatements {
  std::string_view assign_value;
  std::string_view assign_var;
};
constexpr std::array kVtTrainStatements = {
    VtStatements{"SET {var} = {value}.", "SET {var} = {src}."},
    VtStatements{"{var} := {value}.", "{var} := {src}."},
    VtStatements{"DEFINE {var} AS {value}.", "DEFINE {var} AS {src}."},
    VtStatements{"COPY {value} INTO {var}.", "COPY {src} INTO {var}."},
    VtStatements{"INT {var} = {value}.", "INT {var} = INT {src}."},
    VtStatements{"REG {var} = {value}.", "REG {var} = REG {src}."},
    VtStatements{"NUM {var} = {value}.", "NUM {var} = NUM {src}."},
    VtStatements{"{var} <- {value}.", "{var} <- {src}."},
    VtStatements{"SAVE {value} IN {var}.", "SAVE {src} IN {var}."},
    VtStatements{"ASSIGN {value} TO {var}.", "ASSIGN {src} TO {var}."},
    VtStatements{"{var} EQUALS {value}.", "{var} EQUALS {src}."},
    VtStatements{"MOV {var}, {value}.", "MOV {var}, {src}."},
    VtStatements{"PUT {value} IN {var}.", "PUT {src} IN {var}."},
    VtStatements{"{var} IS {value}.", "{var} IS {src}."},
    VtStatements{"{kw} {var} = {value}.", "{kw} {var} = {kw} {src}."},
    VtStatements{"{kw} {var} := {value}.", "{kw} {var} := {src}."},
    VtStatements{"{kw} {var} {value}.", "{kw} {var} {src}."},
    VtStatements{"{var} {op} {value}.", "{var} {op} {src}."},
    VtStatements{"{kw} {var} {op} {value}.", "{kw} {var} {op} {src}."},
    VtStatements{"{kw} {var} {uop} {value}.", "{kw} {var} {uop} {src}."},
    VtStatements{"{var} {uop} {value}.", "{var} {uop} {src}."},
    VtStatements{"{kw} {var} {uop} {value}.", "{kw} {var} {uop} {kw} {src}."},
};
// The {op} of the two {op} statement styles, one per sample (the target first, then the operator, then
// the source): lower-case words or symbols, so that none reads as a variable name, and neither the eval
// operator "=" nor the dev one "BE".
constexpr std::array<std::string_view, 16> kVtTrainOperators = {
    "gets", "takes", "holds", "receives", "becomes", "copies", "mirrors", "follows",
    "<=",   "::=",   "<<",    "=:",       ":",       "~",      "is set to", "now equals"};
// The {uop} of the three styles after them: upper-case words of 2-4 letters between the variable and its
// source ("DIM ABCDE GETS FGHIJ."), so that the model learns that a short capitalised word inside a statement is
// syntax, not a name: c24-c31 copied the dev operator into their answers ("VKTIV BE Q5142."). None has 5
// letters (variable names do); none is the dev "BE" or a word of the eval / dev syntax (VAR, LET); none reads
// source-first as TO / IN / INTO do in "ASSIGN src TO var", "COPY src INTO var".
constexpr std::array<std::string_view, 24> kVtTrainWordOperators = {
    "GETS", "HAS",  "IS",   "AS",   "EQ",   "WAS",  "GOT",  "USE",  "OF",   "BY",   "HOLD", "SEES",
    "KEEP", "GET",  "TAKE", "ARE",  "WILL", "MUST", "FROM", "NOW",  "LIKE", "SAME", "VIA",  "AKA"};
constexpr std::array<std::string_view, 40> kVtTrainKeywords = {
    "DIM",    "VAL",    "REF",    "OBJ",    "KEY",    "BOX",    "CELL",   "SLOT",   "ITEM",    "TERM",
    "NODE",   "UNIT",   "DATA",   "WORD",   "SYMBOL", "HANDLE", "BUFFER", "RECORD", "VECTOR",  "STRING",
    "NUMBER", "GLOBAL", "STATIC", "AUTO",   "PTR",    "ARG",    "TMP",    "ACC",    "MEM",     "BIT",
    "HEX",    "TAG",    "MARKER", "HOLDER", "SIGNAL", "PORT",   "WIRE",   "LINK",   "CHANNEL", "REGISTER",
};
constexpr std::array<std::string_view, 4> kVtTrainInstructions = {
    "Keep track of the variable assignments scattered through the following text.",
    "The following text contains chains of assignments. Track which variable receives which value.",
    "Variables are defined throughout the text below; remember how their values pass from one to another.",
    "Trace the chains of copies hidden in the following text.",
};
struct VtQuestion {
  std::string_view question;
  std::string_view answer_prefix;
};
constexpr std::array kVtTrainQuestions = {
    VtQuestion{"Question: List all variables whose value is {query} once every assignment is done.",
               " Answer: Tracing the assignments in the text above, {num} variables have the value {query}:"},
    VtQuestion{"Question: Name every variable that ends up equal to {query}.",
               " Answer: {num} variables end up equal to {query}:"},
    VtQuestion{"Question: Which variables are defined as {query}, directly or through other variables?",
               " Answer: The {num} variables defined as {query} are:"},
    VtQuestion{"Question: Which variables contain {query} after all the copies are made?",
               " Answer: After all the copies, {num} variables contain {query}:"},
    VtQuestion{"Question: Give every variable that holds {query} at the end.",
               " Answer: Following each chain in the text above, {num} variables hold {query}. They are:"},
};

// ---- cwe ----------------------------------------------------------------------------------------
constexpr std::array kCweEval = {
    CwePhrasing{"Below is a numbered list of words. In these words, some appear more often than others. "
                "Memorize the ones that appear most often.",
                "{i}. {word}", "Question: What are the {num} most common words in the above list?",
                " Answer: The top {num} words that appear most often in the list are:"},
};
constexpr std::array kCweDev = {
    CwePhrasing{"Here is a numbered sequence of words. Several words are repeated many more times than the "
                "rest; remember those.",
                "{i}) {word}", "Question: Which {num} words occur most frequently in the sequence above?",
                " Answer: The {num} most frequent words in the sequence are:"},
};
// Train: every instruction x item format x question (cwe_phrasings builds the product once). Item
// formats only wrap the number in punctuation, so that no format token repeats across items (a repeated
// one would itself be the most common "word").
constexpr std::array<std::string_view, 5> kCweTrainInstructions = {
    "The list below numbers a long series of words. A few of them occur far more often than the others.",
    "Read the numbered words below and count how often each one appears.",
    "Words are listed below with their positions. Some words repeat many times.",
    "Below, a long run of words is given one per position; certain words come up again and again.",
    "Count the words in the numbered list that follows; a handful of them dominate it.",
};
constexpr std::array<std::string_view, 8> kCweTrainItems = {
    "{i}: {word}", "#{i} {word}", "[{i}] {word}", "({i}) {word}", "{i}- {word}", "<{i}> {word}", "{i}/ {word}",
    "{i}| {word}",
};
struct CweQuestion {
  std::string_view question;
  std::string_view answer_prefix;
};
constexpr std::array kCweTrainQuestions = {
    CweQuestion{"Question: Name the {num} words that occur most often in the list.",
                " Answer: The {num} words occurring most often are:"},
    CweQuestion{"Question: Which {num} words have the highest counts?", " Answer: The {num} words with the highest counts are:"},
    CweQuestion{"Question: Which {num} words repeat the most in the list above?", " Answer: The {num} most repeated words are:"},
    CweQuestion{"Question: List the {num} words seen most often above.", " Answer: Seen most often are these {num} words:"},
    CweQuestion{"Question: Tell me the {num} commonest entries of that list.", " Answer: Its {num} commonest entries are:"},
};

// ---- fwe ----------------------------------------------------------------------------------------
constexpr std::array kFweEval = {
    FwePhrasing{"Read the following coded text and track the frequency of each coded word. Find the three most "
                "frequently appeared coded words.",
                "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three most "
                "frequently appeared words in the above coded text?",
                " Answer: According to the coded text above, the three most frequently appeared words are:"},
};
constexpr std::array kFweDev = {
    FwePhrasing{"The following text is written in a secret code. Count how often each coded word occurs; the "
                "dots '....' are padding and do not count.",
                "Question: Without explanation, give the three coded words that occur most often in this text.",
                " Answer: The three commonest coded words are:"},
};
constexpr std::array kFweTrain = {
    FwePhrasing{"Below is a stream of coded words. Keep a tally of each coded word and ignore the dots '....'.",
                "Question: Which three coded words appear most often in the stream?",
                " Answer: The three most common coded words in the stream are:"},
    FwePhrasing{"Count the coded words in the following passage (the dots '....' are filler).",
                "Question: Report the three coded words with the highest frequency.",
                " Answer: The three highest-frequency coded words are:"},
};

// ---- kv retrieval -------------------------------------------------------------------------------
constexpr std::array kKvEval = {
    KvPhrasing{"Extract the value corresponding to the specified key in the JSON object below.",
               "Key: \"{key}\"", " The value associated with the specified key is:"},
};
constexpr std::array kKvDev = {
    KvPhrasing{"Look up the value stored under the given key in the following JSON dictionary.",
               "Which value is stored under the key \"{key}\"?", " The value stored under that key is:"},
};
constexpr std::array kKvTrain = {
    KvPhrasing{"The JSON object below maps identifiers to identifiers. Find the entry for the requested key.",
               "Requested key: \"{key}\"", " The entry for the requested key is:"},
    KvPhrasing{"Below is a JSON record of key-value pairs. Retrieve the value for one key.",
               "What is the value of \"{key}\" in the record above?", " The value of that key is:"},
};

// ---- multihop facts -----------------------------------------------------------------------------
constexpr std::array kFactEval = {
    FactPhrasing{"Answer the question based on the facts about fictional places hidden in the following text. "
                 "Only give the name.",
                 "The capital of {country} is {city}.", "The mayor of {city} is {person}.",
                 "Question: Who is the mayor of the capital of {country}?",
                 " Answer: The mayor of the capital of {country} is"},
};
constexpr std::array kFactDev = {
    FactPhrasing{"The text below mentions facts about invented lands. Use them to answer the question at the end.",
                 "The largest port of {country} is {city}.", "The harbour master of {city} is {person}.",
                 "Question: Who is the harbour master of the largest port of {country}?",
                 " Answer: The harbour master of the largest port of {country} is"},
};
// Train: the three hand-written phrasings below plus every sentence pattern under every instruction
// (fact_phrasings builds them once), the pattern's {place} and {role} composed per sample from the
// relation words (~330 places x ~220 roles), so that a small model learns to chain two facts whatever
// the relations are called; the eval relations (capital, mayor) and the dev ones (largest port,
// harbour master) are not among them, nor any of their words.
constexpr std::array<std::string_view, 3> kFactTrainInstructions = {
    "Some facts about imaginary realms are scattered through the following text. Combine them to answer the "
    "question.",
    "Read the text below; it hides facts about made-up countries. Answer by chaining two facts.",
    "Facts about fictional nations appear in the following passage. Use them to answer the final question.",
};
constexpr std::array kFactTrainFixed = {
    FactPhrasing{kFactTrainInstructions[0],
                 "The royal seat of {country} is the town of {city}.", "The town of {city} is governed by {person}.",
                 "Question: Who governs the royal seat of {country}?",
                 " Answer: The royal seat of {country} is governed by"},
    FactPhrasing{kFactTrainInstructions[1],
                 "{country} keeps its treasury in the city of {city}.", "The treasurer of {city} is {person}.",
                 "Question: Who is the treasurer of the city where {country} keeps its treasury?",
                 " Answer: The treasurer of the city where {country} keeps its treasury is"},
    FactPhrasing{kFactTrainInstructions[2],
                 "The oldest university of {country} is in {city}.",
                 "The rector of the university in {city} is {person}.",
                 "Question: Who is the rector of the oldest university of {country}?",
                 " Answer: The rector of the oldest university of {country} is"},
};
// Relation words of the train split, composed per sample (fact_train_relation_words): a place is
// [modifier] noun, a role [modifier] noun. No word of a dev or eval fact sentence is among them.
constexpr std::array<std::string_view, 21> kFactTrainPlaceModifiers = {
    "",        "northern", "southern", "eastern", "western", "oldest",  "newest",    "busiest", "quietest", "main", "chief",
    "royal",   "holy",     "ancient",  "highest", "richest", "smallest", "fortified", "famous",  "outer",    "second"};
constexpr std::array<std::string_view, 16> kFactTrainPlaceNouns = {
    "fortress",      "market town", "garrison",  "river city",     "trading post",    "mining town",
    "spa town",      "naval base",  "border town", "citadel",      "monastery town",  "fishing village",
    "university town", "seat of parliament", "summer residence", "castle town"};
constexpr std::array<std::string_view, 12> kFactTrainRoleModifiers = {
    "", "chief", "head", "high", "senior", "royal", "grand", "first", "elder", "deputy", "lord", "assistant"};
constexpr std::array<std::string_view, 18> kFactTrainRoleNouns = {
    "judge",     "librarian", "physician", "engineer",  "priest",   "builder", "warden",    "treasurer", "tax collector",
    "commander", "steward",   "archivist", "astronomer", "scribe",  "herald",  "governor",  "bishop",    "magistrate"};
// One sentence pattern; {place} and {role} are drawn per sample, like the other placeholders.
constexpr std::array kFactTrainPatterns = {
    FactPhrasing{"", "The {place} of {country} is {city}.", "The {role} of {city} is {person}.",
                 "Question: Who serves as the {role} of the {place} of {country}?",
                 " Answer: The {role} of the {place} of {country} is"},
    FactPhrasing{"", "{city} is the {place} of {country}.", "{person} is the {role} of {city}.",
                 "Question: Name the {role} of the {place} of {country}.",
                 " Answer: The {role} of the {place} of {country} is"},
    FactPhrasing{"", "In {country}, the {place} is {city}.", "In {city}, the {role} is {person}.",
                 "Question: In the {place} of {country}, who serves as {role}?",
                 " Answer: In the {place} of {country}, the {role} is"},
    FactPhrasing{"", "{country} has its {place} at {city}.", "The post of {role} in {city} is held by {person}.",
                 "Question: Who holds the post of {role} in the {place} of {country}?",
                 " Answer: The post of {role} in the {place} of {country} is held by"},
    FactPhrasing{"", "The {place} of {country} lies at {city}.", "{city} has {person} as its {role}.",
                 "Question: Which person is {role} of the {place} of {country}?",
                 " Answer: The {role} of the {place} of {country} is"},
};

// ---- copy_strings (train only) ------------------------------------------------------------------
// Every instruction x record x question (copy_train_phrasings builds the product once); {thing} is one of
// kCopyTrainThings per sample. A record names the label before the string and ends right after it.
constexpr std::array<std::string_view, 5> kCopyTrainInstructions = {
    "The passage below contains a few labelled {things}. Each must be copied back exactly, character for "
    "character.",
    "Some {things} are written into the following text, each under its own label. Remember them exactly.",
    "Read the text that follows; it records several {things} by label. You will be asked to repeat some of them.",
    "Labelled {things} are scattered through the document below. Copy the requested ones without changing a "
    "character.",
    "Below, a few {things} are filed under labels inside ordinary text. Keep each one exactly as written.",
};
constexpr std::array<std::string_view, 6> kCopyTrainRecords = {
    "The {thing} filed under {label} is {value}.",
    "Label {label} carries the {thing} {value}.",
    "{label} has this {thing}: {value}.",
    "Under the label {label}, the {thing} reads {value}.",
    "The {thing} for {label} is written as {value}.",
    "Copy note, {label}: {thing} {value}.",
};
struct CopyQuestion {
  std::string_view question;
  std::string_view answer_prefix;
};
constexpr std::array kCopyTrainQuestions = {
    CopyQuestion{"Question: Copy exactly the {thing} of each of these labels, in this order: {query}.",
                 " Answer: The {things}, in order, are:"},
    CopyQuestion{"Question: What {things} are filed under {query}? Give them in the order asked.",
                 " Answer: In the order asked, the {things} are:"},
    CopyQuestion{"Question: Repeat, character for character, the {thing} recorded for each label in turn: {query}.",
                 " Answer: Copied exactly:"},
    CopyQuestion{"Question: Write out the {things} of {query}, one per label, in that order.",
                 " Answer: The {things} of those labels are:"},
    CopyQuestion{"Question: For each of the labels {query}, give its {thing} exactly.",
                 " Answer: Their {things}, label by label:"},
};
constexpr std::array<std::string_view, 18> kCopyTrainThings = {
    "code",     "serial",  "token",  "reference", "signature", "tag",     "string",   "identifier", "sequence",
    "password", "record",  "marker", "cipher",    "keyword",   "locator", "checksum", "ticket",     "voucher"};

// ---- hop_drill (train only) ---------------------------------------------------------------------
// Every instruction x fact pattern x question (hop_train_phrasings builds the product once); the relations
// {rel} / {x} / {y} are composed per sample from hop_train_relation_words().
constexpr std::array<std::string_view, 4> kHopTrainInstructions = {
    "The short text below says how some invented people are related. Chain two of its facts to answer the "
    "question.",
    "Facts about made-up people and their relations are mixed into the passage that follows. Follow two links "
    "to find the answer.",
    "Read the following text; it states who is connected to whom. Answer by following one fact and then another.",
    "A few relations between fictional persons are hidden in the text below. Combine two of them to name the "
    "right person.",
};
constexpr std::array<std::string_view, 5> kHopTrainFacts = {
    "The {rel} of {subject} is {object}.",
    "{object} is the {rel} of {subject}.",
    "{subject} has {object} as {rel}.",
    "As it happens, the {rel} of {subject} is {object}.",
    "{subject} counts {object} as their {rel}.",
};
struct HopQuestion {
  std::string_view question;
  std::string_view answer_prefix;
};
constexpr std::array kHopTrainQuestions = {
    HopQuestion{"Question: Tell me the {y} of the {x} of {subject}.", " Answer:"},
    HopQuestion{"Question: Find the {x} of {subject}, then name that person's {y}.", " Answer: Following the two facts:"},
    HopQuestion{"Question: Whose name belongs to the {y} of {subject}'s {x}?", " Answer: Step by step:"},
    HopQuestion{"Question: Name the {y} of the person who is the {x} of {subject}.", " Answer: Tracing the relations:"},
};
constexpr std::array<std::string_view, 30> kHopTrainRelationNouns = {
    "mentor",    "sister",   "brother",   "cousin",    "neighbour",  "teacher",    "partner",    "rival",
    "friend",    "employer", "landlord",  "doctor",    "lawyer",     "tutor",      "guardian",   "heir",
    "godmother", "godfather", "secretary", "apprentice", "nephew",   "niece",      "aunt",       "uncle",
    "grandmother", "grandfather", "bodyguard", "biographer", "confidant", "business partner"};

template <typename T>
std::span<const T> pick(Split split, std::span<const T> train, std::span<const T> dev, std::span<const T> eval) {
  switch (split) {
    case Split::kTrain: return train;
    case Split::kDev: return dev;
    case Split::kEval: return eval;
  }
  return eval;
}
template <typename T, size_t A, size_t B, size_t C>
std::span<const T> pick(Split split, const std::array<T, A>& train, const std::array<T, B>& dev,
                        const std::array<T, C>& eval) {
  return pick(split, std::span<const T>(train), std::span<const T>(dev), std::span<const T>(eval));
}
template <typename T, size_t B, size_t C>
std::span<const T> pick(Split split, const std::vector<T>& train, const std::array<T, B>& dev,
                        const std::array<T, C>& eval) {
  return pick(split, std::span<const T>(train), std::span<const T>(dev), std::span<const T>(eval));
}

// A train split's product phrasings: make(a, b, c) for every a of as, b of bs, c of cs, in that nesting
// order (a sample's template id indexes the result); the callers below build theirs once, on first use.
template <typename P, typename A, typename B, typename C, typename Make>
std::vector<P> product_of(const A& as, const B& bs, const C& cs, Make make) {
  std::vector<P> v;
  for (const auto& a : as) {
    for (const auto& b : bs) {
      for (const auto& c : cs) v.push_back(make(a, b, c));
    }
  }
  return v;
}

}  // namespace

std::span<const NiahPhrasing> niah_phrasings(Split s) {
  static const auto train = product_of<NiahPhrasing>(
      kNiahTrainInstructions, kNiahTrainNeedles, kNiahTrainQuestions,
      [](std::string_view instruction, std::string_view needle, const NiahQuestion& q) {
        return NiahPhrasing{instruction, needle, q.question, q.answer_prefix};
      });
  return pick(s, train, kNiahDev, kNiahEval);
}
std::span<const std::string_view> niah_train_adjectives() { return kNiahTrainAdjectives; }
std::span<const VtPhrasing> vt_phrasings(Split s) {
  static const auto train = product_of<VtPhrasing>(
      kVtTrainStatements, kVtTrainInstructions, kVtTrainQuestions,
      [](const VtStatements& st, std::string_view instruction, const VtQuestion& q) {
        return VtPhrasing{instruction, st.assign_value, st.assign_var, q.question, q.answer_prefix};
      });
  return pick(s, train, kVtDev, kVtEval);
}
std::span<const std::string_view> vt_train_keywords() { return kVtTrainKeywords; }
std::span<const std::string_view> vt_train_operators() { return kVtTrainOperators; }
std::span<const std::string_view> vt_train_word_operators() { return kVtTrainWordOperators; }
std::span<const CwePhrasing> cwe_phrasings(Split s) {
  static const auto train = product_of<CwePhrasing>(
      kCweTrainInstructions, kCweTrainItems, kCweTrainQuestions,
      [](std::string_view instruction, std::string_view item, const CweQuestion& q) {
        return CwePhrasing{instruction, item, q.question, q.answer_prefix};
      });
  return pick(s, train, kCweDev, kCweEval);
}
std::span<const FwePhrasing> fwe_phrasings(Split s) { return pick(s, kFweTrain, kFweDev, kFweEval); }
std::span<const KvPhrasing> kv_phrasings(Split s) { return pick(s, kKvTrain, kKvDev, kKvEval); }
std::span<const FactPhrasing> fact_phrasings(Split s) {
  static const std::vector<FactPhrasing> train = [] {
    std::vector<FactPhrasing> v(kFactTrainFixed.begin(), kFactTrainFixed.end());
    for (const auto instruction : kFactTrainInstructions) {
      for (FactPhrasing p : kFactTrainPatterns) {
        p.instruction = instruction;
        v.push_back(p);
      }
    }
    return v;
  }();
  return pick(s, train, kFactDev, kFactEval);
}
std::span<const CopyPhrasing> copy_train_phrasings() {
  static const auto phrasings = product_of<CopyPhrasing>(
      kCopyTrainInstructions, kCopyTrainRecords, kCopyTrainQuestions,
      [](std::string_view instruction, std::string_view record, const CopyQuestion& q) {
        return CopyPhrasing{instruction, record, q.question, q.answer_prefix};
      });
  return phrasings;
}
std::span<const std::string_view> copy_train_things() { return kCopyTrainThings; }
std::span<const HopPhrasing> hop_train_phrasings() {
  static const auto phrasings = product_of<HopPhrasing>(
      kHopTrainInstructions, kHopTrainFacts, kHopTrainQuestions,
      [](std::string_view instruction, std::string_view fact, const HopQuestion& q) {
        return HopPhrasing{instruction, fact, q.question, q.answer_prefix};
      });
  return phrasings;
}
std::set<std::string> literal_words(std::string_view text) {
  static const std::set<std::string> function_words = {"the", "of", "is", "in", "to", "a"};
  std::set<std::string> out;
  std::string word;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '{') {  // a placeholder, to its '}' (an unclosed one: to the end)
      i = text.find('}', i);
      word.clear();
      if (i == std::string_view::npos) break;
      continue;
    }
    if (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) {
      word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(text[i]))));
    } else if (!word.empty()) {
      if (!function_words.count(word)) out.insert(word);
      word.clear();
    }
  }
  return out;
}

namespace {
// The words of the dev and eval fact sentences and questions: what no train relation word may be.
std::set<std::string> dev_and_eval_fact_words() {
  std::set<std::string> out;
  for (const auto& phrasings : {std::span<const FactPhrasing>(kFactDev), std::span<const FactPhrasing>(kFactEval)}) {
    for (const FactPhrasing& p : phrasings) {
      out.merge(literal_words(p.first_fact));
      out.merge(literal_words(p.second_fact));
      out.merge(literal_words(p.question));
    }
  }
  return out;
}

RelationWordList relation_list(std::span<const std::string_view> curated, std::span<const std::string_view> open,
                               const std::set<std::string>& banned) {
  RelationWordList list;
  list.words.assign(curated.begin(), curated.end());
  list.curated = list.words.size();
  for (const std::string_view w : open)
    if (!banned.count(std::string(w))) list.words.push_back(w);
  return list;
}
}  // namespace

const FactRelationWords& fact_train_relation_words() {
  static const FactRelationWords words = [] {
    const std::set<std::string> banned = dev_and_eval_fact_words();
    const SplitWords& open = split_words(Split::kTrain);
    return FactRelationWords{relation_list(kFactTrainPlaceModifiers, open.adjectives, banned),
                             relation_list(kFactTrainPlaceNouns, open.nouns, banned),
                             relation_list(kFactTrainRoleModifiers, open.adjectives, banned),
                             relation_list(kFactTrainRoleNouns, open.nouns, banned)};
  }();
  return words;
}
const HopRelationWords& hop_train_relation_words() {
  static const HopRelationWords words = [] {
    const std::set<std::string> banned = dev_and_eval_fact_words();
    return HopRelationWords{fact_train_relation_words().role_modifiers,
                            relation_list(kHopTrainRelationNouns, split_words(Split::kTrain).nouns, banned)};
  }();
  return words;
}
std::string compose_relation(std::string_view modifier, std::string_view noun) {
  return modifier.empty() ? std::string(noun) : std::string(modifier) + " " + std::string(noun);
}

namespace {
// Sentences of the train book that can serve as noise: 4-14 words of letters (with , ; ' - and one closing
// period), none with two capitals in a row (vt's variables are five capitals; the book's emphasised "WOULD"
// would read as one), no quotes or digits. In book order.
bool usable_as_noise(std::string_view sentence) {
  if (sentence.empty() || sentence.back() != '.') return false;
  int words = 1;
  for (size_t c = 0; c + 1 < sentence.size(); ++c) {
    const unsigned char ch = static_cast<unsigned char>(sentence[c]);
    if (ch == ' ') {
      if (sentence[c + 1] == ' ') return false;
      ++words;
    } else if (!std::isalpha(ch) && ch != ',' && ch != ';' && ch != '\'' && ch != '-') {
      return false;
    } else if (c > 0 && std::isupper(ch) && std::isupper(static_cast<unsigned char>(sentence[c - 1]))) {
      return false;
    }
  }
  return words >= 4 && words <= 14;
}
std::vector<std::string> train_book_noise_sentences() {
  const WordStream& book = WordStream::get(Split::kTrain, HaystackKind::kNatural);
  std::vector<std::string> out;
  for (size_t i = 0; i < book.sentence_count(); ++i) {
    if (usable_as_noise(book.sentence(i))) out.emplace_back(book.sentence(i));
  }
  return out;
}
}  // namespace

// The train split's noise, in 128 runs of 150-1,650 sentences. Half the runs repeat a cycle of 3-8 sentences of the
// train book (drawn per run), a quarter a cycle of 3-8 sentences of a small grammar (one of 32 subjects, one of 32
// predicates, three in ten opened by an adverb, one in ten a particle, a pronoun and a verb), a quarter are the
// grammar's sentences unrepeated: the dev and eval noise are 5-sentence cycles of
// plain sentences repeated ("The road is long. ... On we walk. Slowly the day fades."), and a model must learn to
// skip filler of any wording, repeated or not. History (docs/model.md, scripts/vt_wording_probe.py): until
// 2026-12-07 the train noise was one cycle of 30 grammar-like sentences, and kascade-tiny learnt to skip exactly
// those (c24's vt on dev prompts at 4K: 10 %, 32.5 % with the dev filler swapped for that cycle); with 4,096
// unrepeated grammar sentences (c30) dev vt stayed at 10 %, its answers copies of the dev cycle's "Slowly" —
// sentences opening with a capitalised word other than The / A / An, which the grammar then never had (c31 added the
// train book's cycles; c32 the grammar's adverb and particle openers, and vt's upper-case operator words). No word of the
// dev or eval noise (road, night, river, day, grass, sky, sun, ...) is in the grammar; the train book is disjoint
// from the other splits' books (tests/unit/eval/test_splits.cpp).
std::string compose_train_noise() {
  static constexpr std::array<std::string_view, 32> kSubjects = {
      "The hill", "The wind", "A star", "The lake", "A bird", "The bread", "A bell", "The clock", "A leaf", "The path",
      "The snow", "The fire", "A dog", "The moon", "The rain", "The door", "The fog", "The tea", "A wave", "The candle",
      "A cart", "The bridge", "The smoke", "The garden", "The frost", "The market", "The mill", "An old cat",
      "A small boat", "The tower", "A kettle", "The orchard"};
  static constexpr std::array<std::string_view, 32> kPredicates = {
      "is quiet", "turns slowly", "waits by the gate", "grows cold", "drifts upward", "rests in the shade",
      "rings twice", "sleeps", "moves on", "falls softly", "bends left", "shines at dusk", "crackles", "stays still",
      "rolls by", "creaks open", "hums a little", "looks old", "glows warm", "fades at noon", "stands alone",
      "sways gently", "is wet again", "keeps its place", "leans to one side", "smells of pine", "hides from view",
      "comes back later", "goes nowhere", "feels heavy", "is bright", "seems far away"};
  constexpr int kRuns = 128, kMinCycle = 3, kMaxCycle = 8, kMinSentences = 150, kMaxSentences = 1650;
  const std::vector<std::string> book = train_book_noise_sentences();
  if (book.empty()) throw std::logic_error("compose_train_noise: the train book has no sentence usable as noise");
  DetRng rng(0x6e6f697365ULL);  // "noise"
  // Openers of the grammar's other two forms: an adverb before the subject ("Quietly the hill sleeps."), a particle
  // before a pronoun and a verb ("Up they climb."). Neither "Slowly" nor "On we walk" (the dev noise) is made.
  static constexpr std::array<std::string_view, 16> kAdverbs = {
      "Quietly", "Softly",  "Later", "Suddenly", "Gently", "Soon",   "Still",     "Meanwhile",
      "Tonight", "Sometimes", "Often", "Perhaps", "Now",   "Then",   "Once more", "At last"};
  static constexpr std::array<std::string_view, 8> kParticles = {"Up", "Off", "In", "Out", "Down", "Away", "Home", "Over"};
  static constexpr std::array<std::string_view, 5> kPronouns = {"they", "she", "he", "you", "I"};
  static constexpr std::array<std::string_view, 8> kVerbs = {"climb", "ride", "rush", "stroll", "wander", "hurry",
                                                              "march", "drift"};
  auto lower_first = [](std::string_view w) {
    std::string out(w);
    out[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
    return out;
  };
  // Six in ten sentences are "Subject predicate.", three in ten adverb-first, one in ten particle-first.
  auto grammar_sentence = [&] {
    const uint64_t form = rng.below(10);
    if (form == 9) {
      return std::string(kParticles[rng.below(kParticles.size())]) + " " +
             std::string(kPronouns[rng.below(kPronouns.size())]) + " " + std::string(kVerbs[rng.below(kVerbs.size())]) + ".";
    }
    const std::string_view subject = kSubjects[rng.below(kSubjects.size())];
    const std::string_view predicate = kPredicates[rng.below(kPredicates.size())];
    if (form >= 6) {
      return std::string(kAdverbs[rng.below(kAdverbs.size())]) + " " + lower_first(subject) + " " + std::string(predicate) + ".";
    }
    return std::string(subject) + " " + std::string(predicate) + ".";
  };
  enum class Run { kBookCycle, kGrammarCycle, kGrammar };
  std::string out;
  for (int r = 0; r < kRuns; ++r) {
    const uint64_t draw = rng.below(4);
    const Run run = draw < 2 ? Run::kBookCycle : (draw == 2 ? Run::kGrammarCycle : Run::kGrammar);
    std::vector<std::string> cycle;
    if (run != Run::kGrammar) {
      const int length = kMinCycle + static_cast<int>(rng.below(kMaxCycle - kMinCycle + 1));
      while (static_cast<int>(cycle.size()) < length) {
        cycle.push_back(run == Run::kBookCycle ? book[rng.below(book.size())] : grammar_sentence());
      }
    }
    const int count = kMinSentences + static_cast<int>(rng.below(kMaxSentences - kMinSentences + 1));
    for (int i = 0; i < count; ++i) {
      if (!out.empty()) out.push_back(' ');
      out.append(run == Run::kGrammar ? grammar_sentence() : cycle[static_cast<size_t>(i) % cycle.size()]);
    }
  }
  return out;
}

std::string_view noise_sentences(Split split) {
  switch (split) {
    case Split::kTrain: {
      static const std::string train = compose_train_noise();
      return train;
    }
    case Split::kDev: return "The road is long. The night is calm. The river runs deep. On we walk. Slowly the day fades.";
    case Split::kEval: return "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
  }
  return "";
}

}  // namespace kascade::eval
