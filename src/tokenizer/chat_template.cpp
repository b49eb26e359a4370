// tokenizer/chat_template.cpp — kascade::ChatTemplate: recognises the Llama-3 and ChatML (Qwen2,
// Qwen2.5, Qwen3) chat templates of tokenizer_config.json by their markers and renders
// conversations the way those Jinja templates do. Tested by tests/unit/tokenizer/test_chat_template.cpp
// against conversations rendered with jinja2 (tests/data/tokenizer/chat/).
#include <ctime>
#include <regex>

#include "kascade/tokenizer.h"
#include "tokenizer/file_text.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_text.h"

namespace kascade {

using tokenizer_detail::Json;

namespace {

constexpr std::string_view kStartHeader = "<|start_header_id|>";
constexpr std::string_view kEndHeader = "<|end_header_id|>";
constexpr std::string_view kEot = "<|eot_id|>";
constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

// Python/Jinja string-literal escapes of a literal's body.
std::string unescape_literal(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char n = body[++i];
    switch (n) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      default: out += n; break;  // \\ \' \"
    }
  }
  return out;
}

// A special-token field of tokenizer_config.json: a string, {"content": ...}, null or absent.
Result<std::string> token_field(const Json& config, std::string_view key) {
  const Json* value = tokenizer_detail::optional_member(config, key);
  if (value == nullptr) return std::string();
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) return tokenizer_detail::string_member(*value, "content", key);
  return invalid_argument(key, " must be a string or an object with \"content\", found ", tokenizer_detail::json_kind(*value));
}

Result<std::string> template_text(const Json& config) {
  const Json* value = tokenizer_detail::optional_member(config, "chat_template");
  if (value == nullptr) return not_found("has no chat_template");
  if (value->is_string()) return value->get<std::string>();
  if (value->is_array()) {
    // Named templates: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    std::string names;
    for (size_t i = 0; i < value->size(); ++i) {
      const std::string path = "chat_template[" + std::to_string(i) + "]";
      KC_ASSIGN_OR_RETURN(const std::string name, tokenizer_detail::string_member((*value)[i], "name", path));
      if (name == "default") return tokenizer_detail::string_member((*value)[i], "template", path);
      names += (names.empty() ? "" : ", ") + name;
    }
    return not_found("has no chat_template named \"default\" (it has: ", names, ")");
  }
  return invalid_argument("chat_template must be a string or a list of named templates, found ",
                          tokenizer_detail::json_kind(*value));
}

Status check_roles(std::span<const ChatMessage> messages) {
  if (messages.empty()) return invalid_argument("chat messages are empty; give at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return unsupported("messages[", i, "].role \"", role, "\" is not supported (system, user, assistant)");
    }
    KC_RETURN_IF_ERROR(tokenizer_detail::validate_utf8(messages[i].content, "messages[" + std::to_string(i) + "].content"));
  }
  return ok_status();
}

// Python's str.split(sep): pieces between occurrences of sep.
std::vector<std::string_view> python_split(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string_view::npos; at = text.find(sep, start)) {
    out.push_back(text.substr(start, at - start));
    start = at + sep.size();
  }
  out.push_back(text.substr(start));
  return out;
}

// Today's local date as strftime("%d %b %Y") ("05 Mar 2025"), what transformers' strftime_now gives.
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  const size_t n = std::strftime(buffer, sizeof(buffer), "%d %b %Y", &local);
  return std::string(buffer, n);
}

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_file(const std::string& tokenizer_config_path) {
  KC_ASSIGN_OR_RETURN(const std::string text,
                      tokenizer_detail::read_text_file(tokenizer_config_path, "tokenizer config file"));
  return from_json(text, tokenizer_config_path);
}

Result<ChatTemplate> ChatTemplate::from_json(std::string_view json_text, const std::string& origin) {
  Json config;
  try {
    config = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    return Status(invalid_argument("malformed JSON: ", e.what())).with_context(origin);
  }
  if (!config.is_object()) {
    return Status(invalid_argument("the top level must be an object, found ", tokenizer_detail::json_kind(config)))
        .with_context(origin);
  }
  auto text = template_text(config);
  if (!text.ok()) return Status(text.status()).with_context(origin);
  const std::string& source = *text;
  ChatTemplate out;
  auto bos = token_field(config, "bos_token");
  auto eos = token_field(config, "eos_token");
  if (!bos.ok()) return Status(bos.status()).with_context(origin);
  if (!eos.ok()) return Status(eos.status()).with_context(origin);
  out.bos_token_ = *bos;
  out.eos_token_ = *eos;

  const bool llama3 = contains(source, kStartHeader) && contains(source, kEndHeader) && contains(source, kEot);
  const bool chatml = contains(source, kImStart) && contains(source, kImEnd);
  if (llama3 == chatml) {
    return Status(unsupported(
                      llama3 ? "chat_template has both Llama-3 and ChatML markers; refusing to guess its format"
                             : "chat_template is not a format kascade recognises: it has neither the Llama-3 markers "
                               "(<|start_header_id|>, <|end_header_id|>, <|eot_id|>) nor the ChatML markers "
                               "(<|im_start|>, <|im_end|>); pass the prompt without chat formatting instead"))
        .with_context(origin);
  }
  if (llama3) {
    out.format_ = ChatFormat::kLlama3;
    out.prepend_bos_ = contains(source, "bos_token");
    if (out.prepend_bos_ && out.bos_token_.empty()) {
      return Status(invalid_argument("chat_template uses bos_token but the config has no bos_token")).with_context(origin);
    }
    out.trim_content_ = std::regex_search(source, std::regex(R"(\|\s*trim\b)"));
    std::smatch m;
    if (std::regex_search(source, m, std::regex(R"(Cutting Knowledge Date: ((?:[^\\'"\n]|\\[^n])*))"))) {
      out.knowledge_date_block_ = true;
      out.knowledge_date_ = unescape_literal(m[1].str());
      std::smatch d;
      if (!std::regex_search(source, d, std::regex(R"re(set\s+date_string\s*=\s*["']([^"']*)["'])re"))) {
        return Status(unsupported("chat_template has a Llama-3.1 knowledge-date block but no fallback date_string"))
            .with_context(origin);
      }
      out.default_date_string_ = d[1].str();
      out.current_date_ = contains(source, "strftime_now");
    }
    return out;
  }
  out.format_ = ChatFormat::kChatML;
  std::smatch m;
  if (std::regex_search(source, m, std::regex(R"(<\|im_start\|>system(?:\\n|\n)([^'"]*?)<\|im_end\|>)"))) {
    out.default_system_ = unescape_literal(m[1].str());
  }
  out.thinking_switch_ = contains(source, "enable_thinking");
  out.reasoning_history_ = contains(source, "last_query_index") && contains(source, "</think>");
  out.requires_user_query_ = out.reasoning_history_ && contains(source, "No user query found");
  return out;
}

