// eval/word_stream.h — haystack sources as endless streams of words with sentence and paragraph
// boundaries: the split's natural-text book excerpt (corpus/austen_<split>.inc) or its noise
// sentences repeated. Word i of a stream that starts at word `start` is source word
// (start + i) mod period.
// Tested by tests/unit/eval/test_haystack.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "eval/rng.h"
#include "kascade/tasks.h"

namespace kascade::eval {

enum class HaystackKind { kNoise, kNatural };

class WordStream {
 public:
  // The split's stream of the given kind (built once, shared, immutable).
  static const WordStream& get(Split split, HaystackKind kind);

  int64_t period() const { return static_cast<int64_t>(words_.size()); }
  std::string_view word(int64_t start, int64_t i) const { return words_[wrap(start + i)]; }
  // A sentence (or paragraph) ends after word i.
  bool sentence_end(int64_t start, int64_t i) const { return (flags_[wrap(start + i)] & kSentenceEnd) != 0; }
  bool paragraph_end(int64_t start, int64_t i) const { return (flags_[wrap(start + i)] & kParagraphEnd) != 0; }
  // Whether `s` occurs anywhere in the source text (a key that does would not be unique).
  bool source_contains(std::string_view s) const;
  // A uniformly random word index at which a sentence starts.
  int64_t random_sentence_start(DetRng& rng) const;
  // The source's sentences in order: sentence(i) for 0 <= i < sentence_count() is the source text from the
  // sentence's first word to its last (a paragraph end ends a sentence, so it holds no line break).
  size_t sentence_count() const { return sentence_starts_.size(); }
  std::string_view sentence(size_t i) const;

 private:
  WordStream(std::string_view source, bool paragraphs_are_lines);
  size_t wrap(int64_t i) const { return static_cast<size_t>((i % period() + period()) % period()); }

  static constexpr uint8_t kSentenceEnd = 1;
  static constexpr uint8_t kParagraphEnd = 2;
  std::string_view source_;
  std::vector<std::string_view> words_;
  std::vector<uint8_t> flags_;
  std::vector<int64_t> sentence_starts_;
};

// Whether a word ends a sentence: it ends in '.', '!' or '?' (possibly followed by closing quotes
// or brackets) and is not a title abbreviation ("Mr.", "Mrs.", "Dr.", "St.", ...).
bool ends_sentence(std::string_view word);

}  // namespace kascade::eval
