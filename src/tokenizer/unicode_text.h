// tokenizer/unicode_text.h — UTF-8 helpers of the tokenizer: strict validation, code point
// iteration, Rust's String::from_utf8_lossy (what `tokenizers` returns from decode), Python's
// str.strip() whitespace (what Jinja's trim filter removes) and NFC with the data `tokenizers` uses.
// Tested by tests/unit/tokenizer/test_unicode_text.cpp (hand-computed cases) and, for NFC, against
// `tokenizers`' own NFC of every decomposable code point (tests/data/tokenizer/nfc.json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kascade/status.h"

namespace kascade::tokenizer_detail {

// OK when `text` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF);
// otherwise InvalidArgument naming `what` and the byte offset of the first bad sequence.
Status validate_utf8(std::string_view text, std::string_view what);

// Decodes the code point at text[pos] of valid UTF-8 and advances pos past it.
char32_t next_codepoint(std::string_view text, size_t& pos);
// The code point that ends at text[end) of valid UTF-8 (end > 0), and its start in start.
char32_t previous_codepoint(std::string_view text, size_t end, size_t& start);
// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t cp);
// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
size_t utf8_sequence_length(unsigned char lead);

// Every maximal ill-formed subsequence of `bytes` replaced by one U+FFFD (Rust from_utf8_lossy).
std::string utf8_lossy(std::string_view bytes);

// Python's str.isspace() (what str.strip() removes).
bool is_python_space(char32_t cp);
// Python's str.strip() with no argument.
std::string_view python_strip(std::string_view text);

// Unicode NFC of valid UTF-8, with the normalization data of Hugging Face `tokenizers`
// (nfc_tables.h): characters its tables predate are starters that never compose.
Result<std::string> nfc(std::string_view text);

}  // namespace kascade::tokenizer_detail
