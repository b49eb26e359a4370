// tokenizer/json_fields.cpp — typed JSON field access with path-naming errors.
// Tested through tests/unit/tokenizer/test_tokenizer_errors.cpp.
#include "tokenizer/json_fields.h"

namespace kascade::tokenizer_detail {

std::string json_kind(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a float";
    default: return "an unexpected JSON value";
  }
}

std::string field_path(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return std::string(path) + "." + std::string(key);
}

Result<const Json*> require_present(const Json& obj, std::string_view key, std::string_view path) {
  if (!obj.is_object()) {
    return invalid_argument(path.empty() ? std::string("the top level") : std::string(path), " must be an object, found ",
                            json_kind(obj));
  }
  const auto it = obj.find(std::string(key));
  if (it == obj.end()) return invalid_argument("missing field ", field_path(path, key));
  return &*it;
}

const Json* optional_member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> as_string(const Json& value, std::string_view path) {
  if (!value.is_string()) return invalid_argument(path, " must be a string, found ", json_kind(value));
  return value.get<std::string>();
}

Result<bool> as_bool(const Json& value, std::string_view path) {
  if (!value.is_boolean()) return invalid_argument(path, " must be a boolean, found ", json_kind(value));
  return value.get<bool>();
}

Result<int64_t> as_int(const Json& value, std::string_view path) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return invalid_argument(path, " is too large: ", v);
    return static_cast<int64_t>(v);
  }
  if (!value.is_number_integer()) return invalid_argument(path, " must be an integer, found ", json_kind(value));
  return value.get<int64_t>();
}

Result<std::string> string_member(const Json& obj, std::string_view key, std::string_view path) {
  KC_ASSIGN_OR_RETURN(const Json* member, require_present(obj, key, path));
  return as_string(*member, field_path(path, key));
}

Result<bool> bool_member_or(const Json& obj, std::string_view key, std::string_view path, bool fallback) {
  const Json* member = optional_member(obj, key);
  if (member == nullptr) return fallback;
  return as_bool(*member, field_path(path, key));
}

}  // namespace kascade::tokenizer_detail
