// tests/unit/tokenizer/test_tokenizer_behaviour.cpp — properties that hold beyond the fixture
// strings: decode(encode(s)) == s (NFC(s) for the NFC tokenizer) on the fixture strings and on
// random valid UTF-8 seeded from the test name; special tokens matched whole with and without
// add_special_tokens; BOS only from the Llama-3 post-processor; skip_special_tokens keeps Qwen3's
// non-special <think>; token <-> id; inputs refused with clear errors; a 32K-token prompt; encoding
// from several threads at once.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fixtures.h"
#include "kascade/tokenizer.h"
#include "testing/harness.h"
#include "tokenizer/unicode_text.h"

namespace kascade {
namespace {

// Random valid UTF-8 drawn from ASCII, Latin, CJK, emoji, combining marks and whitespace.
std::string random_text(std::mt19937_64& rng, size_t codepoints) {
  static const std::vector<std::pair<char32_t, char32_t>> blocks = {
      {0x20, 0x7E}, {0x09, 0x0D}, {0xA0, 0x24F}, {0x300, 0x36F}, {0x400, 0x4FF}, {0x600, 0x6FF}, {0x900, 0x97F},
      {0x3040, 0x30FF}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00}, {0x1F300, 0x1F64F}, {0x2000, 0x206F}, {0x10000, 0x10FFFF}};
  std::string out;
  for (size_t i = 0; i < codepoints; ++i) {
    const auto& block = blocks[rng() % blocks.size()];
    char32_t cp = block.first + static_cast<char32_t>(rng() % (block.second - block.first + 1));
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
    tokenizer_detail::append_utf8(out, cp);
  }
  return out;
}

class TokenizerRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerRoundTrip, DecodeOfEncodeGivesTheTextBack) {
  const Tokenizer tokenizer = testing::load_fixture_tokenizer(GetParam());
  const bool nfc = GetParam() == "qwen2";
  const auto expect_round_trip = [&](const std::string& text) {
    auto ids = tokenizer.encode(text, true);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    auto back = tokenizer.decode(*ids, /*skip_special_tokens=*/false);
    ASSERT_TRUE(back.ok());
    // The Llama-3 post-processor adds BOS: compare without it.
    std::string expected = text;
    if (!nfc) expected = "<|begin_of_text|>" + text;
    if (nfc) expected = *tokenizer_detail::nfc(text);
    ASSERT_EQ(testing::escaped(*back), testing::escaped(expected));
  };
  for (const auto& c : testing::parse_encode_cases(testing::load_json_fixture(GetParam() + ".cases.json").at("cases"))) {
    expect_round_trip(c.text);
  }
  auto rng = kascade::testing::rng_for_test();
  for (int i = 0; i < 300; ++i) expect_round_trip(random_text(rng, 1 + rng() % 60));
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerRoundTrip, ::testing::Values("llama3", "qwen2"));

TEST(TokenizerSpecialTokens, MatchedWholeWithOrWithoutAddSpecialTokens) {
  const Tokenizer llama = testing::load_fixture_tokenizer("llama3");
  const int32_t eot = *llama.token_to_id("<|eot_id|>");
  const int32_t bos = *llama.token_to_id("<|begin_of_text|>");
  EXPECT_TRUE(llama.is_special(eot));
  EXPECT_EQ(*llama.id_to_token(eot), "<|eot_id|>");
  EXPECT_EQ(*llama.encode("<|eot_id|>", false), std::vector<int32_t>{eot});
  EXPECT_EQ(*llama.encode("<|eot_id|>", true), (std::vector<int32_t>{bos, eot}));
  EXPECT_EQ(*llama.encode("", true), std::vector<int32_t>{bos});
  EXPECT_TRUE(llama.encode("", false)->empty());
  // Text around a special token is encoded on its own: hi<|eot_id|>hi = encode(hi) eot encode(hi).
  const auto hi = *llama.encode("hi", false);
  std::vector<int32_t> expected = hi;
  expected.push_back(eot);
  expected.insert(expected.end(), hi.begin(), hi.end());
  EXPECT_EQ(*llama.encode("hi<|eot_id|>hi", false), expected);
  // A token that is only almost special is ordinary text.
  const auto almost = *llama.encode("<|eot_id|", false);
  EXPECT_EQ(std::count(almost.begin(), almost.end(), eot), 0);
  // skip_special_tokens drops it and the BOS.
  EXPECT_EQ(*llama.decode(std::vector<int32_t>{bos, eot}, true), "");
  EXPECT_EQ(*llama.decode(*llama.encode("a<|eot_id|>b", true), true), "ab");
}

