// tokenizer/pre_tokenizer.h — the tokenizer.json "pre_tokenizer": Split (a regex or a literal
// string, behavior Isolated, invert false), ByteLevel (add_prefix_space, use_regex) and Sequence of
// these, or none. It cuts one piece of normalized text into the words BPE encodes, the way
// `tokenizers` does: each step splits every current piece; empty pieces are dropped; ByteLevel maps
// bytes to its printable alphabet. Other types and options are refused as Unsupported, naming them.
// Tested by the parity fixtures (Llama-3 and Qwen2 regexes, GPT-2 ByteLevel, Split on a string).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/status.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pcre_regex.h"

namespace kascade::tokenizer_detail {

class PreTokenizer {
 public:
  static Result<PreTokenizer> from_json(const Json* spec, std::string_view path);

  // Appends the words of `text` (valid UTF-8) to `words`.
  Status split(std::string_view text, std::vector<std::string>& words) const;
  // Whether a ByteLevel step maps bytes (so BPE sees the byte-level alphabet).
  bool has_byte_level() const;

 private:
  struct Step {
    bool byte_level = false;
    std::unique_ptr<Pcre2Regex> regex;  // Split: its pattern; ByteLevel: GPT-2's when use_regex
    bool add_prefix_space = false;
  };
  static Status append_steps(const Json& spec, std::string_view path, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace kascade::tokenizer_detail
