// tests/unit/tokenizer/test_chat_template.cpp — chat formatting against conversations rendered by
// jinja2 from tokenizer_config.json templates in the Llama-3, Llama-3.1, ChatML, Qwen2 and Qwen3
// layouts (tests/data/tokenizer/chat/, made by scripts/make_tokenizer_fixtures.py the way
// transformers' apply_chat_template renders), recognition and refusal, and the rendered prompt
// tokenized by the matching fixture tokenizer.
#include <gtest/gtest.h>

#include <ctime>
#include <map>

#include "fixtures.h"
#include "kascade/tokenizer.h"

namespace kascade {
namespace {

std::string config_path(const std::string& family) {
  return testing::tokenizer_data_path("chat/" + family + ".tokenizer_config.json");
}

ChatTemplate load(const std::string& family) {
  auto chat = ChatTemplate::from_file(config_path(family));
  EXPECT_TRUE(chat.ok()) << chat.status().to_string();
  return std::move(chat).value();
}

TEST(ChatTemplate, RecognisesEachFamily) {
  struct Expected {
    ChatFormat format;
    const char* description;
  };
  const std::map<std::string, Expected> families = {
      {"llama3", {ChatFormat::kLlama3, "Llama-3, BOS first, content trimmed"}},
      {"llama31", {ChatFormat::kLlama3, "Llama-3, BOS first, content trimmed, Llama-3.1 system block (knowledge date "
                                        "December 2023, today's date \"26 Jul 2024\")"}},
      {"chatml", {ChatFormat::kChatML, "ChatML"}},
      {"qwen2", {ChatFormat::kChatML, "ChatML, default system prompt \"You are a helpful assistant.\""}},
      {"qwen3", {ChatFormat::kChatML, "ChatML, enable_thinking switch, Qwen3 reasoning history"}},
      {"qwen3_strict", {ChatFormat::kChatML, "ChatML, enable_thinking switch, Qwen3 reasoning history, user query required"}},
  };
  for (const auto& [family, expected] : families) {
    const ChatTemplate chat = load(family);
    EXPECT_EQ(chat.format(), expected.format) << family;
    EXPECT_EQ(chat.description(), expected.description) << family;
  }
  EXPECT_EQ(load("llama3").bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(load("qwen3").eos_token(), "<|im_end|>");
}

TEST(ChatTemplate, RendersLikeJinja) {
  const nlohmann::json fixture = testing::load_json_fixture("chat/chat_cases.json");
  std::map<std::string, ChatTemplate> templates;
  int rendered = 0;
  int refused = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string family = c.at("family").get<std::string>();
    if (!templates.contains(family)) templates.emplace(family, load(family));
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    ChatOptions options;
    const auto& o = c.at("options");
    options.add_generation_prompt = o.at("add_generation_prompt").get<bool>();
    if (o.contains("enable_thinking")) options.enable_thinking = o.at("enable_thinking").get<bool>();
    if (o.contains("date_string")) options.date_string = o.at("date_string").get<std::string>();
    auto got = templates.at(family).render(messages, options);
    if (c.contains("error")) {
      // The template raised (Qwen3 without a user query): so must we.
      EXPECT_FALSE(got.ok()) << family << ": jinja raised \"" << c.at("error").get<std::string>() << "\"";
      if (!got.ok()) {
        EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
      }
      ++refused;
      continue;
    }
    ASSERT_TRUE(got.ok()) << family << ": " << got.status().to_string();
    ASSERT_EQ(testing::escaped(*got), testing::escaped(c.at("rendered").get<std::string>()))
        << family << " case " << c.dump();
    ++rendered;
  }
  EXPECT_GT(rendered, 200);
  EXPECT_GT(refused, 0);
}

TEST(ChatTemplate, RenderedPromptTokenizesWithWholeSpecialTokens) {
  const Tokenizer llama = testing::load_fixture_tokenizer("llama3");
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello!"}};
  const std::string prompt = *load("llama3").render(messages, ChatOptions{});
  // BOS is in the text already, so it is encoded without adding special tokens.
  const auto ids = *llama.encode(prompt, false);
  EXPECT_EQ(ids.front(), *llama.token_to_id("<|begin_of_text|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *llama.token_to_id("<|eot_id|>")), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *llama.token_to_id("<|start_header_id|>")), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *llama.token_to_id("<|begin_of_text|>")), 1);

  const Tokenizer qwen = testing::load_fixture_tokenizer("qwen2");
  ChatOptions no_thinking;
  no_thinking.enable_thinking = false;
  const auto qwen_ids = *qwen.encode(*load("qwen3").render(messages, no_thinking), false);
  EXPECT_EQ(std::count(qwen_ids.begin(), qwen_ids.end(), *qwen.token_to_id("<|im_start|>")), 3);
  EXPECT_EQ(std::count(qwen_ids.begin(), qwen_ids.end(), *qwen.token_to_id("<think>")), 1);
}

TEST(ChatTemplate, RefusesWhatItCannotRenderExactly) {
  auto unknown = ChatTemplate::from_file(config_path("unrecognised"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("not a format kascade recognises"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("<|im_start|>"), std::string::npos);

  auto both = ChatTemplate::from_json(R"({"chat_template": "<|im_start|><|im_end|><|start_header_id|><|end_header_id|><|eot_id|>"})");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kUnsupported);

  auto none = ChatTemplate::from_json(R"({"eos_token": "</s>"})", "cfg.json");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("cfg.json: has no chat_template"), std::string::npos);

  const std::string missing = testing::tokenizer_data_path("chat/missing.json");
  auto file = ChatTemplate::from_file(missing);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find(missing), std::string::npos);

  auto bad_json = ChatTemplate::from_json("{", "cfg.json");
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidArgument);
  auto no_bos = ChatTemplate::from_json(R"({"chat_template": "{{ bos_token }}<|start_header_id|><|end_header_id|><|eot_id|>"})");
  EXPECT_EQ(no_bos.status().code(), StatusCode::kInvalidArgument);

  const ChatTemplate llama = load("llama3");
  const std::vector<ChatMessage> tool = {{"tool", "x"}};
  EXPECT_EQ(llama.render(tool, {}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(llama.render(std::vector<ChatMessage>{}, {}).status().code(), StatusCode::kInvalidArgument);
  ChatOptions thinking;
  thinking.enable_thinking = false;
  const std::vector<ChatMessage> user = {{"user", "hi"}};
  EXPECT_EQ(llama.render(user, thinking).status().code(), StatusCode::kInvalidArgument);
  ChatOptions dated;
  dated.date_string = "1 Jan 2025";
  EXPECT_EQ(llama.render(user, dated).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplate, TodaysDateWhenTheTemplateAsksTheClock) {
  // Llama-3.2 templates take the date from strftime_now (transformers defines it), so the rendered
  // prompt carries today's date unless one is given.
  nlohmann::json config = testing::load_json_fixture("chat/llama31.tokenizer_config.json");
  std::string text = config.at("chat_template").get<std::string>();
  const std::string fallback = "{%- set date_string = \"26 Jul 2024\" %}";
  ASSERT_NE(text.find(fallback), std::string::npos);
  text.replace(text.find(fallback), fallback.size(),
               "{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}{%- else %}" + fallback +
                   "{%- endif %}");
  config["chat_template"] = text;
  auto chat = ChatTemplate::from_json(config.dump());
  ASSERT_TRUE(chat.ok()) << chat.status().to_string();
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[32];
  today[std::strftime(today, sizeof(today), "%d %b %Y", &local)] = '\0';
  const std::vector<ChatMessage> user = {{"user", "hi"}};
  EXPECT_NE(chat->render(user, {})->find(std::string("Today Date: ") + today + "\n\n"), std::string::npos);
  ChatOptions dated;
  dated.date_string = "01 Jan 2025";
  EXPECT_NE(chat->render(user, dated)->find("Today Date: 01 Jan 2025\n\n"), std::string::npos);
}

TEST(ChatTemplate, ConfigVariants) {
  // bos_token as an AddedToken object and chat_template as a list of named templates.
  const nlohmann::json base = testing::load_json_fixture("chat/llama3.tokenizer_config.json");
  nlohmann::json config = {{"bos_token", {{"content", "<|begin_of_text|>"}, {"lstrip", false}}},
                           {"chat_template", {{{"name", "tool_use"}, {"template", "unused"}},
                                              {{"name", "default"}, {"template", base.at("chat_template")}}}}};
  auto chat = ChatTemplate::from_json(config.dump());
  ASSERT_TRUE(chat.ok()) << chat.status().to_string();
  const std::vector<ChatMessage> user = {{"user", " hi "}};
  EXPECT_EQ(*chat->render(user, {}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  config["chat_template"] = {{{"name", "tool_use"}, {"template", "x"}}};
  EXPECT_EQ(ChatTemplate::from_json(config.dump()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kascade
