// tests/unit/tokenizer/fixtures.cpp — fixture loading for the tokenizer tests.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kascade::testing {

std::string tokenizer_data_path(const std::string& name) { return std::string(KASCADE_TEST_DATA_DIR) + "/tokenizer/" + name; }

std::string read_file_or_die(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open fixture " << path << " (run scripts/make_tokenizer_fixtures.py)";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json load_json_fixture(const std::string& name) {
  return nlohmann::json::parse(read_file_or_die(tokenizer_data_path(name)));
}

Tokenizer load_fixture_tokenizer(const std::string& family) {
  const std::string path = tokenizer_data_path(family + ".tokenizer.json");
  auto tokenizer = Tokenizer::from_file(path);
  if (!tokenizer.ok()) {
    ADD_FAILURE() << "loading " << path << ": " << tokenizer.status().to_string();
    // A tokenizer that can never be used: tests fail on the line above.
    return std::move(Tokenizer::from_json(R"({"model":{"type":"BPE","vocab":{},"merges":[]},"decoder":{"type":"ByteLevel"}})").value());
  }
  return std::move(tokenizer).value();
}

std::vector<EncodeCase> parse_encode_cases(const nlohmann::json& cases) {
  std::vector<EncodeCase> out;
  for (const auto& c : cases) {
    EncodeCase e;
    e.text = c.at("text").get<std::string>();
    e.ids = c.at("ids").get<std::vector<int32_t>>();
    if (c.contains("ids_special")) {
      e.ids_special = c.at("ids_special").get<std::vector<int32_t>>();
    } else if (c.contains("special_prefix")) {
      e.ids_special = c.at("special_prefix").get<std::vector<int32_t>>();
      e.ids_special.insert(e.ids_special.end(), e.ids.begin(), e.ids.end());
      const auto suffix = c.at("special_suffix").get<std::vector<int32_t>>();
      e.ids_special.insert(e.ids_special.end(), suffix.begin(), suffix.end());
    } else {
      e.ids_special = e.ids;
    }
    e.decoded = c.contains("decoded") ? c.at("decoded").get<std::string>() : e.text;
    e.decoded_skip = c.contains("decoded_skip") ? c.at("decoded_skip").get<std::string>() : e.decoded;
    out.push_back(std::move(e));
  }
  return out;
}

std::string escaped(const std::string& text) {
  std::string out;
  char buffer[8];
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7F) {
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << ']';
  return out.str();
}

}  // namespace kascade::testing
