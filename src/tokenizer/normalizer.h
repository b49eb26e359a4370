// tokenizer/normalizer.h — the tokenizer.json "normalizer": none, NFC, or a Sequence of NFC (what
// Llama-3 (none) and Qwen2/Qwen3 (NFC) use). Other normalizers are refused as Unsupported.
// NFC uses the normalization data of `tokenizers` itself (nfc_tables.h);
// tests/unit/tokenizer/test_unicode_text.cpp checks it against tokenizers' NFC of every decomposable
// code point.
#pragma once

#include <string>
#include <string_view>

#include "kascade/status.h"
#include "tokenizer/json_fields.h"

namespace kascade::tokenizer_detail {

class Normalizer {
 public:
  // spec: the "normalizer" value (nullptr or null for none); path names it in errors.
  static Result<Normalizer> from_json(const Json* spec, std::string_view path);

  bool is_identity() const { return !nfc_; }
  // Normalized text (valid UTF-8 in, valid UTF-8 out).
  Result<std::string> apply(std::string_view text) const;

 private:
  bool nfc_ = false;
};

}  // namespace kascade::tokenizer_detail
