// tests/unit/tokenizer/test_regex.cpp — the Oniguruma -> PCRE2 regex translation and the
// find_iter iteration: every code point of Unicode classified as Oniguruma (inside tokenizers)
// classifies it (tests/data/tokenizer/onig_classes.json), hand-worked splits of the Llama-3 regex,
// the empty-match rule of the onig crate's find_iter, and the refused constructs.
#include <gtest/gtest.h>

#include <set>

#include "fixtures.h"
#include "tokenizer/pcre_regex.h"
#include "tokenizer/regex_translate.h"
#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

std::unique_ptr<Pcre2Regex> compile_onig(const std::string& pattern) {
  auto translated = translate_onig_pattern(pattern);
  EXPECT_TRUE(translated.ok()) << translated.status().to_string();
  if (!translated.ok()) return nullptr;
  auto regex = Pcre2Regex::compile(*translated, false, "test pattern");
  EXPECT_TRUE(regex.ok()) << regex.status().to_string();
  return regex.ok() ? std::move(regex).value() : nullptr;
}

std::vector<std::string> pieces(const Pcre2Regex& regex, const std::string& text) {
  std::vector<std::pair<size_t, size_t>> spans;
  EXPECT_TRUE(regex.find_all(text, spans).ok());
  std::vector<std::string> out;
  for (const auto& [a, b] : spans) out.push_back(text.substr(a, b - a));
  return out;
}

// All code points but the surrogates, as one string; `starts` holds each one's byte offset.
struct AllCodepoints {
  std::string text;
  std::vector<size_t> starts;
  std::vector<char32_t> codepoints;
};

const AllCodepoints& all_codepoints() {
  static const AllCodepoints all = [] {
    AllCodepoints out;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      out.starts.push_back(out.text.size());
      out.codepoints.push_back(cp);
      append_utf8(out.text, cp);
    }
    return out;
  }();
  return all;
}

// The code points the translated `class_pattern` matches, as ranges.
std::vector<std::pair<uint32_t, uint32_t>> matched_ranges(const std::string& class_pattern) {
  const AllCodepoints& all = all_codepoints();
  auto regex = compile_onig(class_pattern + "+");
  std::vector<std::pair<size_t, size_t>> spans;
  EXPECT_TRUE(regex->find_all(all.text, spans).ok());
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (const auto& [a, b] : spans) {
    size_t pos = a;
    while (pos < b) {
      const char32_t cp = next_codepoint(all.text, pos);
      if (!ranges.empty() && ranges.back().second + 1 == cp) {
        ranges.back().second = cp;
      } else {
        ranges.emplace_back(cp, cp);
      }
    }
  }
  return ranges;
}

