// tests/unit/tokenizer/test_bpe_model.cpp — BPE rules on tiny hand-built vocabularies whose results
// are worked out by hand: merge priority by rank, ignore_merges, unknown characters (dropped, unk,
// fused unk), and the empty word.
#include <gtest/gtest.h>

#include "kascade/tokenizer.h"

namespace kascade {
namespace {

// A tokenizer.json with no pre-tokenizer (the whole text is one word) over this BPE model.
Tokenizer make(const std::string& model_fields) {
  const std::string json = R"({"model": {"type": "BPE", )" + model_fields + R"(}, "decoder": {"type": "ByteLevel"}})";
  auto tokenizer = Tokenizer::from_json(json, "hand-built");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  return std::move(tokenizer).value();
}

const char* kVocab = R"("vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "<unk>": 6})";

TEST(BpeModel, LowestRankMergesFirst) {
  // "abc": (b,c) has rank 0, (a,b) rank 1 -> a + bc, then (a,bc) rank 2 -> abc.
  EXPECT_EQ(*make(std::string(kVocab) + R"(, "merges": ["b c", "a b", "a bc"])").encode("abc", false),
            std::vector<int32_t>{5});
  // Without (a,bc): a + bc stays.
  EXPECT_EQ(*make(std::string(kVocab) + R"(, "merges": ["b c", "a b"])").encode("abc", false),
            (std::vector<int32_t>{0, 4}));
  // (a,b) first -> ab + c; no (ab,c) merge.
  EXPECT_EQ(*make(std::string(kVocab) + R"(, "merges": ["a b", "b c"])").encode("abc", false),
            (std::vector<int32_t>{3, 2}));
  // Equal pairs merge leftmost first: "bcbc" -> bc bc.
  EXPECT_EQ(*make(std::string(kVocab) + R"(, "merges": [["b", "c"]])").encode("bcbc", false),
            (std::vector<int32_t>{4, 4}));
}

TEST(BpeModel, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  const std::string merges = R"(, "merges": ["a b", "b c"])";
  EXPECT_EQ(*make(std::string(kVocab) + merges + R"(, "ignore_merges": true)").encode("abc", false),
            std::vector<int32_t>{5});
  EXPECT_EQ(*make(std::string(kVocab) + merges + R"(, "ignore_merges": false)").encode("abc", false),
            (std::vector<int32_t>{3, 2}));
}

TEST(BpeModel, UnknownCharacters) {
  const std::string merges = R"(, "merges": [])";
  // Without unk_token they are dropped.
  EXPECT_EQ(*make(std::string(kVocab) + merges).encode("axxb", false), (std::vector<int32_t>{0, 1}));
  // With unk_token each becomes <unk>, or one <unk> per run with fuse_unk.
  EXPECT_EQ(*make(std::string(kVocab) + merges + R"(, "unk_token": "<unk>")").encode("axxb", false),
            (std::vector<int32_t>{0, 6, 6, 1}));
  EXPECT_EQ(*make(std::string(kVocab) + merges + R"(, "unk_token": "<unk>", "fuse_unk": true)").encode("axxbx", false),
            (std::vector<int32_t>{0, 6, 1, 6}));
  EXPECT_TRUE(make(std::string(kVocab) + merges).encode("", false)->empty());
}

}  // namespace
}  // namespace kascade
