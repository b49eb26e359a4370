// tokenizer/regex_translate.cpp — Oniguruma (Ruby syntax) regex -> PCRE2 pattern with the same
// matches, for the constructs pre-tokenizers use. Tested by tests/unit/tokenizer/test_regex.cpp.
#include "tokenizer/regex_translate.h"

#include <cstdio>
#include <mutex>
#include <vector>

#include "tokenizer/onig_unicode_tables.h"
#include "tokenizer/pcre_regex.h"
#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

std::string class_items(const std::vector<CodepointRange>& ranges) {
  std::string out;
  char buffer[48];
  for (const CodepointRange& r : ranges) {
    if (r.lo == r.hi) {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}", r.lo);
    } else {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}-\\x{%X}", r.lo, r.hi);
    }
    out += buffer;
  }
  return out;
}

// The members of `onig` that PCRE2's `\P{<property>}` matches, i.e. the code points PCRE2's own
// tables do not count as <property>: one scan over a string of all the members.
Result<std::vector<CodepointRange>> missing_from_pcre2(std::span<const CodepointRange> onig, const char* property) {
  std::string members;
  for (const CodepointRange& r : onig) {
    for (uint32_t cp = r.lo; cp <= r.hi; ++cp) append_utf8(members, cp);
  }
  KC_ASSIGN_OR_RETURN(auto regex, Pcre2Regex::compile(std::string("\\P{") + property + "}+", false, "class probe"));
  std::vector<std::pair<size_t, size_t>> spans;
  KC_RETURN_IF_ERROR(regex->find_all(members, spans));
  std::vector<CodepointRange> missing;
  for (const auto& [start, end] : spans) {
    size_t pos = start;
    while (pos < end) {
      const char32_t cp = next_codepoint(members, pos);
      if (!missing.empty() && missing.back().hi + 1 == cp) {
        missing.back().hi = cp;
      } else {
        missing.push_back({static_cast<uint32_t>(cp), static_cast<uint32_t>(cp)});
      }
    }
  }
  return missing;
}

struct ClassItems {
  Status status;
  std::string letter_extra;  // class items to add to \p{L}
  std::string number_extra;  // class items to add to \p{N}
  std::string white_space;   // class items of Oniguruma's \s
};

const ClassItems& class_items_once() {
  static const ClassItems items = [] {
    ClassItems out;
    auto letters = missing_from_pcre2(kOnigLetter, "L");
    auto numbers = missing_from_pcre2(kOnigNumber, "N");
    if (!letters.ok()) {
      out.status = letters.status();
      return out;
    }
    if (!numbers.ok()) {
      out.status = numbers.status();
      return out;
    }
    out.letter_extra = class_items(*letters);
    out.number_extra = class_items(*numbers);
    out.white_space = class_items(std::vector<CodepointRange>(kOnigWhiteSpace.begin(), kOnigWhiteSpace.end()));
    return out;
  }();
  return items;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

Result<std::string> translate_onig_pattern(std::string_view pattern) {
  const ClassItems& items = class_items_once();
  KC_RETURN_IF_ERROR(items.status);
  KC_RETURN_IF_ERROR(validate_utf8(pattern, "pre-tokenizer regex"));
  const auto refuse = [&](std::string_view construct, size_t at) {
    return unsupported("pre-tokenizer regex uses ", construct, " at offset ", at,
                       ", whose meaning differs between Oniguruma (tokenizers) and PCRE2; not supported: ", pattern);
  };
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return invalid_argument("pre-tokenizer regex ends with a lone backslash: ", pattern);
      const char n = pattern[i + 1];
      if (n == 's') {
        out += in_class ? items.white_space : "[" + items.white_space + "]";
        i += 2;
      } else if (n == 'S') {
        if (in_class) return refuse("\\S inside a character class", i);
        out += "[^" + items.white_space + "]";
        i += 2;
      } else if (n == 'p' || n == 'P') {
        // \pL, \p{L}, \p{^L}, \P{L}
        std::string name;
        size_t next = i + 2;
        bool negated = n == 'P';
        if (next < pattern.size() && pattern[next] == '{') {
          const size_t close = pattern.find('}', next);
          if (close == std::string_view::npos) return invalid_argument("pre-tokenizer regex has an unclosed \\p{: ", pattern);
          name = std::string(pattern.substr(next + 1, close - next - 1));
          next = close + 1;
        } else if (next < pattern.size()) {
          name = std::string(1, pattern[next]);
          next += 1;
        }
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.erase(0, 1);
        }
        const std::string* extra = name == "L" ? &items.letter_extra : name == "N" ? &items.number_extra : nullptr;
        if (extra == nullptr) {
          // Other properties keep PCRE2's meaning (its Unicode version may be older than tokenizers').
          out += std::string(negated ? "\\P{" : "\\p{") + name + "}";
        } else if (negated) {
          if (in_class) return refuse("a negated property inside a character class", i);
          out += "[^\\p{" + name + "}" + *extra + "]";
        } else {
          out += in_class ? "\\p{" + name + "}" + *extra : "[\\p{" + name + "}" + *extra + "]";
        }
        i = next;
      } else if (n == 'w' || n == 'W' || n == 'b' || n == 'B' || n == 'd' || n == 'D' || n == 'h' || n == 'H') {
        return refuse(std::string("\\") + n, i);
      } else if (n == 'u' && i + 5 < pattern.size() && is_hex(pattern[i + 2]) && is_hex(pattern[i + 3]) &&
                 is_hex(pattern[i + 4]) && is_hex(pattern[i + 5])) {
        out += "\\x{" + std::string(pattern.substr(i + 2, 4)) + "}";
        i += 6;
      } else {
        const size_t len = utf8_sequence_length(static_cast<unsigned char>(n));
        out += '\\';
        out += pattern.substr(i + 1, len);
        i += 1 + len;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') {
        in_class = false;
      } else if (c == '[') {
        if (i + 1 < pattern.size() && pattern[i + 1] == ':') {
          const size_t close = pattern.find(":]", i + 2);
          if (close == std::string_view::npos) return refuse("a nested character class", i);
          out += pattern.substr(i, close + 2 - i);
          i = close + 2;
          continue;
        }
        return refuse("a nested character class", i);
      } else if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        return refuse("a class intersection (&&)", i);
      }
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < pattern.size() && pattern[i] == '^') out += pattern[i++];
      if (i < pattern.size() && pattern[i] == ']') out += "\\]", ++i;  // a leading ] is a literal
      continue;
    }
    if (c == '^') {
      out += "(?m:^)";
    } else if (c == '$') {
      out += "(?m:$)";
    } else if (c == '(' && i + 1 < pattern.size() && pattern[i + 1] == '?') {
      // Inline options: Ruby's (?m) is PCRE2's (?s); refuse it rather than guess.
      size_t j = i + 2;
      while (j < pattern.size() && (pattern[j] == 'i' || pattern[j] == 'm' || pattern[j] == 'x' || pattern[j] == '-')) {
        if (pattern[j] == 'm') return refuse("the (?m) option", i);
        ++j;
      }
      out += c;
    } else {
      out += c;
    }
    ++i;
  }
  if (in_class) return invalid_argument("pre-tokenizer regex has an unclosed character class: ", pattern);
  return out;
}

}  // namespace kascade::tokenizer_detail
