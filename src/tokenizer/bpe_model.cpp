// tokenizer/bpe_model.cpp — BPE vocab/merges loading and the per-word merge loop of `tokenizers`
// (word.rs merge_all, without dropout). Tested by tests/unit/tokenizer/test_bpe_model.cpp and the
// parity fixtures.
#include "tokenizer/bpe_model.h"

#include <queue>

#include "tokenizer/unicode_text.h"

namespace kascade::tokenizer_detail {
namespace {

// A queue entry: the pair starting at symbol `pos` merges with rank `rank` into `new_id`.
struct QueuedMerge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};
// std::priority_queue pops the largest: order so that the lowest rank, then the lowest position,
// comes first (tokenizers' Merge ordering).
struct LaterMergeFirst {
  bool operator()(const QueuedMerge& a, const QueuedMerge& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

struct Symbol {
  int32_t id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
  bool removed;
};

Result<std::pair<std::string, std::string>> parse_merge(const Json& entry, const std::string& path) {
  if (entry.is_string()) {
    const std::string text = entry.get<std::string>();
    const size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      return invalid_argument(path, " must be two tokens separated by one space, found \"", text, "\"");
    }
    return std::make_pair(text.substr(0, space), text.substr(space + 1));
  }
  if (entry.is_array()) {
    if (entry.size() != 2 || !entry[0].is_string() || !entry[1].is_string()) {
      return invalid_argument(path, " must be a list of two strings, found ", entry.dump());
    }
    return std::make_pair(entry[0].get<std::string>(), entry[1].get<std::string>());
  }
  return invalid_argument(path, " must be \"a b\" or [\"a\", \"b\"], found ", json_kind(entry));
}

}  // namespace

BpeModel::BpeModel(BpeModel&& other) noexcept
    : vocab_(std::move(other.vocab_)),
      id_to_token_(std::move(other.id_to_token_)),
      id_present_(std::move(other.id_present_)),
      merges_(std::move(other.merges_)),
      ignore_merges_(other.ignore_merges_),
      unk_id_(other.unk_id_),
      fuse_unk_(other.fuse_unk_) {}

BpeModel& BpeModel::operator=(BpeModel&& other) noexcept {
  vocab_ = std::move(other.vocab_);
  id_to_token_ = std::move(other.id_to_token_);
  id_present_ = std::move(other.id_present_);
  merges_ = std::move(other.merges_);
  ignore_merges_ = other.ignore_merges_;
  unk_id_ = other.unk_id_;
  fuse_unk_ = other.fuse_unk_;
  std::lock_guard<std::mutex> lock(cache_mutex_);
  cache_.clear();
  return *this;
}

Result<BpeModel> BpeModel::from_json(const Json& spec, std::string_view path) {
  KC_ASSIGN_OR_RETURN(const std::string type, string_member(spec, "type", path));
  if (type != "BPE") {
    return unsupported(field_path(path, "type"), " '", type, "' is not supported (kascade implements BPE)");
  }
  if (const Json* dropout = optional_member(spec, "dropout"); dropout != nullptr) {
    return unsupported(field_path(path, "dropout"), " is set (", dropout->dump(),
                       "); BPE dropout is for training and is not supported");
  }
  KC_ASSIGN_OR_RETURN(const bool byte_fallback, bool_member_or(spec, "byte_fallback", path, false));
  if (byte_fallback) return unsupported(field_path(path, "byte_fallback"), " = true is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const Json* affix = optional_member(spec, key); affix != nullptr) {
      KC_ASSIGN_OR_RETURN(const std::string text, as_string(*affix, field_path(path, key)));
      if (!text.empty()) return unsupported(field_path(path, key), " \"", text, "\" is not supported");
    }
  }

  BpeModel model;
  KC_ASSIGN_OR_RETURN(model.ignore_merges_, bool_member_or(spec, "ignore_merges", path, false));
  KC_ASSIGN_OR_RETURN(model.fuse_unk_, bool_member_or(spec, "fuse_unk", path, false));

