// tokenizer/tokenizer.cpp — kascade::Tokenizer: tokenizer.json loading and the encode / decode
// pipeline of Hugging Face `tokenizers` (added tokens -> normalizer -> pre-tokenizer -> BPE ->
// post-processor; ByteLevel decoder). Tested by tests/unit/tokenizer/test_tokenizer_parity.cpp
// (fixtures from `tokenizers`), test_tokenizer_behaviour.cpp and test_tokenizer_errors.cpp.
#include "kascade/tokenizer.h"

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/file_text.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace kascade {

using tokenizer_detail::AddedToken;
using tokenizer_detail::AddedVocabulary;
using tokenizer_detail::BpeModel;
using tokenizer_detail::Json;
using tokenizer_detail::Normalizer;
using tokenizer_detail::PostProcessor;
using tokenizer_detail::PreTokenizer;
using tokenizer_detail::Segment;

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  PostProcessor post_processor;

  Impl(Normalizer n, PreTokenizer p, BpeModel m, AddedVocabulary a, PostProcessor pp)
      : normalizer(std::move(n)), pre_tokenizer(std::move(p)), model(std::move(m)), added(std::move(a)),
        post_processor(std::move(pp)) {}

  // The token string of `id` (added tokens first), or nullptr.
  const std::string* token_of(int32_t id) const {
    if (const AddedToken* token = added.find_by_id(id)) return &token->content;
    return model.id_to_token(id);
  }
};

namespace {

Status check_decoder(const Json& top) {
  const Json* decoder = tokenizer_detail::optional_member(top, "decoder");
  if (decoder == nullptr) {
    return unsupported("decoder is missing or null; kascade decodes byte-level BPE (decoder type ByteLevel)");
  }
  KC_ASSIGN_OR_RETURN(const std::string type, tokenizer_detail::string_member(*decoder, "type", "decoder"));
  if (type != "ByteLevel") {
    return unsupported("decoder type '", type, "' is not supported (kascade implements ByteLevel)");
  }
  return ok_status();
}

Status check_no_truncation_or_padding(const Json& top) {
  for (const char* key : {"truncation", "padding"}) {
    if (const Json* value = tokenizer_detail::optional_member(top, key); value != nullptr) {
      return unsupported(key, " is set in the file (", value->dump(),
                         "); kascade never truncates or pads prompts implicitly");
    }
  }
  return ok_status();
}

Result<std::unique_ptr<Tokenizer::Impl>> build(const Json& top) {
  if (!top.is_object()) return invalid_argument("the top level must be an object, found ", tokenizer_detail::json_kind(top));
  KC_RETURN_IF_ERROR(check_no_truncation_or_padding(top));
  KC_ASSIGN_OR_RETURN(const Json* model_spec, tokenizer_detail::require_present(top, "model", ""));
  KC_ASSIGN_OR_RETURN(BpeModel model, BpeModel::from_json(*model_spec, "model"));
  KC_ASSIGN_OR_RETURN(Normalizer normalizer,
                      Normalizer::from_json(tokenizer_detail::optional_member(top, "normalizer"), "normalizer"));
  KC_ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer,
                      PreTokenizer::from_json(tokenizer_detail::optional_member(top, "pre_tokenizer"), "pre_tokenizer"));
  KC_ASSIGN_OR_RETURN(PostProcessor post_processor,
                      PostProcessor::from_json(tokenizer_detail::optional_member(top, "post_processor"), "post_processor"));
  KC_RETURN_IF_ERROR(check_decoder(top));
  KC_ASSIGN_OR_RETURN(AddedVocabulary added,
                      AddedVocabulary::from_json(tokenizer_detail::optional_member(top, "added_tokens"), "added_tokens",
                                                 model, normalizer));
  auto impl = std::make_unique<Tokenizer::Impl>(std::move(normalizer), std::move(pre_tokenizer), std::move(model),
                                                std::move(added), std::move(post_processor));
  for (const int32_t id : impl->post_processor.prefix()) {
    if (impl->token_of(id) == nullptr) return invalid_argument("post_processor adds id ", id, ", which has no token");
  }
  for (const int32_t id : impl->post_processor.suffix()) {
    if (impl->token_of(id) == nullptr) return invalid_argument("post_processor adds id ", id, ", which has no token");
  }
  return impl;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_file(const std::string& path) {
  KC_ASSIGN_OR_RETURN(const std::string text, tokenizer_detail::read_text_file(path, "tokenizer file"));
  return from_json(text, path);
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  Json top;
  try {
    top = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    return Status(invalid_argument("malformed JSON: ", e.what())).with_context(origin);
  }
  auto impl = build(top);
  if (!impl.ok()) return Status(impl.status()).with_context(origin);
  return Tokenizer(std::move(impl).value());
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  KC_RETURN_IF_ERROR(tokenizer_detail::validate_utf8(text, "text to encode"));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> raw_segments;
  impl_->added.split(text, /*normalized_pass=*/false, raw_segments);
  std::vector<Segment> segments;
  std::vector<std::string> words;
  for (const Segment& raw : raw_segments) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    KC_ASSIGN_OR_RETURN(const std::string normalized, impl_->normalizer.apply(raw.text));
    segments.clear();
    impl_->added.split(normalized, /*normalized_pass=*/true, segments);
    for (const Segment& segment : segments) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        continue;
      }
      words.clear();
      KC_RETURN_IF_ERROR(impl_->pre_tokenizer.split(segment.text, words));
      for (const std::string& word : words) impl_->model.tokenize(word, ids);
    }
  }
  if (add_special_tokens) impl_->post_processor.apply(ids);
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    const std::string* token = impl_->token_of(id);
    if (token == nullptr) {
      return out_of_range("decode: ids[", i, "] = ", id, " is not in the vocabulary (", vocab_size(), " tokens, ids below ",
                          id_limit(), ")");
    }
    if (skip_special_tokens) {
      const AddedToken* added = impl_->added.find_by_id(id);
      if (added != nullptr && added->special) continue;
    }
    tokenizer_detail::byte_level_decode_token(*token, bytes);
  }
  return tokenizer_detail::utf8_lossy(bytes);
}

Result<std::string> Tokenizer::token_bytes(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  if (token == nullptr) return out_of_range("token id ", id, " is not in the vocabulary");
  std::string bytes;
  tokenizer_detail::byte_level_decode_token(*token, bytes);
  return bytes;
}

int64_t Tokenizer::vocab_size() const {
  int64_t n = static_cast<int64_t>(impl_->model.size());
  for (const AddedToken& token : impl_->added.tokens()) {
    if (!impl_->model.token_to_id(token.content)) ++n;
  }
  return n;
}

int64_t Tokenizer::id_limit() const {
  int64_t limit = impl_->model.id_limit();
  for (const AddedToken& token : impl_->added.tokens()) limit = std::max<int64_t>(limit, int64_t{token.id} + 1);
  return limit;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added.find_by_content(token)) return id;
  return impl_->model.token_to_id(token);
}

Result<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  if (token == nullptr) return out_of_range("token id ", id, " is not in the vocabulary");
  return *token;
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* token = impl_->added.find_by_id(id);
  return token != nullptr && token->special;
}

}  // namespace kascade
