// eval/vocab.cpp — split-partitioned vocabularies and random values (see vocab.h).
// Tested by tests/unit/eval/test_splits.cpp and test_tasks.cpp.
#include "eval/vocab.h"

#include <array>

namespace kascade::eval {
namespace {

struct WordListEntry {
  std::string_view split;
  std::string_view kind;
  std::string_view words;  // space-separated, with a trailing space
};

constexpr WordListEntry kWordLists[] = {
#include "eval/corpus/word_lists.inc"
};

std::vector<std::string_view> split_on_spaces(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

SplitWords load_split_words(Split split) {
  SplitWords w;
  const std::string_view name = split_name(split);
  for (const auto& e : kWordLists) {
    if (e.split != name) continue;
    if (e.kind == "adjectives") w.adjectives = split_on_spaces(e.words);
    if (e.kind == "nouns") w.nouns = split_on_spaces(e.words);
    if (e.kind == "verbs") w.verbs = split_on_spaces(e.words);
  }
  return w;
}

template <typename T>
const T& pick(DetRng& rng, const std::vector<T>& v) {
  return v[static_cast<size_t>(rng.below(v.size()))];
}

const std::vector<std::string_view> kOnsetsTrain = {
    "Bal", "Ced", "Dar", "Fir", "Gal", "Hes", "Jor", "Kal", "Lor", "Mav", "Nor", "Pim", "Ral", "Sab", "Tev", "Val",
    "Wil", "Yor", "Zan", "Cor", "Den", "Fon", "Gus", "Kes", "Lud", "Mor", "Nis", "Pol", "Rin", "Sor", "Tol", "Bir"};
const std::vector<std::string_view> kOnsetsDev = {"Bex", "Cal", "Dor", "Fal", "Gim", "Hov", "Jas", "Kor",
                                                  "Lin", "Mur", "Nel", "Pax", "Rov", "Sel", "Tur", "Vol"};
const std::vector<std::string_view> kOnsetsEval = {"Zor", "Mel", "Tir", "Vas", "Kel", "Dun", "Bar", "Hal", "Fen",
                                                   "Gor", "Lum", "Nax", "Pel", "Rud", "Sov", "Tam", "Vir", "Wex"};
constexpr std::array<std::string_view, 10> kMiddles = {"", "a", "e", "i", "o", "an", "el", "ir", "on", "u"};
constexpr std::array<std::string_view, 9> kCountryEnds = {"via", "ria", "land", "mark", "stan", "onia", "eth", "ador", "ica"};
constexpr std::array<std::string_view, 10> kCityEnds = {"kat", "holm", "burg", "ford", "grad", "wick", "mere", "port", "ton", "dal"};
constexpr std::array<std::string_view, 10> kFirstEnds = {"a", "o", "in", "ric", "wen", "dor", "ela", "ius", "ette", "mar"};
constexpr std::array<std::string_view, 10> kLastEnds = {"vask", "dell", "mont", "rook", "thorne", "wick", "berg", "sen", "lowe", "ley"};

template <size_t N>
std::string_view pick(DetRng& rng, const std::array<std::string_view, N>& a) {
  return a[static_cast<size_t>(rng.below(N))];
}

}  // namespace

const SplitWords& split_words(Split split) {
  static const SplitWords train = load_split_words(Split::kTrain);
  static const SplitWords dev = load_split_words(Split::kDev);
  static const SplitWords eval = load_split_words(Split::kEval);
  switch (split) {
    case Split::kTrain: return train;
    case Split::kDev: return dev;
    case Split::kEval: return eval;
  }
  return eval;
}

int split_residue(Split split) {
  switch (split) {
    case Split::kEval: return 0;
    case Split::kDev: return 1;
    case Split::kTrain: return 2;
  }
  return 0;
}

std::string random_word_key(DetRng& rng, Split split) {
  const SplitWords& w = split_words(split);
  std::string key(pick(rng, w.adjectives));
  key += '-';
  key += pick(rng, w.nouns);
  return key;
}

std::string random_number(DetRng& rng, int digits) {
  std::string s;
  s.push_back(static_cast<char>('1' + rng.below(9)));
  for (int i = 1; i < digits; ++i) s.push_back(static_cast<char>('0' + rng.below(10)));
  return s;
}

std::string random_uuid(DetRng& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  const uint64_t hi = rng.next_u64();
  const uint64_t lo = rng.next_u64();
  uint8_t bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<uint8_t>(hi >> (8 * (7 - i)));
    bytes[8 + i] = static_cast<uint8_t>(lo >> (8 * (7 - i)));
  }
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  std::string s;
  s.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(kHex[bytes[i] >> 4]);
    s.push_back(kHex[bytes[i] & 0xF]);
  }
  return s;
}

std::string random_hex(DetRng& rng, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s.push_back(kHex[rng.below(16)]);
  return s;
}

bool is_split_variable_name(std::string_view name, Split split) {
  if (name.size() != 5) return false;
  int sum = 0;
  for (const char c : name) {
    if (c < 'A' || c > 'Z') return false;
    sum += c - 'A';
  }
  return sum % 3 == split_residue(split);
}

std::string random_variable_name(DetRng& rng, Split split) {
  std::string name;
  int sum = 0;
  for (int i = 0; i < 4; ++i) {
    const int v = static_cast<int>(rng.below(26));
    name.push_back(static_cast<char>('A' + v));
    sum += v;
  }
  // The last letter: uniform over the letters that bring the sum to the split's residue.
  const int need = ((split_residue(split) - sum) % 3 + 3) % 3;
  const int count = (26 - need + 2) / 3;  // letters v in [0, 26) with v % 3 == need
  const int v = need + 3 * static_cast<int>(rng.below(static_cast<uint64_t>(count)));
  name.push_back(static_cast<char>('A' + v));
  return name;
}

bool is_split_coded_word(std::string_view word, Split split) {
  if (word.size() != 6) return false;
  for (const char c : word) {
    if (c < 'a' || c > 'z') return false;
  }
  return static_cast<int>(fnv1a64(word) % 3) == split_residue(split);
}

std::string random_coded_word(DetRng& rng, Split split) {
  while (true) {
    std::string w;
    for (int i = 0; i < 6; ++i) w.push_back(static_cast<char>('a' + rng.below(26)));
    if (is_split_coded_word(w, split)) return w;
  }
}

const std::vector<std::string_view>& name_onsets(Split split) {
  switch (split) {
    case Split::kTrain: return kOnsetsTrain;
    case Split::kDev: return kOnsetsDev;
    case Split::kEval: return kOnsetsEval;
  }
  return kOnsetsEval;
}

std::string random_place_or_person(DetRng& rng, Split split, NameKind kind) {
  const auto& onsets = name_onsets(split);
  std::string name(pick(rng, onsets));
  switch (kind) {
    case NameKind::kCountry:
      name += pick(rng, kMiddles);
      name += pick(rng, kCountryEnds);
      break;
    case NameKind::kCity:
      name += pick(rng, kMiddles);
      name += pick(rng, kCityEnds);
      break;
    case NameKind::kPerson:
      name += pick(rng, kMiddles);
      name += pick(rng, kFirstEnds);
      name += ' ';
      name += pick(rng, onsets);
      name += pick(rng, kLastEnds);
      break;
  }
  return name;
}

}  // namespace kascade::eval
