// json_fields.cpp — see json_fields.h. Tested through tests/unit/calibrate/test_calibration_file.cpp.
#include "calibrate/json_fields.h"

#include <cmath>
#include <limits>
#include <vector>

namespace kascade::calib {

namespace {

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : detail::concat(parent, ".", key);
}

// Where the parser is: the chain of open objects (with their current key) and arrays (with the
// index of the element being read).
struct ParseFrame {
  bool is_array = false;
  std::string key;
  size_t index = 0;
};

std::string frames_path(const std::vector<ParseFrame>& frames) {
  std::string path;
  for (const ParseFrame& f : frames) {
    if (f.is_array) {
      path += detail::concat("[", f.index, "]");
    } else if (!f.key.empty()) {
      path = child_path(path, f.key);
    }
  }
  return path.empty() ? "the document root" : path;
}

void format_into(const Json& value, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent) + 2, ' ');
  if (value.is_object() && !value.empty()) {
    out += "{\n";
    size_t i = 0;
    for (auto it = value.begin(); it != value.end(); ++it, ++i) {
      out += pad + Json(it.key()).dump() + ": ";
      format_into(it.value(), indent + 2, out);
      out += i + 1 < value.size() ? ",\n" : "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ') + "}";
    return;
  }
  if (value.is_array() && !value.empty()) {
    bool scalars = true;
    for (const Json& e : value) scalars = scalars && !e.is_structured();
    if (scalars) {
      out += "[";
      for (size_t i = 0; i < value.size(); ++i) {
        if (i) out += ", ";
        out += value[i].dump();
      }
      out += "]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < value.size(); ++i) {
      out += pad;
      format_into(value[i], indent + 2, out);
      out += i + 1 < value.size() ? ",\n" : "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ') + "]";
    return;
  }
  out += value.dump();
}

}  // namespace

Result<Json> parse_json_text(std::string_view text) {
  std::vector<ParseFrame> frames;
  auto advance = [&frames]() {
    if (!frames.empty() && frames.back().is_array) ++frames.back().index;
  };
  Json::parser_callback_t track = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        frames.push_back(ParseFrame{false, "", 0});
        break;
      case Json::parse_event_t::array_start:
        frames.push_back(ParseFrame{true, "", 0});
        break;
      case Json::parse_event_t::key:
        if (!frames.empty()) frames.back().key = parsed.is_string() ? parsed.get<std::string>() : "";
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        advance();
        break;
      case Json::parse_event_t::value:
        advance();
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), track);
  } catch (const Json::exception& e) {
    return data_loss("JSON error at ", frames_path(frames), ": ", e.what());
  }
}

std::string format_json(const Json& value) {
  std::string out;
  format_into(value, 0, out);
  out += "\n";
  return out;
}

Status JsonField::wrong_type(const char* expected) const {
  std::string got = value_->type_name();
  if (value_->is_primitive() && !value_->is_null()) {
    got += ' ';
    got += value_->dump();
  }
  return invalid_argument(path_.empty() ? "the document" : path_, ": expected ", expected, ", got ", got);
}

Result<JsonField> JsonField::member(std::string_view key) const {
  if (!value_->is_object()) return wrong_type("an object");
  auto it = value_->find(key);
  if (it == value_->end()) return invalid_argument(child_path(path_, key), " is missing");
  return JsonField(*it, child_path(path_, key));
}

bool JsonField::has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

Status JsonField::expect_only_keys(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) return wrong_type("an object");
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    bool known = false;
    for (std::string_view a : allowed) known = known || it.key() == a;
    if (!known) return invalid_argument(child_path(path_, it.key()), " is not a known key");
  }
  return ok_status();
}

Result<size_t> JsonField::array_size() const {
  if (!value_->is_array()) return wrong_type("an array");
  return value_->size();
}

Status JsonField::expect_array(size_t expected_size) const {
  KC_ASSIGN_OR_RETURN(const size_t size, array_size());
  KC_CHECK_ARG(size == expected_size, path_, " has ", size, " elements; expected ", expected_size);
  return ok_status();
}

JsonField JsonField::element(size_t i) const { return JsonField((*value_)[i], detail::concat(path_, "[", i, "]")); }

Result<int64_t> JsonField::as_int(int64_t lo, int64_t hi) const {
  if (!value_->is_number_integer()) return wrong_type("an integer");
  if (value_->is_number_unsigned() &&
      value_->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return invalid_argument(path_, " is ", value_->dump(), "; expected ", lo, "..", hi);
  }
  const int64_t v = value_->get<int64_t>();
  KC_CHECK_ARG(v >= lo && v <= hi, path_, " is ", v, "; expected ", lo, "..", hi);
  return v;
}

Result<double> JsonField::as_finite_double() const {
  if (!value_->is_number()) return wrong_type("a number");
  const double v = value_->get<double>();
  KC_CHECK_ARG(std::isfinite(v), path_, " is ", v, "; expected a finite number");
  return v;
}

Result<std::string> JsonField::as_string() const {
  if (!value_->is_string()) return wrong_type("a string");
  return value_->get<std::string>();
}

Status JsonField::expect_null() const {
  if (!value_->is_null()) return wrong_type("null");
  return ok_status();
}

}  // namespace kascade::calib
