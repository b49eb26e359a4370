// tokenizer/post_processor.h — the tokenizer.json "post_processor" for single sequences:
// TemplateProcessing (special tokens around $A, e.g. Llama-3's BOS), ByteLevel (changes offsets
// only, so nothing here), Sequence of these, or none. Applied only with add_special_tokens.
// Other processors are refused as Unsupported. Tested by the llama3 parity fixtures (BOS) and
// tests/unit/tokenizer/test_tokenizer_errors.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kascade/status.h"
#include "tokenizer/json_fields.h"

namespace kascade::tokenizer_detail {

class PostProcessor {
 public:
  static Result<PostProcessor> from_json(const Json* spec, std::string_view path);

  // ids -> prefix + ids + suffix.
  void apply(std::vector<int32_t>& ids) const;
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  static Status append(const Json& spec, std::string_view path, PostProcessor& out);
  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
};

}  // namespace kascade::tokenizer_detail
