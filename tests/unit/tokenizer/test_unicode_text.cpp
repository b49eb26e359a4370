// tests/unit/tokenizer/test_unicode_text.cpp — UTF-8 validation, from_utf8_lossy (hand-worked
// cases of the maximal-subpart rule that Rust and Python share), Python's strip whitespace, and NFC
// against `tokenizers`' own NFC of every decomposable code point (tests/data/tokenizer/nfc.json).
#include <gtest/gtest.h>

#include "fixtures.h"
#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8Validation, AcceptsWellFormedAndNamesTheFirstBadByte) {
  EXPECT_TRUE(validate_utf8("", "t").ok());
  EXPECT_TRUE(validate_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", "t").ok());
  for (const std::string& bad : {std::string("\xC0\xAF"), std::string("\xE0\x80\xAF"), std::string("\xED\xA0\x80"),
                                std::string("\xF4\x90\x80\x80"), std::string("\xF8\x88\x80\x80\x80"),
                                std::string("\x80"), std::string("\xC3"), std::string("\xE2\x82")}) {
    const Status s = validate_utf8("ok" + bad, "text to encode");
    ASSERT_FALSE(s.ok()) << testing::escaped(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("text to encode is not valid UTF-8"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("at byte 2"), std::string::npos) << s.message();
  }
}

TEST(Utf8Lossy, ReplacesEachMaximalIllFormedSubpartOnce) {
  struct Case {
    std::string in;
    std::string out;
  };
  const std::vector<Case> cases = {
      {"abc", "abc"},
      {"a\xFF" "b", "a" + kReplacement + "b"},
      {"\xF0\x9F\x98", kReplacement},                           // a truncated 4-byte sequence: one
      {"\xF0\x9F\x98" "a", kReplacement + "a"},
      {"\xE0\x80", kReplacement + kReplacement},                // E0 must be followed by A0..BF
      {"\xED\xA0\x80", kReplacement + kReplacement + kReplacement},  // surrogates: every byte
      {"\xC0\xAF", kReplacement + kReplacement},                // overlong lead bytes are never valid
      {"\xF4\x90\x80\x80", kReplacement + kReplacement + kReplacement + kReplacement},
      {"\xE2\x82\xAC\xE2\x82", "\xE2\x82\xAC" + kReplacement},
      {"\x80\x80", kReplacement + kReplacement},
      {"\xC3\xA9\xC3", "\xC3\xA9" + kReplacement},
  };
  for (const Case& c : cases) EXPECT_EQ(utf8_lossy(c.in), c.out) << testing::escaped(c.in);
}

TEST(Utf8Codepoints, RoundTripEveryScalarValue) {
  std::string all;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) append_utf8(all, cp);
  }
  ASSERT_TRUE(validate_utf8(all, "all").ok());
  size_t pos = 0;
  char32_t expected = 0;
  while (pos < all.size()) {
    if (expected == 0xD800) expected = 0xE000;
    const size_t before = pos;
    ASSERT_EQ(next_codepoint(all, pos), expected);
    size_t start = 0;
    ASSERT_EQ(previous_codepoint(all, pos, start), expected);
    ASSERT_EQ(start, before);
    ++expected;
  }
  EXPECT_EQ(expected, 0x110000u);
}

TEST(PythonStrip, RemovesExactlyPythonWhitespace) {
  // Python's str.isspace() holds U+001C..U+001F and U+0085 but not U+200B or U+FEFF.
  EXPECT_EQ(python_strip("  \t\n a b \r\n"), "a b");
  EXPECT_EQ(python_strip("\x1c\x1f\xC2\x85\xC2\xA0x\xE3\x80\x80\xE2\x80\xA8"), "x");
  EXPECT_EQ(python_strip("\xE2\x80\x8Bx\xEF\xBB\xBF"), "\xE2\x80\x8Bx\xEF\xBB\xBF");
  EXPECT_EQ(python_strip(" \t "), "");
  EXPECT_EQ(python_strip(""), "");
}

TEST(Nfc, MatchesTokenizersOnEveryDecomposableCodepoint) {
  const nlohmann::json fixture = testing::load_json_fixture("nfc.json");
  size_t items = 0;
  for (const auto& chunk : fixture.at("chunks")) {
    const std::string input = chunk.at("input").get<std::string>();
    auto got = nfc(input);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const std::string expected = chunk.at("nfc").get<std::string>();
    if (*got != expected) {
      // Name the first differing item.
      size_t a = 0;
      size_t b = 0;
      while (a < got->size() && b < expected.size()) {
        const size_t ea = std::min(got->find('|', a), got->size());
        const size_t eb = std::min(expected.find('|', b), expected.size());
        ASSERT_EQ(testing::escaped(got->substr(a, ea - a)), testing::escaped(expected.substr(b, eb - b)))
            << "NFC differs from tokenizers";
        a = ea + 1;
        b = eb + 1;
      }
    }
    EXPECT_EQ(*got, expected);
    items += static_cast<size_t>(std::count(input.begin(), input.end(), '|')) + 1;
  }
  EXPECT_GT(items, 4000u);
  EXPECT_EQ(*nfc(std::string("e\xCC\x81", 3)), "\xC3\xA9");
  EXPECT_EQ(*nfc(std::string("a\0b", 3)), std::string("a\0b", 3));  // NUL is a character, not an end
}

}  // namespace
}  // namespace kascade::tokenizer_detail
