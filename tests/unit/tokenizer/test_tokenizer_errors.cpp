// tests/unit/tokenizer/test_tokenizer_errors.cpp — missing and malformed tokenizer.json files and
// unsupported features give a Status that names the path, the field or the feature; nothing loads
// silently with a different meaning.
#include <gtest/gtest.h>

#include <filesystem>

#include "fixtures.h"
#include "kascade/tokenizer.h"

namespace kascade {
namespace {

// The llama3 fixture with one change applied to its JSON.
Result<Tokenizer> llama3_with(const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json spec = testing::load_json_fixture("llama3.tokenizer.json");
  change(spec);
  return Tokenizer::from_json(spec.dump(), "edited.json");
}

void expect_error(const Result<Tokenizer>& result, StatusCode code, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status().to_string();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(result.status().message().find(fragment), std::string::npos)
        << "\"" << fragment << "\" not in: " << result.status().message();
  }
}

TEST(TokenizerFiles, MissingFileIsNotFoundNamingThePath) {
  const std::string path = testing::tokenizer_data_path("no_such_dir/tokenizer.json");
  expect_error(Tokenizer::from_file(path), StatusCode::kNotFound, {"not found", path});
  expect_error(Tokenizer::from_file(testing::tokenizer_data_path("")), StatusCode::kInvalidArgument, {"directory"});
}

TEST(TokenizerFiles, MalformedJson) {
  expect_error(Tokenizer::from_json("{\"model\": ", "broken.json"), StatusCode::kInvalidArgument,
               {"broken.json", "malformed JSON"});
  expect_error(Tokenizer::from_json("[1, 2]", "list.json"), StatusCode::kInvalidArgument, {"list.json", "object"});
  expect_error(Tokenizer::from_json("{}", "empty.json"), StatusCode::kInvalidArgument, {"missing field model"});
}

TEST(TokenizerFiles, WrongFieldTypesNameTheField) {
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["vocab"]["a"] = "x"; }), StatusCode::kInvalidArgument,
               {"model.vocab[\"a\"]", "integer"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["vocab"] = nlohmann::json::array(); }),
               StatusCode::kInvalidArgument, {"model.vocab must be an object"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["merges"][3] = "a b c"; }), StatusCode::kInvalidArgument,
               {"model.merges[3]", "two tokens"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["merges"][2] = 7; }), StatusCode::kInvalidArgument,
               {"model.merges[2]"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["merges"].push_back("zzzq qqqz"); }),
               StatusCode::kInvalidArgument, {"uses \"zzzq\"", "not in model.vocab"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["vocab"]["duplicate"] = 7; }),
               StatusCode::kInvalidArgument, {"gives id 7 to both"});
  expect_error(llama3_with([](nlohmann::json& j) { j["added_tokens"][0]["content"] = 5; }), StatusCode::kInvalidArgument,
               {"added_tokens[0].content must be a string"});
  expect_error(llama3_with([](nlohmann::json& j) { j["added_tokens"][1]["id"] = 3; }), StatusCode::kInvalidArgument,
               {"added_tokens[1].id is 3"});
  expect_error(llama3_with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(a"}}; }),
               StatusCode::kInvalidArgument, {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile"});
  expect_error(llama3_with([](nlohmann::json& j) {
                 j["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<nope>";
               }),
               StatusCode::kInvalidArgument, {"<nope>"});
}

TEST(TokenizerFiles, UnsupportedFeaturesAreNamed) {
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }), StatusCode::kUnsupported,
               {"model.type 'WordPiece'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}}; }),
               StatusCode::kUnsupported, {"pre_tokenizer.pretokenizers[0] type 'Metaspace'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
               StatusCode::kUnsupported, {"behavior 'Removed'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }),
               StatusCode::kUnsupported, {"invert"});
  expect_error(llama3_with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "\\w+"}}; }),
               StatusCode::kUnsupported, {"\\w"});
  expect_error(llama3_with([](nlohmann::json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), StatusCode::kUnsupported,
               {"normalizer type 'Lowercase'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["decoder"] = {{"type", "Metaspace"}}; }), StatusCode::kUnsupported,
               {"decoder type 'Metaspace'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["decoder"] = nullptr; }), StatusCode::kUnsupported, {"decoder"});
  expect_error(llama3_with([](nlohmann::json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }),
               StatusCode::kUnsupported, {"post_processor type 'BertProcessing'"});
  expect_error(llama3_with([](nlohmann::json& j) { j["truncation"] = {{"max_length", 8}}; }), StatusCode::kUnsupported,
               {"truncation"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }), StatusCode::kUnsupported,
               {"model.dropout"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }), StatusCode::kUnsupported,
               {"model.byte_fallback"});
  expect_error(llama3_with([](nlohmann::json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
               StatusCode::kUnsupported, {"model.continuing_subword_prefix"});
}

TEST(TokenizerFiles, OptionalPiecesMayBeAbsent) {
  // No normalizer, pre-tokenizer, post-processor or added tokens: still a valid tokenizer.
  auto tokenizer = llama3_with([](nlohmann::json& j) {
    j.erase("normalizer");
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = nullptr;
    j.erase("added_tokens");
  });
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  EXPECT_EQ(tokenizer->encode("", true)->size(), 0u);
  EXPECT_EQ(tokenizer->vocab_size(), 2500);
}

}  // namespace
}  // namespace kascade
