// model_test_util.h — helpers shared by the tests of src/model: fixture files of
// tests/data/model (made by scripts/make_model_fixtures.py) and scratch directories.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/harness.h"

namespace kascade::testing {

inline std::filesystem::path model_data_dir() { return std::filesystem::path(KASCADE_TEST_DATA_DIR) / "model"; }

inline std::string read_file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline nlohmann::json read_model_fixture(const std::string& name) {
  return nlohmann::json::parse(read_file_text(model_data_dir() / name));
}

inline void write_file_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh directory named after the running test, removed at the end of the scope.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = test_temp_path("scratch");
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kascade::testing
