// tokenizer/regex_translate.h — turns a pre-tokenizer regex written for Oniguruma (the engine of
// Hugging Face `tokenizers`, Ruby syntax) into a PCRE2 pattern with the same matches.
//   - \s and \S become explicit classes of Oniguruma's White_Space set (PCRE2's \s differs, e.g. on
//     U+0085);
//   - \p{L} and \p{N} (also \pL, \pN) become [\p{L}<extra>] where <extra> lists the code points
//     Oniguruma's Unicode tables hold and the linked PCRE2's do not (PCRE2 10.42 knows Unicode 14,
//     tokenizers 0.23 knows Unicode 16); \P{L}, \P{N} become the negated classes;
//   - \uHHHH becomes \x{HHHH}; ^ and $ become line anchors, as in Ruby syntax;
//   - constructs whose meaning differs between the engines and that no supported tokenizer uses
//     (\w \W \b \B \d \D \h \H, nested classes, && intersections, \S or \P{..} inside a class, the
//     Ruby (?m) option) are refused with an Unsupported status naming them.
// Tested by tests/unit/tokenizer/test_regex.cpp: every code point of Unicode against Oniguruma's
// classes (tests/data/tokenizer/onig_classes.json), and unit cases for each rewrite.
#pragma once

#include <string>
#include <string_view>

#include "kascade/status.h"

namespace kascade::tokenizer_detail {

Result<std::string> translate_onig_pattern(std::string_view pattern);

}  // namespace kascade::tokenizer_detail
