// tokenizer/post_processor.cpp — TemplateProcessing / ByteLevel / Sequence for single sequences.
// Tested by the llama3 parity fixtures and tests/unit/tokenizer/test_tokenizer_errors.cpp.
#include "tokenizer/post_processor.h"

namespace kascade::tokenizer_detail {

Status PostProcessor::append(const Json& spec, std::string_view path, PostProcessor& out) {
  KC_ASSIGN_OR_RETURN(const std::string type, string_member(spec, "type", path));
  if (type == "ByteLevel") return ok_status();  // trim_offsets changes offsets, never ids
  if (type == "Sequence") {
    const std::string list_path = field_path(path, "processors");
    KC_ASSIGN_OR_RETURN(const Json* list, require_present(spec, "processors", path));
    if (!list->is_array()) return invalid_argument(list_path, " must be an array, found ", json_kind(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      KC_RETURN_IF_ERROR(append((*list)[i], list_path + "[" + std::to_string(i) + "]", out));
    }
    return ok_status();
  }
  if (type != "TemplateProcessing") {
    return unsupported(path, " type '", type,
                       "' is not supported (kascade implements TemplateProcessing, ByteLevel and Sequence)");
  }
  const std::string single_path = field_path(path, "single");
  KC_ASSIGN_OR_RETURN(const Json* single, require_present(spec, "single", path));
  if (!single->is_array()) return invalid_argument(single_path, " must be an array, found ", json_kind(*single));
  const std::string specials_path = field_path(path, "special_tokens");
  KC_ASSIGN_OR_RETURN(const Json* specials, require_present(spec, "special_tokens", path));
  if (!specials->is_object()) {
    return invalid_argument(specials_path, " must be an object, found ", json_kind(*specials));
  }
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& piece = (*single)[i];
    const std::string piece_path = single_path + "[" + std::to_string(i) + "]";
    if (const Json* sequence = optional_member(piece, "Sequence"); sequence != nullptr) {
      KC_ASSIGN_OR_RETURN(const std::string which, string_member(*sequence, "id", piece_path + ".Sequence"));
      if (which != "A" || seen_sequence) {
        return invalid_argument(piece_path, ": a single-sequence template holds $A once, found $", which);
      }
      seen_sequence = true;
      continue;
    }
    const Json* special = optional_member(piece, "SpecialToken");
    if (special == nullptr) {
      return invalid_argument(piece_path, " must be {\"Sequence\": ...} or {\"SpecialToken\": ...}, found ", piece.dump());
    }
    KC_ASSIGN_OR_RETURN(const std::string name, string_member(*special, "id", piece_path + ".SpecialToken"));
    const Json* entry = optional_member(*specials, name);
    if (entry == nullptr) return invalid_argument(piece_path, " names \"", name, "\", which ", specials_path, " lacks");
    const std::string ids_path = specials_path + "[\"" + name + "\"].ids";
    KC_ASSIGN_OR_RETURN(const Json* ids, require_present(*entry, "ids", specials_path + "[\"" + name + "\"]"));
    if (!ids->is_array()) return invalid_argument(ids_path, " must be an array, found ", json_kind(*ids));
    for (size_t k = 0; k < ids->size(); ++k) {
      KC_ASSIGN_OR_RETURN(const int64_t id, as_int((*ids)[k], ids_path + "[" + std::to_string(k) + "]"));
      if (id < 0 || id > INT32_MAX) return out_of_range(ids_path, "[", k, "] = ", id, " is not a valid id");
      (seen_sequence ? suffix : prefix).push_back(static_cast<int32_t>(id));
    }
  }
  if (!seen_sequence) return invalid_argument(single_path, " does not hold $A");
  // A later processor wraps the result of the earlier ones.
  out.prefix_.insert(out.prefix_.begin(), prefix.begin(), prefix.end());
  out.suffix_.insert(out.suffix_.end(), suffix.begin(), suffix.end());
  return ok_status();
}

Result<PostProcessor> PostProcessor::from_json(const Json* spec, std::string_view path) {
  PostProcessor out;
  if (spec == nullptr || spec->is_null()) return out;
  KC_RETURN_IF_ERROR(append(*spec, path, out));
  return out;
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace kascade::tokenizer_detail
