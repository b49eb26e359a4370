// tokenizer/file_text.h — reads a whole text file for the tokenizer loaders: NotFound naming the
// path when it does not exist, InvalidArgument for a directory, IoError when reading fails.
// Tested by tests/unit/tokenizer/test_tokenizer_errors.cpp.
#pragma once

#include <string>

#include "kascade/status.h"

namespace kascade::tokenizer_detail {

Result<std::string> read_text_file(const std::string& path, const char* what);

}  // namespace kascade::tokenizer_detail