TEST(TokenizerSpecialTokens, QwenAddsNoBosAndKeepsNonSpecialAddedTokens) {
  const Tokenizer qwen = testing::load_fixture_tokenizer("qwen2");
  const int32_t im_start = *qwen.token_to_id("<|im_start|>");
  const int32_t think = *qwen.token_to_id("<think>");
  EXPECT_TRUE(qwen.is_special(im_start));
  EXPECT_FALSE(qwen.is_special(think));
  EXPECT_EQ(*qwen.encode("<think>", true), std::vector<int32_t>{think});  // no BOS: no post-processor ids
  const auto ids = *qwen.encode("<|im_start|>user\n<think>x</think><|im_end|>", true);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(*qwen.decode(ids, true), "user\n<think>x</think>");
  EXPECT_EQ(*qwen.decode(ids, false), "<|im_start|>user\n<think>x</think><|im_end|>");
}

TEST(TokenizerInputs, RefusedWithClearErrors) {
  const Tokenizer llama = testing::load_fixture_tokenizer("llama3");
  auto bad_text = llama.encode(std::string("ok\xC3", 3), false);
  ASSERT_FALSE(bad_text.ok());
  EXPECT_EQ(bad_text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_text.status().message().find("not valid UTF-8"), std::string::npos);
  for (const int32_t id : {-1, static_cast<int32_t>(llama.id_limit()), 1 << 30}) {
    auto text = llama.decode(std::vector<int32_t>{5, id}, false);
    ASSERT_FALSE(text.ok()) << id;
    EXPECT_EQ(text.status().code(), StatusCode::kOutOfRange);
    EXPECT_NE(text.status().message().find("ids[1] = " + std::to_string(id)), std::string::npos) << text.status().message();
    EXPECT_EQ(llama.id_to_token(id).status().code(), StatusCode::kOutOfRange);
    EXPECT_EQ(llama.token_bytes(id).status().code(), StatusCode::kOutOfRange);
  }
  EXPECT_FALSE(llama.token_to_id("no such token").has_value());
}

TEST(TokenizerTokenBytes, JoinToTheDecodedText) {
  const Tokenizer qwen = testing::load_fixture_tokenizer("qwen2");
  const std::string text = "streaming 😀 text, 日本語 and <|im_end|> done";
  const auto ids = *qwen.encode(text, false);
  std::string joined;
  for (const int32_t id : ids) joined += *qwen.token_bytes(id);
  EXPECT_EQ(joined, text);
}

TEST(TokenizerLongPrompt, EncodesA32KTokenPromptQuickly) {
  const Tokenizer llama = testing::load_fixture_tokenizer("llama3");
  const auto cases = testing::parse_encode_cases(testing::load_json_fixture("llama3.cases.json").at("cases"));
  std::string prompt;
  std::vector<int32_t> expected;
  for (size_t i = 0; expected.size() < 32768; i = (i + 1) % cases.size()) {
    // Joined with a special token, each case's ids stay exactly what tokenizers gave for it alone.
    prompt += cases[i].text + "<|eot_id|>";
    expected.insert(expected.end(), cases[i].ids.begin(), cases[i].ids.end());
    expected.push_back(*llama.token_to_id("<|eot_id|>"));
  }
  const auto start = std::chrono::steady_clock::now();
  auto ids = llama.encode(prompt, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, expected);
  std::printf("encoded %zu tokens (%zu bytes) in %.3f s\n", ids->size(), prompt.size(), seconds);
  EXPECT_LT(seconds, 10.0);  // generous: ~0.05 s in a release build; the bound catches quadratic behaviour
}

TEST(TokenizerThreads, ConcurrentEncodesAgree) {
  const Tokenizer qwen = testing::load_fixture_tokenizer("qwen2");
  const auto cases = testing::parse_encode_cases(testing::load_json_fixture("qwen2.cases.json").at("cases"));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < cases.size(); i += 2) {
        auto ids = qwen.encode(cases[i].text, false);
        if (!ids.ok() || *ids != cases[i].ids) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace kascade
