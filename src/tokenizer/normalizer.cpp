// tokenizer/normalizer.cpp — none / NFC / Sequence of NFC. Tested by the qwen2 parity fixtures and
// tests/unit/tokenizer/test_unicode_text.cpp.
#include "tokenizer/normalizer.h"

#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {

Result<Normalizer> Normalizer::from_json(const Json* spec, std::string_view path) {
  Normalizer out;
  if (spec == nullptr || spec->is_null()) return out;
  KC_ASSIGN_OR_RETURN(const std::string type, string_member(*spec, "type", path));
  if (type == "NFC") {
    out.nfc_ = true;
    return out;
  }
  if (type == "Sequence") {
    const std::string list_path = field_path(path, "normalizers");
    KC_ASSIGN_OR_RETURN(const Json* list, require_present(*spec, "normalizers", path));
    if (!list->is_array()) return invalid_argument(list_path, " must be an array, found ", json_kind(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      KC_ASSIGN_OR_RETURN(const Normalizer inner, from_json(&(*list)[i], list_path + "[" + std::to_string(i) + "]"));
      out.nfc_ = out.nfc_ || inner.nfc_;  // NFC is idempotent: one pass equals several
    }
    return out;
  }
  return unsupported(path, " type '", type, "' is not supported (kascade implements none, NFC and Sequence of NFC)");
}

Result<std::string> Normalizer::apply(std::string_view text) const {
  if (!nfc_) return std::string(text);
  return nfc(text);
}

}  // namespace kascade::tokenizer_detail
