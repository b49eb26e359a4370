// tokenizer/byte_level.h — GPT-2's byte-level alphabet: every byte maps to one printable code point
// (bytes_to_unicode), so BPE works on text that holds any bytes. Used by the ByteLevel
// pre-tokenizer (bytes -> characters) and decoder (characters -> bytes).
// Tested by tests/unit/tokenizer/test_byte_level.cpp (the table's defining rules) and the parity
// fixtures.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kascade::tokenizer_detail {

// The regex the ByteLevel pre-tokenizer splits on when use_regex is true (GPT-2's).
inline constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Appends the byte-level characters of `bytes` (UTF-8) to `out`.
void byte_level_encode(std::string_view bytes, std::string& out);

// The byte a byte-level character (code point) stands for, if it is one of the 256.
std::optional<unsigned char> byte_level_char_to_byte(char32_t cp);

// ByteLevel decoder for one token: its characters' bytes when all of them are byte-level
// characters, otherwise the token's own UTF-8 bytes (as `tokenizers` does).
void byte_level_decode_token(std::string_view token, std::string& out);

}  // namespace kascade::tokenizer_detail
