// npy_reader.cpp — a minimal NumPy .npy reader for published head maps: format versions 1.0, 2.0
// and 3.0, dtype '<i4' or '<i8', C order, exactly two dimensions. The header dict is parsed as the
// small Python literal numpy writes ({'descr': '<i4', 'fortran_order': False, 'shape': (32, 8), }).
// Everything else is refused with a message saying what was found.
// Tested by tests/unit/calibrate/test_npy_import.cpp (files written byte by byte by the test).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <variant>

#include "kascade/calibration.h"

namespace kascade::calib {

namespace {

// A header value: a string, a boolean, or a tuple of integers.
using HeaderValue = std::variant<std::string, bool, std::vector<int64_t>>;

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Result<std::map<std::string, HeaderValue>> parse_dict() {
    std::map<std::string, HeaderValue> dict;
    skip_space();
    KC_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skip_space();
      if (peek() == '}') break;
      KC_ASSIGN_OR_RETURN(std::string key, parse_string());
      skip_space();
      KC_RETURN_IF_ERROR(expect(':'));
      skip_space();
      KC_ASSIGN_OR_RETURN(HeaderValue value, parse_value());
      if (dict.count(key)) return error("key '" + key + "' appears twice");
      dict.emplace(std::move(key), std::move(value));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      return error("expected ',' or '}'");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) return error("unexpected text after the header dict");
    return dict;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  Status error(const std::string& what) const {
    return data_loss(".npy header: ", what, " at offset ", pos_, " of \"", text_, "\"");
  }
  Status expect(char c) {
    if (peek() != c) return error(std::string("expected '") + c + "'");
    ++pos_;
    return ok_status();
  }
  Result<std::string> parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') return error("expected a quoted string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  Result<HeaderValue> parse_value() {
    const char c = peek();
    if (c == '\'' || c == '"') {
      KC_ASSIGN_OR_RETURN(std::string s, parse_string());
      return HeaderValue(std::move(s));
    }
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return HeaderValue(true);
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return HeaderValue(false);
    }
    if (c == '(') return parse_tuple();
    return error("expected a string, True, False or a tuple");
  }
  Result<HeaderValue> parse_tuple() {
    ++pos_;  // '('
    std::vector<int64_t> values;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("expected a non-negative integer");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (int64_t{1} << 50)) return error("dimension too large");
        v = v * 10 + (peek() - '0');
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      values.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ')') break;
      return error("expected ',' or ')' in a tuple");
    }
    ++pos_;  // ')'
    return HeaderValue(std::move(values));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint64_t read_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += detail::concat(i ? ", " : "", shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

Result<NpyIntMatrix> parse_npy_int_matrix(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || !std::equal(kMagic, kMagic + 6, bytes.begin())) {
    return data_loss(".npy: not a NumPy file (the magic string \\x93NUMPY is missing)");
  }
  const int major = bytes[6];
  const int minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return unsupported(".npy: format version ", major, ".", minor, "; this reader knows 1.0, 2.0 and 3.0");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) return data_loss(".npy: truncated header length");
  const size_t header_len = static_cast<size_t>(read_le(bytes.data() + 8, static_cast<int>(length_bytes)));
  const size_t data_offset = 8 + length_bytes + header_len;
  if (bytes.size() < data_offset) {
    return data_loss(".npy: header of ", header_len, " bytes runs past the end of the file (", bytes.size(), " bytes)");
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8 + length_bytes, header_len);
  KC_ASSIGN_OR_RETURN(const auto dict, HeaderParser(header).parse_dict());
  for (const auto& [key, value] : dict) {
    if (key != "descr" && key != "fortran_order" && key != "shape") {
      return data_loss(".npy header: unknown key '", key, "'");
    }
  }
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!dict.count(key)) return data_loss(".npy header: key '", key, "' is missing");
  }
  const auto* descr = std::get_if<std::string>(&dict.at("descr"));
  const auto* fortran = std::get_if<bool>(&dict.at("fortran_order"));
  const auto* shape = std::get_if<std::vector<int64_t>>(&dict.at("shape"));
  if (!descr || !fortran || !shape) {
    return data_loss(".npy header: 'descr' must be a string, 'fortran_order' a boolean and 'shape' a tuple");
  }

  int item_size = 0;
  if (*descr == "<i4") {
    item_size = 4;
  } else if (*descr == "<i8") {
    item_size = 8;
  } else if (!descr->empty() && descr->front() == '>') {
    return unsupported(".npy: dtype '", *descr, "' is big-endian; a head map must be little-endian int32 or "
                       "int64 ('<i4' or '<i8')");
  } else {
    return unsupported(".npy: dtype '", *descr, "' is not supported; a head map must be little-endian int32 or "
                       "int64 ('<i4' or '<i8')");
  }
  if (*fortran) {
    return unsupported(".npy: the array is in Fortran (column-major) order; a head map must be in C order");
  }
  if (shape->size() != 2) {
    return unsupported(".npy: shape ", shape_string(*shape), " has ", shape->size(),
                       " dimensions; a head map has 2 [layers, KV heads]");
  }

  NpyIntMatrix m;
  m.rows = (*shape)[0];
  m.cols = (*shape)[1];
  if (m.rows > (int64_t{1} << 31) || m.cols > (int64_t{1} << 31)) {
    return unsupported(".npy: shape ", shape_string(*shape), " is too large for a head map");
  }
  const size_t data_bytes = bytes.size() - data_offset;
  const uint64_t count = static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
  if (count * item_size != data_bytes) {
    return data_loss(".npy: shape ", shape_string(*shape), " of '", *descr, "' needs ", count * item_size,
                     " bytes of data but the file holds ", data_bytes, count * item_size > data_bytes ?
                     " (truncated)" : " (trailing bytes)");
  }
  m.values.resize(static_cast<size_t>(count));
  const uint8_t* data = bytes.data() + data_offset;
  for (size_t i = 0; i < m.values.size(); ++i) {
    const uint64_t raw = read_le(data + i * item_size, item_size);
    m.values[i] = item_size == 4 ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(raw)))
                                 : static_cast<int64_t>(raw);
  }
  return m;
}

Result<NpyIntMatrix> read_npy_int_matrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(".npy file '", path, "' cannot be opened (missing or unreadable)");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return io_error(".npy file '", path, "': read failed");
  Result<NpyIntMatrix> m = parse_npy_int_matrix(bytes);
  if (!m.ok()) {
    Status s = m.status();
    return s.with_context(detail::concat(".npy file '", path, "'"));
  }
  return m;
}

}  // namespace kascade::calib
