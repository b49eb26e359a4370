// tests/unit/tokenizer/fixtures.h — loading the tokenizer fixtures that
// scripts/make_tokenizer_fixtures.py writes with Hugging Face `tokenizers` and jinja2
// (tests/data/tokenizer/), and printing strings readably in failure messages.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "kascade/tokenizer.h"

namespace kascade::testing {

std::string tokenizer_data_path(const std::string& name);  // tests/data/tokenizer/<name>
std::string read_file_or_die(const std::string& path);
nlohmann::json load_json_fixture(const std::string& name);

// A tokenizer of the fixtures (llama3 / qwen2); fails the test if it does not load.
Tokenizer load_fixture_tokenizer(const std::string& family);

// One encode case of <family>.cases.json with the abbreviations of the file expanded.
struct EncodeCase {
  std::string text;
  std::vector<int32_t> ids;          // add_special_tokens = false
  std::vector<int32_t> ids_special;  // add_special_tokens = true
  std::string decoded;               // decode(ids, skip_special_tokens = false)
  std::string decoded_skip;          // decode(ids, skip_special_tokens = true)
};
std::vector<EncodeCase> parse_encode_cases(const nlohmann::json& cases);

// "a\n\xff" -> "a\\n\\xff" (non-ASCII bytes as \x escapes).
std::string escaped(const std::string& text);
std::string ids_string(const std::vector<int32_t>& ids);

}  // namespace kascade::testing