std::string ChatTemplate::description() const {
  std::string out;
  if (format_ == ChatFormat::kLlama3) {
    out = "Llama-3";
    if (prepend_bos_) out += ", BOS first";
    if (trim_content_) out += ", content trimmed";
    if (knowledge_date_block_) {
      out += ", Llama-3.1 system block (knowledge date " + knowledge_date_ + ", today's date " +
             (current_date_ ? std::string("from the clock") : "\"" + default_date_string_ + "\"") + ")";
    }
  } else {
    out = "ChatML";
    if (default_system_) out += ", default system prompt \"" + *default_system_ + "\"";
    if (thinking_switch_) out += ", enable_thinking switch";
    if (reasoning_history_) out += ", Qwen3 reasoning history";
    if (requires_user_query_) out += ", user query required";
  }
  return out;
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  KC_RETURN_IF_ERROR(check_roles(messages));
  if (options.enable_thinking && !thinking_switch_) {
    return invalid_argument("enable_thinking is given but this chat template (", description(), ") has no thinking switch");
  }
  if (options.date_string && !knowledge_date_block_) {
    return invalid_argument("date_string is given but this chat template (", description(), ") has no date");
  }
  return format_ == ChatFormat::kLlama3 ? render_llama3(messages, options) : render_chatml(messages, options);
}

Result<std::string> ChatTemplate::render_llama3(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  const auto body = [&](const std::string& content) -> std::string_view {
    return trim_content_ ? tokenizer_detail::python_strip(content) : std::string_view(content);
  };
  const auto turn = [&](const ChatMessage& m) {
    return std::string(kStartHeader) + m.role + std::string(kEndHeader) + "\n\n" + std::string(body(m.content)) +
           std::string(kEot);
  };
  std::string out;
  size_t first = 0;
  if (knowledge_date_block_) {
    if (prepend_bos_) out += bos_token_;
    std::string_view system;
    if (messages[0].role == "system") {
      system = body(messages[0].content);
      first = 1;
    }
    out += std::string(kStartHeader) + "system" + std::string(kEndHeader) + "\n\n";
    out += "Cutting Knowledge Date: " + knowledge_date_ + "\n";
    out += "Today Date: " + (options.date_string ? *options.date_string : current_date_ ? today() : default_date_string_) +
           "\n\n";
    out += std::string(system) + std::string(kEot);
  } else if (prepend_bos_) {
    out += bos_token_;
  }
  for (size_t i = first; i < messages.size(); ++i) out += turn(messages[i]);
  if (options.add_generation_prompt) out += std::string(kStartHeader) + "assistant" + std::string(kEndHeader) + "\n\n";
  return out;
}

Result<std::string> ChatTemplate::render_chatml(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  const auto open = [](std::string_view role) { return std::string(kImStart) + std::string(role) + "\n"; };
  const std::string close = std::string(kImEnd) + "\n";
  size_t last_query = messages.size() - 1;
  if (reasoning_history_) {
    bool found = false;
    for (size_t k = messages.size(); k-- > 0;) {
      const std::string& c = messages[k].content;
      const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
      if (messages[k].role == "user" && !tool_response) {
        last_query = k;
        found = true;
        break;
      }
    }
    if (!found && requires_user_query_) {
      return invalid_argument("no user query found in the messages (this Qwen3 template requires one)");
    }
  }
  std::string out;
  if (default_system_ && messages[0].role != "system") out += open("system") + *default_system_ + close;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!(reasoning_history_ && m.role == "assistant")) {
      out += open(m.role) + m.content + close;
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (contains(content, "</think>")) {
      const auto parts = python_split(content, "</think>");
      const auto before = python_split(rstrip_newlines(parts.front()), "<think>");
      reasoning = lstrip_newlines(before.back());
      content = lstrip_newlines(parts.back());
    }
    if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
      out += open(m.role) + "<think>\n" + std::string(rstrip_newlines(lstrip_newlines(reasoning))) + "\n</think>\n\n" +
             std::string(lstrip_newlines(content));
    } else {
      out += open(m.role) + std::string(content);
    }
    out += close;
  }
  if (options.add_generation_prompt) {
    out += open("assistant");
    if (thinking_switch_ && options.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace kascade
