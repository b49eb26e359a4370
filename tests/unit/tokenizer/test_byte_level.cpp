// tests/unit/tokenizer/test_byte_level.cpp — GPT-2's byte-level alphabet, checked against the
// rules that define it (printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in
// byte order) and the decoder's fallback for tokens outside the alphabet.
#include <gtest/gtest.h>

#include <set>

#include "fixtures.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

TEST(ByteLevel, AlphabetFollowsItsDefinition) {
  std::set<char32_t> seen;
  char32_t next_shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    std::string mapped;
    byte_level_encode(std::string(1, static_cast<char>(b)), mapped);
    size_t pos = 0;
    const char32_t cp = next_codepoint(mapped, pos);
    ASSERT_EQ(pos, mapped.size());
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    EXPECT_EQ(cp, printable ? static_cast<char32_t>(b) : next_shifted++) << "byte " << b;
    EXPECT_EQ(byte_level_char_to_byte(cp), static_cast<unsigned char>(b));
    seen.insert(cp);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(next_shifted, 0x144u);
  std::string space;
  byte_level_encode(" \n", space);
  EXPECT_EQ(space, "\xC4\xA0\xC4\x8A");  // "ĠĊ"
  EXPECT_FALSE(byte_level_char_to_byte(0x20));
  EXPECT_FALSE(byte_level_char_to_byte(0x144));
}

TEST(ByteLevel, DecoderFallsBackToRawBytesForTokensOutsideTheAlphabet) {
  std::string out;
  byte_level_decode_token("\xC4\xA0hi", out);  // "Ġhi"
  EXPECT_EQ(out, " hi");
  out.clear();
  byte_level_decode_token("\xC3\xA9 x", out);  // "é x": the space is not in the alphabet
  EXPECT_EQ(out, "\xC3\xA9 x");
  out.clear();
  byte_level_decode_token("\xC3\xA9", out);  // "é" alone is byte 0xE9
  EXPECT_EQ(out, "\xE9");
}

}  // namespace
}  // namespace kascade::tokenizer_detail
