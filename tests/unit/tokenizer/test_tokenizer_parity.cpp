// tests/unit/tokenizer/test_tokenizer_parity.cpp — exact parity with Hugging Face `tokenizers`:
// ids (with and without special tokens) and decoded text (with and without skip_special_tokens)
// for every fixture string of the Llama-3-style and Qwen2-style tokenizers, decoded text of random
// id sequences (invalid UTF-8 included), the tokenizer variants (added-token flags, GPT-2 ByteLevel,
// Split on a string) and the merges written in both forms. The expectations come from
// scripts/make_tokenizer_fixtures.py (tokenizers, version recorded in each fixture file).
#include <gtest/gtest.h>

#include "fixtures.h"
#include "kascade/tokenizer.h"

namespace kascade {
namespace {

using testing::EncodeCase;
using testing::escaped;
using testing::ids_string;

// Runs every encode case; reports at most a few mismatches in full and counts the rest.
void expect_encode_parity(const Tokenizer& tokenizer, const std::vector<EncodeCase>& cases, const std::string& label) {
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const EncodeCase& c = cases[i];
    auto ids = tokenizer.encode(c.text, false);
    auto ids_special = tokenizer.encode(c.text, true);
    ASSERT_TRUE(ids.ok() && ids_special.ok()) << label << " case " << i << ": " << ids.status().to_string();
    auto decoded = tokenizer.decode(c.ids, false);
    auto decoded_skip = tokenizer.decode(c.ids, true);
    ASSERT_TRUE(decoded.ok() && decoded_skip.ok()) << label << " case " << i << ": " << decoded.status().to_string();
    const bool ok = *ids == c.ids && *ids_special == c.ids_special && *decoded == c.decoded &&
                    *decoded_skip == c.decoded_skip;
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << label << " case " << i << " text \"" << escaped(c.text) << "\"\n  ids      " << ids_string(*ids)
                    << "\n  expected " << ids_string(c.ids) << "\n  with special " << ids_string(*ids_special)
                    << " expected " << ids_string(c.ids_special) << "\n  decoded \"" << escaped(*decoded)
                    << "\" expected \"" << escaped(c.decoded) << "\"\n  decoded skip \"" << escaped(*decoded_skip)
                    << "\" expected \"" << escaped(c.decoded_skip) << "\"";
    }
  }
  EXPECT_EQ(failures, 0) << label << ": " << failures << " of " << cases.size() << " cases differ from tokenizers";
}

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, EncodeAndDecodeEveryFixtureString) {
  const nlohmann::json fixture = testing::load_json_fixture(GetParam() + ".cases.json");
  const Tokenizer tokenizer = testing::load_fixture_tokenizer(GetParam());
  const auto cases = testing::parse_encode_cases(fixture.at("cases"));
  ASSERT_GE(cases.size(), 1000u);
  expect_encode_parity(tokenizer, cases, GetParam() + " (tokenizers " + fixture.at("tokenizers_version").get<std::string>() + ")");
}

TEST_P(TokenizerParity, DecodeRandomIdSequences) {
  const nlohmann::json fixture = testing::load_json_fixture(GetParam() + ".cases.json");
  const Tokenizer tokenizer = testing::load_fixture_tokenizer(GetParam());
  int invalid_utf8_sequences = 0;
  for (const auto& c : fixture.at("decode_cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    auto text = tokenizer.decode(ids, false);
    auto text_skip = tokenizer.decode(ids, true);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    ASSERT_TRUE(text_skip.ok()) << text_skip.status().to_string();
    EXPECT_EQ(escaped(*text), escaped(c.at("text").get<std::string>())) << "ids " << ids_string(ids);
    EXPECT_EQ(escaped(*text_skip), escaped(c.at("text_skip").get<std::string>())) << "ids " << ids_string(ids);
    if (text->find("\xEF\xBF\xBD") != std::string::npos) ++invalid_utf8_sequences;
  }
  // The fixture is only a test of UTF-8 repair if it holds such sequences.
  EXPECT_GT(invalid_utf8_sequences, 20);
}

TEST_P(TokenizerParity, VocabularySize) {
  const nlohmann::json fixture = testing::load_json_fixture(GetParam() + ".cases.json");
  const Tokenizer tokenizer = testing::load_fixture_tokenizer(GetParam());
  EXPECT_EQ(tokenizer.vocab_size(), fixture.at("vocab_size").get<int64_t>());
  EXPECT_EQ(tokenizer.id_limit(), fixture.at("vocab_size").get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerParity, ::testing::Values("llama3", "qwen2"));

// Each variant replaces top-level fields of the qwen2 tokenizer.json, exactly as the fixture script
// did before asking tokenizers for the expectations.
TEST(TokenizerVariants, MatchTokenizers) {
  const nlohmann::json fixture = testing::load_json_fixture("variants.json");
  const nlohmann::json base = testing::load_json_fixture(fixture.at("base").get<std::string>());
  ASSERT_EQ(fixture.at("variants").size(), 3u);
  for (const auto& variant : fixture.at("variants")) {
    nlohmann::json spec = base;
    for (const auto& [key, value] : variant.at("override").items()) spec[key] = value;
    const std::string name = variant.at("name").get<std::string>();
    auto tokenizer = Tokenizer::from_json(spec.dump(), name);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    const auto cases = testing::parse_encode_cases(variant.at("cases"));
    ASSERT_GE(cases.size(), 150u);
    expect_encode_parity(*tokenizer, cases, name);
  }
}

// Meta's Llama-3 file writes merges as "a b" strings, newer files as ["a", "b"] lists: both load to
// the same model.
TEST(TokenizerMerges, StringAndListFormsAgree) {
  nlohmann::json spec = testing::load_json_fixture("llama3.tokenizer.json");
  ASSERT_TRUE(spec["model"]["merges"][0].is_string());
  nlohmann::json lists = nlohmann::json::array();
  for (const auto& merge : spec["model"]["merges"]) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    lists.push_back({text.substr(0, space), text.substr(space + 1)});
  }
  spec["model"]["merges"] = lists;
  auto list_form = Tokenizer::from_json(spec.dump(), "llama3 with list merges");
  ASSERT_TRUE(list_form.ok()) << list_form.status().to_string();
  const auto cases = testing::parse_encode_cases(testing::load_json_fixture("llama3.cases.json").at("cases"));
  expect_encode_parity(*list_form, cases, "llama3 with list merges");
}

}  // namespace
}  // namespace kascade
