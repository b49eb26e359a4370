// eval/vocab.h — the vocabularies samples draw from, each partitioned between the splits:
//   - word keys "adjective-noun" and cwe words: wonderwords lists split by hash
//     (corpus/word_lists.inc, made by corpus/make_resources.py);
//   - variable names (vt): 5 upper-case letters whose letter values (A = 0) sum to the split's
//     residue mod 3 (eval 0, dev 1, train 2);
//   - coded words (fwe): 6 lower-case letters whose FNV-1a hash mod 3 is the split's residue;
//   - synthetic names (multihop_qa): every name starts with one of the split's own 3-letter
//     syllables;
//   - numbers, hex strings and UUIDs: uniform random (no vocabulary to leak).
// Tested by tests/unit/eval/test_splits.cpp and test_tasks.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/rng.h"
#include "kascade/tasks.h"

namespace kascade::eval {

struct SplitWords {
  std::vector<std::string_view> adjectives;
  std::vector<std::string_view> nouns;
  std::vector<std::string_view> verbs;
};
const SplitWords& split_words(Split split);

// The residue (0, 1, 2) that marks a split's variable names and coded words.
int split_residue(Split split);

std::string random_word_key(DetRng& rng, Split split);      // "quiet-harbor"
std::string random_number(DetRng& rng, int digits);         // no leading zero
std::string random_uuid(DetRng& rng);                       // RFC 4122 version 4, lower-case hex
std::string random_hex(DetRng& rng, int digits);            // lower-case hex digits
std::string random_variable_name(DetRng& rng, Split split); // "QWKSL"
std::string random_coded_word(DetRng& rng, Split split);    // "xkqjzu"

bool is_split_variable_name(std::string_view name, Split split);
bool is_split_coded_word(std::string_view word, Split split);

enum class NameKind { kCountry, kCity, kPerson };
// "Zorvia", "Melkat", "Tirona Vask".
std::string random_place_or_person(DetRng& rng, Split split, NameKind kind);
// The 3-letter syllables names of the split start with.
const std::vector<std::string_view>& name_onsets(Split split);

}  // namespace kascade::eval
