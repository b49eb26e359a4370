// tokenizer/unicode_text.cpp — UTF-8 validation and iteration, from_utf8_lossy, Python whitespace,
// NFC (UAX #15 decomposition, canonical ordering, composition over nfc_tables).
// Tested by tests/unit/tokenizer/test_unicode_text.cpp.
#include "tokenizer/unicode_text.h"

#include <algorithm>
#include <vector>

#include "tokenizer/nfc_tables.h"

namespace kascade::tokenizer_detail {
namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at bytes[pos], or 0 when the bytes there are ill-formed; in
// that case *bad_len is the length of the maximal ill-formed subpart (Unicode 3.9 / WHATWG: the
// longest prefix of a well-formed sequence, at least one byte).
size_t valid_sequence_at(std::string_view bytes, size_t pos, size_t* bad_len) {
  const auto at = [&](size_t i) -> int { return i < bytes.size() ? static_cast<unsigned char>(bytes[i]) : -1; };
  const int b0 = at(pos);
  *bad_len = 1;
  if (b0 < 0x80) return 1;
  int width = 0;
  int lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  const int b1 = at(pos + 1);
  if (b1 < lo || b1 > hi) return 0;
  for (int k = 2; k < width; ++k) {
    const int b = at(pos + k);
    if (b < 0 || !is_continuation(static_cast<unsigned char>(b))) {
      *bad_len = static_cast<size_t>(k);
      return 0;
    }
  }
  return static_cast<size_t>(width);
}

}  // namespace

Status validate_utf8(std::string_view text, std::string_view what) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t bad = 0;
    const size_t n = valid_sequence_at(text, pos, &bad);
    if (n == 0) {
      return invalid_argument(what, " is not valid UTF-8: ill-formed sequence at byte ", pos, " (byte 0x", std::hex,
                              static_cast<int>(static_cast<unsigned char>(text[pos])), ")");
    }
    pos += n;
  }
  return ok_status();
}

size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0 && lead <= 0xF7) return 4;
  if (lead >= 0xE0) return lead <= 0xEF ? 3 : 1;
  if (lead >= 0xC0) return 2;
  return 1;
}

char32_t next_codepoint(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  const size_t n = utf8_sequence_length(b0);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n && pos + k < text.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  }
  pos += n;
  return cp;
}

char32_t previous_codepoint(std::string_view text, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && is_continuation(static_cast<unsigned char>(text[start]))) --start;
  size_t pos = start;
  return next_codepoint(text, pos);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t bad = 0;
    const size_t n = valid_sequence_at(bytes, pos, &bad);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      pos += bad;
    }
  }
  return out;
}

bool is_python_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view python_strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!is_python_space(next_codepoint(text, next))) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = 0;
    if (!is_python_space(previous_codepoint(text, end, start))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

namespace {

// Hangul syllables (UAX #15, 3.12): S = SBase + (L * VCount + V) * TCount + T.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  const auto it = std::upper_bound(kNfcCombiningClasses.begin(), kNfcCombiningClasses.end(), static_cast<uint32_t>(cp),
                                   [](uint32_t v, const CombiningClassRange& r) { return v < r.lo; });
  if (it == kNfcCombiningClasses.begin() || cp > std::prev(it)->hi) return 0;
  return std::prev(it)->ccc;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto it = std::lower_bound(kNfcDecompositions.begin(), kNfcDecompositions.end(), static_cast<uint32_t>(cp),
                                   [](const Decomposition& d, uint32_t v) { return d.codepoint < v; });
  if (it == kNfcDecompositions.end() || it->codepoint != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), it->parts, it->parts + it->length);
}

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto it = std::lower_bound(kNfcCompositions.begin(), kNfcCompositions.end(), std::make_pair(first, second),
                                   [](const Composition& c, const std::pair<char32_t, char32_t>& v) {
                                     return c.first != v.first ? c.first < v.first : c.second < v.second;
                                   });
  if (it == kNfcCompositions.end() || it->first != first || it->second != second) return 0;
  return it->composite;
}

}  // namespace

Result<std::string> nfc(std::string_view text) {
  // 1. Full canonical decomposition.
  std::vector<char32_t> buffer;
  buffer.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) decompose(next_codepoint(text, pos), buffer);
  // 2. Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < buffer.size();) {
    if (combining_class(buffer[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < buffer.size() && combining_class(buffer[end]) != 0) ++end;
    std::stable_sort(buffer.begin() + static_cast<std::ptrdiff_t>(i), buffer.begin() + static_cast<std::ptrdiff_t>(end),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
  // 3. Canonical composition: a character joins the last starter unless something between them
  //    blocks it (a character of the same or a higher class, or any starter).
  if (!buffer.empty()) {
    size_t starter = 0;
    bool have_starter = combining_class(buffer[0]) == 0;
    int last_class = have_starter ? 0 : 256;
    size_t write = 1;
    for (size_t read = 1; read < buffer.size(); ++read) {
      const char32_t ch = buffer[read];
      const int ch_class = combining_class(ch);
      if (have_starter && (last_class < ch_class || last_class == 0)) {
        if (const char32_t composite = compose(buffer[starter], ch); composite != 0) {
          buffer[starter] = composite;
          continue;
        }
      }
      if (ch_class == 0) {
        starter = write;
        have_starter = true;
      }
      last_class = ch_class;
      buffer[write++] = ch;
    }
    buffer.resize(write);
  }
  std::string out;
  out.reserve(text.size());
  for (const char32_t cp : buffer) append_utf8(out, cp);
  return out;
}

}  // namespace kascade::tokenizer_detail
