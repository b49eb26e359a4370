// tokenizer/pcre_regex.h — a compiled PCRE2 regex (UTF + UCP, JIT when available) with the match
// iteration of Oniguruma's find_iter, which `tokenizers` uses to split text.
// Tested by tests/unit/tokenizer/test_regex.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kascade/status.h"

namespace kascade::tokenizer_detail {

class Pcre2Regex {
 public:
  // Compiles `pattern` (PCRE2 syntax; `literal` matches the text as is). `what` names the pattern
  // in error messages, which quote PCRE2's message and the offset.
  static Result<std::unique_ptr<Pcre2Regex>> compile(std::string_view pattern, bool literal, std::string_view what);

  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;
  ~Pcre2Regex();

  // Appends to `spans` the byte ranges [start, end) of the successive non-overlapping matches in
  // `subject` (valid UTF-8). As Oniguruma's find_iter: each search starts where the previous match
  // ended and sees the whole subject (lookarounds included); an empty match at the end of the
  // previous one is skipped by one character. Thread-safe.
  Status find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& spans) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Pcre2Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  std::string pattern_;
};

}  // namespace kascade::tokenizer_detail
