// tokenizer/pre_tokenizer.cpp — Split / ByteLevel / Sequence pre-tokenizers.
// Tested by the parity fixtures of tests/unit/tokenizer/.
#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/regex_translate.h"

namespace kascade::tokenizer_detail {
namespace {

// Cuts `text` at the matches of `regex`, keeping matches and the text between them as pieces
// (SplitDelimiterBehavior::Isolated); empty pieces are dropped.
Status split_isolated(const Pcre2Regex& regex, std::string_view text, std::vector<std::string>& out) {
  std::vector<std::pair<size_t, size_t>> spans;
  KC_RETURN_IF_ERROR(regex.find_all(text, spans));
  size_t previous = 0;
  for (const auto& [start, end] : spans) {
    if (start > previous) out.emplace_back(text.substr(previous, start - previous));
    if (end > start) out.emplace_back(text.substr(start, end - start));
    previous = end;
  }
  if (previous < text.size()) out.emplace_back(text.substr(previous));
  return ok_status();
}

}  // namespace

Status PreTokenizer::append_steps(const Json& spec, std::string_view path, std::vector<Step>& steps) {
  KC_ASSIGN_OR_RETURN(const std::string type, string_member(spec, "type", path));
  if (type == "Sequence") {
    const std::string list_path = field_path(path, "pretokenizers");
    KC_ASSIGN_OR_RETURN(const Json* list, require_present(spec, "pretokenizers", path));
    if (!list->is_array()) return invalid_argument(list_path, " must be an array, found ", json_kind(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      KC_RETURN_IF_ERROR(append_steps((*list)[i], list_path + "[" + std::to_string(i) + "]", steps));
    }
    return ok_status();
  }
  if (type == "Split") {
    KC_ASSIGN_OR_RETURN(const std::string behavior, string_member(spec, "behavior", path));
    if (behavior != "Isolated") {
      return unsupported(field_path(path, "behavior"), " '", behavior,
                         "' is not supported (kascade implements Isolated, which Llama-3 and Qwen2 use)");
    }
    KC_ASSIGN_OR_RETURN(const bool invert, bool_member_or(spec, "invert", path, false));
    if (invert) return unsupported(field_path(path, "invert"), " = true is not supported");
    const std::string pattern_path = field_path(path, "pattern");
    KC_ASSIGN_OR_RETURN(const Json* pattern, require_present(spec, "pattern", path));
    Step step;
    if (const Json* regex = optional_member(*pattern, "Regex"); regex != nullptr) {
      KC_ASSIGN_OR_RETURN(const std::string onig, as_string(*regex, pattern_path + ".Regex"));
      auto translated = translate_onig_pattern(onig);
      if (!translated.ok()) return Status(translated.status()).with_context(pattern_path + ".Regex");
      KC_ASSIGN_OR_RETURN(step.regex, Pcre2Regex::compile(*translated, false, pattern_path + ".Regex"));
    } else if (const Json* literal = optional_member(*pattern, "String"); literal != nullptr) {
      KC_ASSIGN_OR_RETURN(const std::string text, as_string(*literal, pattern_path + ".String"));
      KC_ASSIGN_OR_RETURN(step.regex, Pcre2Regex::compile(text, true, pattern_path + ".String"));
    } else {
      return invalid_argument(pattern_path, " must be {\"Regex\": ...} or {\"String\": ...}, found ", pattern->dump());
    }
    steps.push_back(std::move(step));
    return ok_status();
  }
  if (type == "ByteLevel") {
    Step step;
    step.byte_level = true;
    KC_ASSIGN_OR_RETURN(step.add_prefix_space, bool_member_or(spec, "add_prefix_space", path, true));
    KC_ASSIGN_OR_RETURN(const bool use_regex, bool_member_or(spec, "use_regex", path, true));
    if (use_regex) {
      KC_ASSIGN_OR_RETURN(const std::string translated, translate_onig_pattern(kGpt2Pattern));
      KC_ASSIGN_OR_RETURN(step.regex, Pcre2Regex::compile(translated, false, "the ByteLevel (GPT-2) regex"));
    }
    steps.push_back(std::move(step));
    return ok_status();
  }
  return unsupported(path, " type '", type,
                     "' is not supported (kascade implements Split, ByteLevel and Sequence pre-tokenizers)");
}

Result<PreTokenizer> PreTokenizer::from_json(const Json* spec, std::string_view path) {
  PreTokenizer out;
  if (spec == nullptr || spec->is_null()) return out;
  KC_RETURN_IF_ERROR(append_steps(*spec, path, out.steps_));
  return out;
}

bool PreTokenizer::has_byte_level() const {
  for (const Step& step : steps_) {
    if (step.byte_level) return true;
  }
  return false;
}

Status PreTokenizer::split(std::string_view text, std::vector<std::string>& words) const {
  if (text.empty()) return ok_status();
  std::vector<std::string> pieces;
  pieces.emplace_back(text);
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const std::string& piece : pieces) {
      if (!step.byte_level) {
        KC_RETURN_IF_ERROR(split_isolated(*step.regex, piece, next));
        continue;
      }
      const std::string prefixed = step.add_prefix_space && piece.front() != ' ' ? " " + piece : piece;
      const size_t first = next.size();
      if (step.regex) {
        KC_RETURN_IF_ERROR(split_isolated(*step.regex, prefixed, next));
      } else {
        next.push_back(prefixed);
      }
      for (size_t k = first; k < next.size(); ++k) {
        std::string mapped;
        mapped.reserve(next[k].size() * 2);
        byte_level_encode(next[k], mapped);
        next[k] = std::move(mapped);
      }
    }
    pieces.swap(next);
  }
  for (std::string& piece : pieces) words.push_back(std::move(piece));
  return ok_status();
}

}  // namespace kascade::tokenizer_detail
