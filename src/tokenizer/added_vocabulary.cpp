// tokenizer/added_vocabulary.cpp — added tokens: id assignment, leftmost-longest matching and the
// single_word / lstrip / rstrip rules of tokenizers' AddedVocabulary::find_matches.
// Tested by the parity fixtures (variants.json covers every flag).
#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/onig_unicode_tables.h"
#include "tokenizer/pcre_regex.h"
#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

bool in_ranges(std::span<const CodepointRange> ranges, char32_t cp) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), static_cast<uint32_t>(cp),
                                   [](uint32_t v, const CodepointRange& r) { return v < r.lo; });
  return it != ranges.begin() && cp <= std::prev(it)->hi;
}

bool is_white_space(char32_t cp) { return in_ranges(kOnigWhiteSpace, cp); }

// Rust regex's \w (Unicode): Alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t cp) {
  static const auto word = [] {
    auto regex = Pcre2Regex::compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]", false, "word class");
    return regex.ok() ? std::move(regex).value() : nullptr;
  }();
  if (!word) return false;
  std::string text;
  append_utf8(text, cp);
  std::vector<std::pair<size_t, size_t>> spans;
  return word->find_all(text, spans).ok() && !spans.empty();
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t start = 0;
  return is_word_char(previous_codepoint(text, text.size(), start));
}

bool starts_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t pos = 0;
  return is_word_char(next_codepoint(text, pos));
}

// Start of the whitespace run that ends `text`.
size_t trailing_space_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = 0;
    if (!is_white_space(previous_codepoint(text, end, start))) break;
    end = start;
  }
  return end;
}

// Length of the whitespace run that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_white_space(next_codepoint(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view pattern, int32_t token) {
  int32_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t child = -1;
    for (const auto& [b, index] : nodes[node].children) {
      if (b == byte) child = index;
    }
    if (child < 0) {
      child = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(byte, child);
      nodes.emplace_back();
    }
    node = child;
  }
  nodes[node].token = token;
  can_start[static_cast<unsigned char>(pattern[0])] = true;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [b, index] : nodes[node].children) {
      if (b == byte) child = index;
    }
    if (child < 0) break;
    node = child;
    if (nodes[node].token >= 0) best = {i + 1 - pos, nodes[node].token};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::from_json(const Json* spec, std::string_view path, const BpeModel& model,
                                                   const Normalizer& normalizer) {
  AddedVocabulary out;
  if (spec == nullptr) return out;
  if (!spec->is_array()) return invalid_argument(path, " must be an array, found ", json_kind(*spec));
  for (size_t i = 0; i < spec->size(); ++i) {
    const Json& entry = (*spec)[i];
    const std::string entry_path = std::string(path) + "[" + std::to_string(i) + "]";
    AddedToken token;
    KC_ASSIGN_OR_RETURN(token.content, string_member(entry, "content", entry_path));
    KC_RETURN_IF_ERROR(validate_utf8(token.content, field_path(entry_path, "content")));
    KC_ASSIGN_OR_RETURN(const Json* id_value, require_present(entry, "id", entry_path));
    KC_ASSIGN_OR_RETURN(const int64_t recorded_id, as_int(*id_value, field_path(entry_path, "id")));
    KC_ASSIGN_OR_RETURN(token.single_word, bool_member_or(entry, "single_word", entry_path, false));
    KC_ASSIGN_OR_RETURN(token.lstrip, bool_member_or(entry, "lstrip", entry_path, false));
    KC_ASSIGN_OR_RETURN(token.rstrip, bool_member_or(entry, "rstrip", entry_path, false));
    KC_ASSIGN_OR_RETURN(token.special, bool_member_or(entry, "special", entry_path, false));
    KC_ASSIGN_OR_RETURN(token.normalized, bool_member_or(entry, "normalized", entry_path, !token.special));
    if (token.content.empty()) continue;  // tokenizers ignores empty added tokens

    // tokenizers' id: an existing added token or model token of that content keeps its id; a new
    // one gets the next id after the model vocabulary and the added tokens so far.
    int32_t id = -1;
    if (const auto existing = out.by_content_.find(token.content); existing != out.by_content_.end()) {
      id = existing->second;
    } else if (const auto model_id = model.token_to_id(token.content)) {
      id = *model_id;
    } else {
      int64_t max_added = -1;
      for (const AddedToken& t : out.tokens_) max_added = std::max<int64_t>(max_added, t.id);
      const auto model_size = static_cast<int64_t>(model.size());
      id = static_cast<int32_t>(max_added >= model_size || model_size == 0 ? max_added + 1 : model_size);
    }
    if (recorded_id != id) {
      return invalid_argument(field_path(entry_path, "id"), " is ", recorded_id, " but \"", token.content,
                              "\" gets id ", id, " from the vocabulary and the tokens before it (as tokenizers assigns them)");
    }
    token.id = id;
    if (const auto it = out.by_id_.find(id); it != out.by_id_.end()) {
      out.tokens_[it->second] = token;  // a repeated content: the later flags win
    } else {
      out.by_id_.emplace(id, out.tokens_.size());
      out.by_content_.emplace(token.content, id);
      out.tokens_.push_back(token);
    }
  }
  // Tries: special tokens first, then the others (the order only matters for equal contents).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < out.tokens_.size(); ++i) {
      const AddedToken& token = out.tokens_[i];
      if (token.special != (pass == 0)) continue;
      if (token.normalized) {
        KC_ASSIGN_OR_RETURN(const std::string pattern, normalizer.apply(token.content));
        if (!pattern.empty()) out.normalized_trie_.insert(pattern, static_cast<int32_t>(i));
      } else {
        out.raw_trie_.insert(token.content, static_cast<int32_t>(i));
      }
    }
  }
  return out;
}

const AddedToken* AddedVocabulary::find_by_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::find_by_content(std::string_view content) const {
  const auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const {
  const Trie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  size_t consumed = 0;  // end of the last emitted segment
  size_t pos = 0;       // where the search resumes
  while (pos < text.size()) {
    // Leftmost match, longest at that position.
    size_t start = pos;
    std::pair<size_t, int32_t> match{0, -1};
    for (; start < text.size(); ++start) {
      if (!trie.can_start[static_cast<unsigned char>(text[start])]) continue;
      match = trie.longest_at(text, start);
      if (match.second >= 0) break;
    }
    if (match.second < 0) break;
    size_t stop = start + match.first;
    pos = stop;  // the search resumes after the match itself, not after stripped whitespace
    const AddedToken& token = tokens_[match.second];
    if (token.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), consumed);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (consumed < start) out.push_back(Segment{-1, std::string(text.substr(consumed, start - consumed))});
    out.push_back(Segment{token.id, std::string(text.substr(start, stop - start))});
    consumed = stop;
  }
  if (consumed < text.size() || text.empty()) out.push_back(Segment{-1, std::string(text.substr(consumed))});
}

}  // namespace kascade::tokenizer_detail
