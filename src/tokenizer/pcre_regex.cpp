// tokenizer/pcre_regex.cpp — PCRE2 compile (UTF, UCP, JIT) and Oniguruma-style find_iter.
// Tested by tests/unit/tokenizer/test_regex.cpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pcre_regex.h"

#include <pcre2.h>

#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

Result<std::unique_ptr<Pcre2Regex>> Pcre2Regex::compile(std::string_view pattern, bool literal, std::string_view what) {
  // PCRE2_LITERAL admits no UCP (a literal has no classes for it to affect).
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  KC_RETURN_IF_ERROR(validate_utf8(pattern, what));
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    return invalid_argument(what, ": the regex does not compile (", pcre2_message(error_code), " at offset ",
                            error_offset, "): ", pattern);
  }
  // JIT is a speed-up only: without it (a PCRE2 built without JIT support) matching falls back to
  // the interpreter, with the same results.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Pcre2Regex> regex(new Pcre2Regex());
  regex->code_ = code;
  regex->pattern_ = std::string(pattern);
  return regex;
}

Pcre2Regex::~Pcre2Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Pcre2Regex::find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& spans) const {
  auto* code = static_cast<pcre2_code*>(code_);
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create_from_pattern(code, nullptr));
  if (!data) return resource_exhausted("cannot allocate PCRE2 match data");
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t search_from = 0;
  bool have_previous = false;
  size_t previous_end = 0;
  while (search_from <= subject.size()) {
    int rc = pcre2_match(code, text, subject.size(), search_from, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's machine stack is small; the interpreter keeps its backtracking state on the heap.
      rc = pcre2_match(code, text, subject.size(), search_from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, data.get(),
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return resource_exhausted("regex matching failed (", pcre2_message(rc), ") at byte ", search_from,
                                " of a ", subject.size(), "-byte piece; pattern: ", pattern_);
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (start == end && have_previous && previous_end == end) {
      // An empty match right where the last match ended: move on by one character.
      search_from += search_from < subject.size() ? utf8_sequence_length(static_cast<unsigned char>(subject[search_from])) : 1;
      continue;
    }
    spans.emplace_back(start, end);
    search_from = end;
    previous_end = end;
    have_previous = true;
  }
  return ok_status();
}

}  // namespace kascade::tokenizer_detail
