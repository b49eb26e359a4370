// tokenizer/byte_level.cpp — GPT-2's bytes_to_unicode table and its inverse.
// Tested by tests/unit/tokenizer/test_byte_level.cpp.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

constexpr char32_t kFirstShifted = 256;  // the non-printable bytes map to U+0100 .. U+0143
constexpr char32_t kShiftedCount = 68;

bool is_printable_byte(char32_t b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct ByteTables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8{};
  std::array<unsigned char, kShiftedCount> from_shifted{};  // U+0100 + k -> byte
};

// Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the
// other 68 bytes get U+0100, U+0101, ... in byte order.
const ByteTables& tables() {
  static const ByteTables t = [] {
    ByteTables out;
    char32_t next = kFirstShifted;
    for (int b = 0; b < 256; ++b) {
      if (is_printable_byte(static_cast<char32_t>(b))) {
        out.to_char[b] = static_cast<char32_t>(b);
      } else {
        out.from_shifted[next - kFirstShifted] = static_cast<unsigned char>(b);
        out.to_char[b] = next++;
      }
      append_utf8(out.to_utf8[b], out.to_char[b]);
    }
    return out;
  }();
  return t;
}

}  // namespace

void byte_level_encode(std::string_view bytes, std::string& out) {
  const ByteTables& t = tables();
  for (const char c : bytes) out += t.to_utf8[static_cast<unsigned char>(c)];
}

std::optional<unsigned char> byte_level_char_to_byte(char32_t cp) {
  if (is_printable_byte(cp)) return static_cast<unsigned char>(cp);
  if (cp >= kFirstShifted && cp < kFirstShifted + kShiftedCount) return tables().from_shifted[cp - kFirstShifted];
  return std::nullopt;
}

void byte_level_decode_token(std::string_view token, std::string& out) {
  const size_t mark = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    const auto byte = byte_level_char_to_byte(next_codepoint(token, pos));
    if (!byte) {
      out.resize(mark);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(*byte));
  }
}

}  // namespace kascade::tokenizer_detail
