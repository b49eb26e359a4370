// tokenizer/bpe_model.h — the tokenizer.json BPE model: vocab, merges ("a b" strings or [a, b]
// lists), ignore_merges, unk_token / fuse_unk. Encoding one word follows `tokenizers`' algorithm
// exactly: symbols = the word's characters; a priority queue of adjacent pairs ordered by merge
// rank, then position; a popped entry is applied only if the pair there still makes the same token.
// Results are cached per word (bounded), so repeated words in long prompts cost one lookup.
// Refused as Unsupported: dropout, byte_fallback, a non-empty continuing_subword_prefix or
// end_of_word_suffix. Tested by the parity fixtures and tests/unit/tokenizer/test_bpe_model.cpp.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kascade/status.h"
#include "tokenizer/json_fields.h"

namespace kascade::tokenizer_detail {

// Hash for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // spec: the "model" object at `path`.
  static Result<BpeModel> from_json(const Json& spec, std::string_view path);

  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&& other) noexcept;

  // Appends the ids of one pre-tokenized word to `ids`. Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr if not in the vocabulary
  size_t size() const { return vocab_.size(); }
  int64_t id_limit() const { return static_cast<int64_t>(id_to_token_.size()); }

 private:
  BpeModel() = default;
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;

  TokenIdMap vocab_;
  std::vector<std::string> id_to_token_;  // by id; ids without a token hold an empty string
  std::vector<bool> id_present_;
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;

  static constexpr size_t kCacheCapacity = 1 << 15;  // words
  static constexpr size_t kMaxCachedWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace kascade::tokenizer_detail
