// src/calibrate/json_fields.h — JSON helpers for the calibration file: parsing that names the field
// where a syntax error stopped, typed access that names the field of every missing key, wrong type
// or out-of-range value ("anchor_sets[2].anchors[1]"), and a writer that keeps arrays of numbers
// on one line. Tested through tests/unit/calibrate/test_calibration_file.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kascade/status.h"

namespace kascade::calib {

using Json = nlohmann::ordered_json;

// Parses JSON text; on a syntax error (or a number out of the double range) the Status names the
// field at which parsing stopped.
Result<Json> parse_json_text(std::string_view text);

// Indented JSON whose arrays of scalars sit on one line each.
std::string format_json(const Json& value);

// A value of a parsed document and its path from the root.
class JsonField {
 public:
  JsonField(const Json& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const Json& value() const { return *value_; }
  const std::string& path() const { return path_; }

  // This must be an object holding `key`.
  Result<JsonField> member(std::string_view key) const;
  // True when this is an object holding `key` (whatever its value).
  bool has(std::string_view key) const;
  // This must be an object whose keys are all in `allowed`.
  Status expect_only_keys(std::initializer_list<std::string_view> allowed) const;
  // This must be an array of exactly `expected_size` elements.
  Status expect_array(size_t expected_size) const;
  // This must be an array; returns its size.
  Result<size_t> array_size() const;
  // Element i of an array (i < size; check the size first).
  JsonField element(size_t i) const;

  Result<int64_t> as_int(int64_t lo, int64_t hi) const;  // an integer in [lo, hi]
  Result<double> as_finite_double() const;               // any finite number
  Result<std::string> as_string() const;
  Status expect_null() const;

 private:
  Status wrong_type(const char* expected) const;

  const Json* value_;
  std::string path_;
};

}  // namespace kascade::calib
