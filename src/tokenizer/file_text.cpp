// tokenizer/file_text.cpp — whole-file reads with clear errors.
// Tested by tests/unit/tokenizer/test_tokenizer_errors.cpp.
#include "tokenizer/file_text.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kascade::tokenizer_detail {

Result<std::string> read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return not_found(what, " not found: ", path);
  if (std::filesystem::is_directory(status)) return invalid_argument(what, " path is a directory, not a file: ", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open ", what, " ", path, ": ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error("reading ", what, " ", path, " failed: ", std::strerror(errno));
  return text.str();
}

}  // namespace kascade::tokenizer_detail
