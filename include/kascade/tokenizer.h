// kascade/tokenizer.h — Hugging Face tokenizer.json (byte-level BPE) and chat formatting from
// tokenizer_config.json, for the Llama-3 and Qwen2/Qwen3 families.
//
// Tokenizer reproduces the Hugging Face `tokenizers` pipeline exactly (ids and decoded text):
//   added tokens split out of the raw text (special tokens are matched as whole tokens whether or not
//   add_special_tokens is set) -> normalizer (none or NFC) -> pre-tokenizer (Split on the model's
//   regex, ByteLevel) -> BPE -> post-processor (TemplateProcessing adds Llama-3's BOS when
//   add_special_tokens is true). Features of tokenizer.json it does not implement are refused with an
//   Unsupported status that names them; nothing is skipped silently.
// Unicode follows tokenizers, not the system libraries: the pre-tokenizer regexes run on PCRE2 with
// \p{L}, \p{N} and \s widened to Oniguruma's (tokenizers' regex engine, Unicode 16) code point sets,
// and NFC (Qwen2/Qwen3) uses the normalization data tokenizers applies (older Unicode), both from
// tables generated out of tokenizers by scripts/make_tokenizer_fixtures.py.
// Deviations from `tokenizers`, all in the direction of an error instead of a silent result:
//   - encode() needs valid UTF-8 (a Python str always is); invalid input is InvalidArgument.
//   - decode() of an id outside the vocabulary is OutOfRange (tokenizers drops it silently).
//   - an added token whose recorded id differs from the id tokenizers would give it is refused.
//
// ChatTemplate recognises the chat_template of tokenizer_config.json by its markers and renders
// conversations without a Jinja interpreter:
//   - Llama-3: <|start_header_id|>role<|end_header_id|>\n\n content <|eot_id|>, BOS first when the
//     template uses bos_token, content trimmed when it applies `trim`, and the Llama-3.1 system
//     block ("Cutting Knowledge Date: ...\nToday Date: ...\n\n") when the template has one;
//   - ChatML (Qwen2, Qwen2.5, Qwen3): <|im_start|>role\ncontent<|im_end|>\n, with the template's own
//     default system prompt when it has one, and Qwen3's <think> rules when it uses enable_thinking.
// Any other template is refused (Unsupported) with a message that says what was looked for.
// The rendered text already holds BOS where the template puts it: encode it with
// add_special_tokens = false, as transformers' apply_chat_template does.
//
// Tested by tests/unit/tokenizer/ against fixtures made by scripts/make_tokenizer_fixtures.py with
// `tokenizers` and jinja2 (tests/data/tokenizer/).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/status.h"

namespace kascade {

class Tokenizer {
 public:
  // Reads a tokenizer.json. A missing file is NotFound naming the path; malformed JSON or fields of
  // the wrong type are InvalidArgument naming the field; features kascade does not implement are
  // Unsupported naming them.
  static Result<Tokenizer> from_file(const std::string& path);
  // Same from the JSON text; `origin` names the source in error messages.
  static Result<Tokenizer> from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (UTF-8). add_special_tokens applies the post-processor (Llama-3: BOS first).
  // Safe to call from several threads at once.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`; byte sequences that are not valid UTF-8 become U+FFFD exactly as Rust's
  // String::from_utf8_lossy does (what tokenizers returns). skip_special_tokens drops the added
  // tokens marked special (not the non-special added tokens such as Qwen3's <think>).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The bytes the decoder produces for one token before UTF-8 repair (streaming output joins these
  // and prints whole characters).
  Result<std::string> token_bytes(int32_t id) const;

  // Number of distinct tokens: the BPE vocabulary plus added tokens that are not in it
  // (tokenizers' get_vocab_size(with_added_tokens=True) when they do not overlap).
  int64_t vocab_size() const;
  // One more than the largest id (the size an embedding table needs at least).
  int64_t id_limit() const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // added tokens first
  Result<std::string> id_to_token(int32_t id) const;                 // OutOfRange if unknown
  bool is_special(int32_t id) const;                                 // an added token marked special

  struct Impl;  // opaque: defined in src/tokenizer/tokenizer.cpp

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

enum class ChatFormat { kLlama3, kChatML };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // Qwen3: false appends the empty "<think>\n\n</think>\n\n" block after the generation prompt (the
  // template's enable_thinking=false); unset or true leaves thinking on. Refused for other templates.
  std::optional<bool> enable_thinking;
  // Llama-3.1: the "Today Date" line ("26 Jul 2024"). Unset: today's date ("%d %b %Y") when the
  // template asks strftime_now for it, as transformers renders it, else the template's fallback.
  std::optional<std::string> date_string;
};

class ChatTemplate {
 public:
  // Reads chat_template, bos_token and eos_token from a tokenizer_config.json. A missing file is
  // NotFound naming the path; a config without chat_template is NotFound too (the caller then uses
  // the plain prompt); a template of an unrecognised format is Unsupported with a message saying
  // which formats are recognised.
  static Result<ChatTemplate> from_file(const std::string& tokenizer_config_path);
  static Result<ChatTemplate> from_json(std::string_view json_text,
                                        const std::string& origin = "tokenizer_config.json");

  ChatFormat format() const { return format_; }
  // A short description of what was recognised ("Llama-3: BOS, trimmed content, ...").
  std::string description() const;
  // Whether the template has Qwen3's enable_thinking switch.
  bool has_thinking_switch() const { return thinking_switch_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

  // The prompt text for `messages` (at least one; roles system, user, assistant).
  Result<std::string> render(std::span<const ChatMessage> messages, const ChatOptions& options) const;

 private:
  ChatTemplate() = default;
  Result<std::string> render_llama3(std::span<const ChatMessage> messages, const ChatOptions& options) const;
  Result<std::string> render_chatml(std::span<const ChatMessage> messages, const ChatOptions& options) const;

  ChatFormat format_ = ChatFormat::kChatML;
  std::string bos_token_;
  std::string eos_token_;
  // Llama-3 features.
  bool prepend_bos_ = false;
  bool trim_content_ = false;
  bool knowledge_date_block_ = false;
  std::string knowledge_date_;       // "December 2023"
  std::string default_date_string_;  // "26 Jul 2024"
  bool current_date_ = false;        // the template asks strftime_now for today's date
  // ChatML features.
  std::optional<std::string> default_system_;
  bool thinking_switch_ = false;   // Qwen3's enable_thinking
  bool reasoning_history_ = false;  // Qwen3's <think> rules for assistant turns after the last query
  bool requires_user_query_ = false;  // the template raises when no user message is found
};

}  // namespace kascade