std::vector<std::pair<uint32_t, uint32_t>> fixture_ranges(const std::string& name) {
  const nlohmann::json fixture = testing::load_json_fixture("onig_classes.json");
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : fixture.at("classes").at(name)) out.emplace_back(r[0].get<uint32_t>(), r[1].get<uint32_t>());
  // Ranges split only by the surrogate gap are one run in a string without surrogates.
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : out) {
    if (!merged.empty() && merged.back().second == 0xD7FF && r.first == 0xE000) {
      merged.back().second = r.second;
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

TEST(OnigClasses, LettersMatchOnigurumaOnEveryCodepoint) {
  EXPECT_EQ(matched_ranges("\\p{L}"), fixture_ranges("L"));
}

TEST(OnigClasses, NumbersMatchOnigurumaOnEveryCodepoint) {
  EXPECT_EQ(matched_ranges("\\p{N}"), fixture_ranges("N"));
}

TEST(OnigClasses, WhiteSpaceMatchesOnigurumaOnEveryCodepoint) {
  EXPECT_EQ(matched_ranges("\\s"), fixture_ranges("White_Space"));
  // U+0085 is White_Space (PCRE2's own \s leaves it out); U+180E and U+200B are not.
  auto regex = compile_onig("\\s");
  EXPECT_EQ(pieces(*regex, "a\xC2\x85" "b\xE1\xA0\x8E" "c\xE2\x80\x8B").size(), 1u);
}

TEST(OnigClasses, NegatedClassesAreComplements) {
  // [^\s\p{L}\p{N}] and \S must hold exactly the code points the positive classes leave out.
  const auto bitmap = [](const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<bool> member(0x110000, false);
    for (const auto& r : ranges) {
      for (uint32_t cp = r.first; cp <= r.second; ++cp) member[cp] = true;
    }
    return member;
  };
  const std::vector<bool> letters = bitmap(fixture_ranges("L"));
  const std::vector<bool> numbers = bitmap(fixture_ranges("N"));
  const std::vector<bool> space = bitmap(fixture_ranges("White_Space"));
  const auto in = [](const std::vector<bool>& member, uint32_t cp) { return static_cast<bool>(member[cp]); };
  const AllCodepoints& all = all_codepoints();
  for (const std::string& pattern : {std::string("[^\\s\\p{L}\\p{N}]"), std::string("\\S"), std::string("\\P{L}")}) {
    auto regex = compile_onig(pattern + "+");
    std::vector<std::pair<size_t, size_t>> spans;
    ASSERT_TRUE(regex->find_all(all.text, spans).ok());
    std::vector<bool> matched(all.codepoints.size(), false);
    size_t index = 0;
    for (const auto& [a, b] : spans) {
      while (all.starts[index] < a) ++index;
      for (; index < all.starts.size() && all.starts[index] < b; ++index) matched[index] = true;
    }
    int mismatches = 0;
    for (size_t i = 0; i < all.codepoints.size(); ++i) {
      const uint32_t cp = all.codepoints[i];
      bool expected = false;
      if (pattern == "\\S") expected = !in(space, cp);
      else if (pattern == "\\P{L}") expected = !in(letters, cp);
      else expected = !in(space, cp) && !in(letters, cp) && !in(numbers, cp);
      if (matched[i] != expected && ++mismatches <= 3) ADD_FAILURE() << pattern << " at U+" << std::hex << cp;
    }
    EXPECT_EQ(mismatches, 0) << pattern;
  }
}

const char* kLlama3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

TEST(Llama3Regex, SplitsAsWorkedByHand) {
  auto regex = compile_onig(kLlama3);
  using V = std::vector<std::string>;
  // \s+(?!\S) gives back the last space so that " b" stays a word.
  EXPECT_EQ(pieces(*regex, "a   b"), (V{"a", "  ", " b"}));
  // Trailing whitespace at the end of the text is one piece.
  EXPECT_EQ(pieces(*regex, "x   "), (V{"x", "   "}));
  // Contractions in any case; digits in groups of at most three.
  EXPECT_EQ(pieces(*regex, "I'LL pay 1234567"), (V{"I", "'LL", " pay", " ", "123", "456", "7"}));
  // Newlines: \s*[\r\n]+ takes the spaces before them.
  EXPECT_EQ(pieces(*regex, "a  \r\n\nb"), (V{"a", "  \r\n\n", "b"}));
  // Punctuation with its trailing newlines; one non-letter may lead a word.
  EXPECT_EQ(pieces(*regex, "end.\n\n\"quoted\""), (V{"end", ".\n\n", "\"quoted", "\""}));
  // Long s folds to s under (?i) in both engines.
  EXPECT_EQ(pieces(*regex, "x'\xC5\xBF"), (V{"x", "'\xC5\xBF"}));
}

TEST(FindAll, EmptyMatchesFollowTheOnigCrateRule) {
  // find_iter of the onig crate: an empty match right after the previous match is skipped by one
  // character, so "a*" over "baaac" gives (0,0), (1,4), (5,5).
  auto regex = Pcre2Regex::compile("a*", false, "a*");
  ASSERT_TRUE(regex.ok());
  std::vector<std::pair<size_t, size_t>> spans;
  ASSERT_TRUE((*regex)->find_all("baaac", spans).ok());
  EXPECT_EQ(spans, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 4}, {5, 5}}));
}

TEST(FindAll, LongWhitespaceRunsDoNotExhaustTheMatcher) {
  auto regex = compile_onig(kLlama3);
  const std::string text = "a" + std::string(200000, ' ') + "b" + std::string(100000, '\n');
  const auto got = pieces(*regex, text);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1].size(), 199999u);
  EXPECT_EQ(got[2], " b");
  EXPECT_EQ(got[3].size(), 100000u);
}

TEST(RegexTranslate, RewritesAsDocumented) {
  auto t = translate_onig_pattern("\\u00e9^x$");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*t, "\\x{00e9}(?m:^)x(?m:$)");
  auto other = translate_onig_pattern("\\p{Lu}\\P{Nd}[\\p{M}]");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, "\\p{Lu}\\P{Nd}[\\p{M}]");  // properties other than L and N pass through
}

TEST(RegexTranslate, RefusesConstructsWhoseMeaningDiffers) {
  for (const char* pattern : {"\\w+", "\\bx", "\\d", "[\\S]", "[^\\P{L}]", "[a-z&&[^aeiou]]", "[[abc]]", "(?m:.)"}) {
    auto t = translate_onig_pattern(pattern);
    ASSERT_FALSE(t.ok()) << pattern;
    EXPECT_EQ(t.status().code(), StatusCode::kUnsupported) << pattern;
    EXPECT_NE(t.status().message().find(pattern), std::string::npos) << t.status().message();
  }
  EXPECT_EQ(translate_onig_pattern("[abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(translate_onig_pattern("abc\\").status().code(), StatusCode::kInvalidArgument);
  auto bad = Pcre2Regex::compile("(unclosed", false, "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not compile"), std::string::npos);
}

}  // namespace
}  // namespace kascade::tokenizer_detail