  const std::string vocab_path = field_path(path, "vocab");
  KC_ASSIGN_OR_RETURN(const Json* vocab, require_present(spec, "vocab", path));
  if (!vocab->is_object()) return invalid_argument(vocab_path, " must be an object, found ", json_kind(*vocab));
  model.vocab_.reserve(vocab->size());
  int64_t max_id = -1;
  for (const auto& [token, value] : vocab->items()) {
    KC_ASSIGN_OR_RETURN(const int64_t id, as_int(value, vocab_path + "[\"" + token + "\"]"));
    if (id < 0 || id > INT32_MAX) return out_of_range(vocab_path, "[\"", token, "\"] = ", id, " is not a valid id");
    model.vocab_.emplace(token, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  if (max_id >= static_cast<int64_t>(4 * model.vocab_.size() + 1024)) {
    return invalid_argument(vocab_path, " has ", model.vocab_.size(), " tokens but ids up to ", max_id);
  }
  model.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  model.id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : model.vocab_) {
    if (model.id_present_[id]) {
      return invalid_argument(vocab_path, " gives id ", id, " to both \"", model.id_to_token_[id], "\" and \"", token, "\"");
    }
    model.id_present_[id] = true;
    model.id_to_token_[id] = token;
  }

  const std::string merges_path = field_path(path, "merges");
  KC_ASSIGN_OR_RETURN(const Json* merges, require_present(spec, "merges", path));
  if (!merges->is_array()) return invalid_argument(merges_path, " must be an array, found ", json_kind(*merges));
  model.merges_.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string entry_path = merges_path + "[" + std::to_string(rank) + "]";
    KC_ASSIGN_OR_RETURN(const auto pair, parse_merge((*merges)[rank], entry_path));
    const auto a = model.vocab_.find(pair.first);
    const auto b = model.vocab_.find(pair.second);
    const auto merged = model.vocab_.find(pair.first + pair.second);
    if (a == model.vocab_.end() || b == model.vocab_.end() || merged == model.vocab_.end()) {
      const std::string& missing = a == model.vocab_.end() ? pair.first
                                   : b == model.vocab_.end() ? pair.second
                                                             : pair.first + pair.second;
      return invalid_argument(entry_path, " (\"", pair.first, "\", \"", pair.second, "\") uses \"", missing,
                              "\", which is not in ", vocab_path);
    }
    // A repeated pair keeps its last rank, as tokenizers' HashMap collect does.
    model.merges_[pair_key(a->second, b->second)] = Merge{static_cast<int32_t>(rank), merged->second};
  }

  if (const Json* unk = optional_member(spec, "unk_token"); unk != nullptr) {
    KC_ASSIGN_OR_RETURN(const std::string unk_token, as_string(*unk, field_path(path, "unk_token")));
    const auto it = model.vocab_.find(unk_token);
    if (it == model.vocab_.end()) {
      return invalid_argument(field_path(path, "unk_token"), " \"", unk_token, "\" is not in ", vocab_path);
    }
    model.unk_id_ = it->second;
  }
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids;
  merge_word(word, word_ids);
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(word_ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  // Symbols: one per character; a character outside the vocabulary becomes unk_token (runs fused
  // when fuse_unk) or, without unk_token, is dropped (tokenizers' merge_word).
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool last_is_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t start = pos;
    next_codepoint(word, pos);
    const auto it = vocab_.find(word.substr(start, pos - start));
    if (it != vocab_.end()) {
      symbols.push_back({it->second, 0, 0, false});
      last_is_unk = false;
    } else if (unk_id_) {
      if (!(fuse_unk_ && last_is_unk)) symbols.push_back({*unk_id_, 0, 0, false});
      last_is_unk = true;
    }
  }
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }

  std::priority_queue<QueuedMerge, std::vector<QueuedMerge>, LaterMergeFirst> queue;
  const auto lookup = [&](int32_t a, int32_t b) -> const Merge* {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const Merge* m = lookup(symbols[i].id, symbols[i + 1].id)) queue.push({m->rank, i, m->new_id});
  }
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    const int32_t right_pos = left.next;
    const Symbol right = symbols[right_pos];
    // A stale entry: the pair at this position no longer makes the same token.
    const Merge* current = lookup(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    symbols[right_pos].removed = true;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* m = lookup(symbols[left.prev].id, left.id)) queue.push({m->rank, left.prev, m->new_id});
    }
    if (left.next >= 0) {
      if (const Merge* m = lookup(left.id, symbols[left.next].id)) queue.push({m->rank, top.pos, m->new_id});
    }
  }
  for (const Symbol& s : symbols) {
    if (!s.removed) ids.push_back(s.id);
  }
}

}  // namespace kascade::tokenizer_detail
