// tokenizer/json_fields.h — typed access to tokenizer.json / tokenizer_config.json fields whose
// errors name the field's path ("model.vocab", "pre_tokenizer.pretokenizers[1].pattern").
// Tested through the malformed-file cases of tests/unit/tokenizer/test_tokenizer_errors.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "kascade/status.h"

namespace kascade::tokenizer_detail {

using Json = nlohmann::json;

// "string", "number", ... for messages.
std::string json_kind(const Json& value);
// path + "." + key (or key alone when path is empty).
std::string field_path(std::string_view path, std::string_view key);

// The member `key` of the object `obj` at `path`: an error when obj is not an object or the member
// is absent. require_present accepts null; the others do not.
Result<const Json*> require_present(const Json& obj, std::string_view key, std::string_view path);
// nullptr when the member is absent or null.
const Json* optional_member(const Json& obj, std::string_view key);

Result<std::string> as_string(const Json& value, std::string_view path);
Result<bool> as_bool(const Json& value, std::string_view path);
Result<int64_t> as_int(const Json& value, std::string_view path);

Result<std::string> string_member(const Json& obj, std::string_view key, std::string_view path);
// The boolean member, or `fallback` when absent or null.
Result<bool> bool_member_or(const Json& obj, std::string_view key, std::string_view path, bool fallback);

}  // namespace kascade::tokenizer_detail
