// eval/word_stream.cpp — natural-text and noise word streams (see word_stream.h). The book
// excerpts are compiled in from corpus/austen_<split>.inc (public domain; see
// corpus/make_resources.py for the source and licence).
// Tested by tests/unit/eval/test_haystack.cpp.
#include "eval/word_stream.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "eval/templates.h"

namespace kascade::eval {
namespace {

constexpr std::string_view kAustenTrain =
#include "eval/corpus/austen_train.inc"
    ;
constexpr std::string_view kAustenDev =
#include "eval/corpus/austen_dev.inc"
    ;
constexpr std::string_view kAustenEval =
#include "eval/corpus/austen_eval.inc"
    ;

}  // namespace

bool ends_sentence(std::string_view word) {
  size_t end = word.size();
  while (end > 0 && (word[end - 1] == '"' || word[end - 1] == '\'' || word[end - 1] == ')')) --end;
  if (end == 0) return false;
  const char last = word[end - 1];
  if (last != '.' && last != '!' && last != '?') return false;
  if (last == '.') {
    static constexpr std::array<std::string_view, 9> kAbbreviations = {"Mr.", "Mrs.", "Dr.", "St.", "Esq.",
                                                                      "Messrs.", "Col.", "Capt.", "Rev."};
    const std::string_view stem = word.substr(0, end);
    for (const auto a : kAbbreviations) {
      if (stem == a || (stem.size() > a.size() && stem.ends_with(a) && !std::isalpha(static_cast<unsigned char>(stem[stem.size() - a.size() - 1])))) {
        return false;
      }
    }
  }
  return true;
}

WordStream::WordStream(std::string_view source, bool paragraphs_are_lines) : source_(source) {
  size_t i = 0;
  while (i < source.size()) {
    while (i < source.size() && (source[i] == ' ' || source[i] == '\n')) ++i;
    if (i >= source.size()) break;
    size_t j = i;
    while (j < source.size() && source[j] != ' ' && source[j] != '\n') ++j;
    const std::string_view w = source.substr(i, j - i);
    uint8_t f = ends_sentence(w) ? kSentenceEnd : 0;
    if (paragraphs_are_lines && (j >= source.size() || source[j] == '\n')) f |= kSentenceEnd | kParagraphEnd;
    words_.push_back(w);
    flags_.push_back(f);
    i = j;
  }
  // The stream wraps around: the source's last word always ends a sentence.
  if (!flags_.empty()) flags_.back() |= kSentenceEnd | (paragraphs_are_lines ? kParagraphEnd : 0);
  for (size_t w = 0; w < words_.size(); ++w) {
    const size_t prev = (w + words_.size() - 1) % words_.size();
    if (flags_[prev] & kSentenceEnd) sentence_starts_.push_back(static_cast<int64_t>(w));
  }
}

const WordStream& WordStream::get(Split split, HaystackKind kind) {
  const size_t s = split == Split::kTrain ? 0 : (split == Split::kDev ? 1 : 2);
  if (kind == HaystackKind::kNatural) {
    // Apart from the noise streams: the train noise is built from the train book's sentences
    // (templates.cpp, compose_train_noise), so it asks for this stream while its own is being made.
    static const std::array<WordStream, 3> natural = {WordStream(kAustenTrain, true), WordStream(kAustenDev, true),
                                                      WordStream(kAustenEval, true)};
    return natural[s];
  }
  static const std::array<WordStream, 3> noise = {WordStream(noise_sentences(Split::kTrain), false),
                                                  WordStream(noise_sentences(Split::kDev), false),
                                                  WordStream(noise_sentences(Split::kEval), false)};
  return noise[s];
}

bool WordStream::source_contains(std::string_view s) const { return source_.find(s) != std::string_view::npos; }

std::string_view WordStream::sentence(size_t i) const {
  // Word 0 starts a sentence (the last word ends one), so sentence i ends before the next start or at the end.
  const size_t first = static_cast<size_t>(sentence_starts_[i]);
  const size_t last = i + 1 < sentence_starts_.size() ? static_cast<size_t>(sentence_starts_[i + 1]) - 1 : words_.size() - 1;
  const char* begin = words_[first].data();
  return {begin, static_cast<size_t>(words_[last].data() + words_[last].size() - begin)};
}

int64_t WordStream::random_sentence_start(DetRng& rng) const {
  return sentence_starts_[static_cast<size_t>(rng.below(sentence_starts_.size()))];
}

}  // namespace kascade::eval
