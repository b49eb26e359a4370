// tokenizer/added_vocabulary.h — the "added_tokens" of tokenizer.json (special tokens such as
// <|eot_id|>, and non-special ones such as Qwen3's <think>) and how `tokenizers` cuts them out of
// the text before normalization and pre-tokenization:
//   - tokens with normalized=false are matched in the raw text, the others in the normalized text;
//   - matching is leftmost-longest over all tokens of the pass (aho-corasick LeftmostLongest),
//     non-overlapping; a match that fails single_word is skipped (scanning resumes after it);
//   - lstrip / rstrip widen a match over the whitespace before / after it.
// Ids follow tokenizers' assignment (the model's id when the content is in the vocabulary, else the
// next free id); a file whose recorded id disagrees is refused.
// Tested by the parity fixtures (tests/data/tokenizer/*.cases.json, variants.json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kascade/status.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"

namespace kascade::tokenizer_detail {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of the input: an added token (id >= 0) or text to normalize / pre-tokenize (id < 0).
struct Segment {
  int32_t id = -1;
  std::string text;
};

class AddedVocabulary {
 public:
  // spec: the "added_tokens" array (nullptr when absent).
  static Result<AddedVocabulary> from_json(const Json* spec, std::string_view path, const BpeModel& model,
                                           const Normalizer& normalizer);

  // Cuts the added tokens of one pass out of `text` (normalized: the tokens with normalized=true).
  // Appends the resulting segments, text segments included even when empty.
  void split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const;

  const AddedToken* find_by_id(int32_t id) const;
  std::optional<int32_t> find_by_content(std::string_view content) const;
  size_t size() const { return tokens_.size(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of the patterns of one pass (leftmost-longest search).
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node
      int32_t token = -1;                                       // index into tokens_, or -1
    };
    std::vector<Node> nodes{Node{}};
    bool can_start[256] = {};
    void insert(std::string_view pattern, int32_t token);
    // Longest pattern starting at text[pos]: (length, token index), or token -1.
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  TokenIdMap by_content_;
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace kascade::tokenizer_detail
