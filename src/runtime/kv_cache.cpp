// src/runtime/kv_cache.cpp — paged KV cache: page free list, per-sequence page lists, row writes
// with rounding to the cache dtype, block tables and PagedKv views (src/runtime/kv_cache.h).
// Tested by tests/unit/runtime/test_kv_cache.cpp.
#include "runtime/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <new>

namespace kascade::runtime {

int64_t kv_cache_bytes(const KvCacheConfig& c) {
  return 2 * static_cast<int64_t>(c.num_layers) * c.num_pages * c.page_size * c.num_kv_heads * c.head_dim *
         static_cast<int64_t>(dtype_size(c.dtype));
}

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::create(const KvCacheConfig& config) {
  KC_CHECK_ARG(config.num_layers > 0, "kv cache: num_layers = ", config.num_layers, " must be positive");
  KC_CHECK_ARG(config.num_kv_heads > 0, "kv cache: num_kv_heads = ", config.num_kv_heads, " must be positive");
  KC_CHECK_ARG(config.head_dim > 0, "kv cache: head_dim = ", config.head_dim, " must be positive");
  KC_CHECK_ARG(config.page_size > 0 && (config.page_size & (config.page_size - 1)) == 0,
               "kv cache: page_size = ", config.page_size, " must be a power of two");
  KC_CHECK_ARG(config.num_pages > 0, "kv cache: num_pages = ", config.num_pages, " must be positive");
  // Overflow check in long double before the int64 product.
  const long double bytes_ld = 2.0L * config.num_layers * config.num_pages * config.page_size *
                               config.num_kv_heads * config.head_dim * dtype_size(config.dtype);
  if (bytes_ld > static_cast<long double>(std::numeric_limits<int64_t>::max() / 4))
    return resource_exhausted("kv cache: ", static_cast<double>(bytes_ld), " bytes is too large");
  // Refuse what the machine cannot hold before asking the allocator (which may overcommit).
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0 && bytes_ld > static_cast<long double>(pages) * page_bytes)
    return resource_exhausted("kv cache: ", static_cast<double>(bytes_ld) / (1 << 30), " GiB for ", config.num_pages,
                              " pages of ", config.page_size, " tokens over ", config.num_layers,
                              " layers exceeds the machine's ",
                              static_cast<double>(pages) * static_cast<double>(page_bytes) / (1 << 30),
                              " GiB of memory (lower the context, the batch or use --kv-dtype bf16)");
  const int64_t half_bytes = kv_cache_bytes(config) / 2;
  std::unique_ptr<PagedKvCache> cache(new PagedKvCache(config));
  cache->k_.reset(new (std::nothrow) uint8_t[half_bytes]);
  cache->v_.reset(new (std::nothrow) uint8_t[half_bytes]);
  if (!cache->k_ || !cache->v_)
    return resource_exhausted("kv cache: cannot allocate 2 x ", half_bytes, " bytes (", config.num_pages,
                              " pages of ", config.page_size, " tokens, ", config.num_layers, " layers)");
  cache->free_list_.resize(config.num_pages);
  // Pop from the back: hand out low page ids first.
  for (int32_t p = 0; p < config.num_pages; ++p) cache->free_list_[p] = config.num_pages - 1 - p;
  return cache;
}

int32_t PagedKvCache::add_sequence() {
  for (size_t i = 0; i < sequences_.size(); ++i) {
    if (!sequences_[i].live) {
      sequences_[i] = Sequence{true, 0, {}};
      return static_cast<int32_t>(i);
    }
  }
  sequences_.push_back(Sequence{true, 0, {}});
  return static_cast<int32_t>(sequences_.size() - 1);
}

Status PagedKvCache::check_seq(int32_t seq) const {
  KC_CHECK_ARG(seq >= 0 && seq < static_cast<int32_t>(sequences_.size()) && sequences_[seq].live,
               "kv cache: sequence id ", seq, " is not a live sequence");
  return ok_status();
}

Status PagedKvCache::release_sequence(int32_t seq) {
  KC_RETURN_IF_ERROR(check_seq(seq));
  Sequence& s = sequences_[seq];
  for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it) free_list_.push_back(*it);
  s = Sequence{};
  return ok_status();
}

Result<int64_t> PagedKvCache::length(int32_t seq) const {
  KC_RETURN_IF_ERROR(check_seq(seq));
  return sequences_[seq].length;
}

Result<int64_t> PagedKvCache::capacity(int32_t seq) const {
  KC_RETURN_IF_ERROR(check_seq(seq));
  return static_cast<int64_t>(sequences_[seq].pages.size()) * config_.page_size;
}

Status PagedKvCache::reserve(int32_t seq, int64_t tokens) {
  KC_RETURN_IF_ERROR(check_seq(seq));
  KC_CHECK_ARG(tokens >= 0, "kv cache: reserve of ", tokens, " tokens");
  Sequence& s = sequences_[seq];
  const int64_t pages_needed = (tokens + config_.page_size - 1) / config_.page_size;
  const int64_t extra = pages_needed - static_cast<int64_t>(s.pages.size());
  if (extra <= 0) return ok_status();
  if (extra > static_cast<int64_t>(free_list_.size()))
    return resource_exhausted("kv cache: sequence ", seq, " needs ", extra, " more pages for ", tokens,
                              " tokens but only ", free_list_.size(), " of ", config_.num_pages,
                              " pages are free (raise the context or batch limits of the cache)");
  for (int64_t i = 0; i < extra; ++i) {
    s.pages.push_back(free_list_.back());
    free_list_.pop_back();
  }
  return ok_status();
}

Status PagedKvCache::write(int32_t layer, int32_t seq, int64_t start, int64_t count, const float* k, const float* v) {
  KC_RETURN_IF_ERROR(check_seq(seq));
  KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "kv cache: layer ", layer, " outside [0, ",
               config_.num_layers, ")");
  KC_CHECK_ARG(k != nullptr && v != nullptr, "kv cache: write with null k or v");
  KC_CHECK_ARG(start >= 0 && count >= 0, "kv cache: write of ", count, " rows at ", start);
  const Sequence& s = sequences_[seq];
  const int64_t cap = static_cast<int64_t>(s.pages.size()) * config_.page_size;
  KC_CHECK_ARG(start + count <= cap, "kv cache: write of rows [", start, ", ", start + count, ") of sequence ", seq,
               " beyond its reserved capacity ", cap);
  const int64_t row = row_elements();
  const size_t elem = dtype_size(config_.dtype);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t pos = start + i;
    const int64_t off = element_offset(layer, s.pages[pos / config_.page_size], pos % config_.page_size);
    void* kd = k_.get() + off * elem;
    void* vd = v_.get() + off * elem;
    convert_buffer(k + i * row, DType::kF32, kd, config_.dtype, row);
    convert_buffer(v + i * row, DType::kF32, vd, config_.dtype, row);
  }
  return ok_status();
}

Status PagedKvCache::commit_length(int32_t seq, int64_t tokens) {
  KC_RETURN_IF_ERROR(check_seq(seq));
  Sequence& s = sequences_[seq];
  const int64_t cap = static_cast<int64_t>(s.pages.size()) * config_.page_size;
  KC_CHECK_ARG(tokens >= 0 && tokens <= cap, "kv cache: commit of length ", tokens, " for sequence ", seq,
               " with capacity ", cap);
  s.length = tokens;
  return ok_status();
}

Result<BlockTables> PagedKvCache::block_tables(std::span<const int32_t> seqs, std::span<const int64_t> tokens) const {
  KC_CHECK_ARG(seqs.size() == tokens.size(), "kv cache: ", seqs.size(), " sequences but ", tokens.size(), " lengths");
  KC_CHECK_ARG(!seqs.empty(), "kv cache: block tables of an empty batch");
  BlockTables out;
  for (size_t b = 0; b < seqs.size(); ++b) {
    KC_RETURN_IF_ERROR(check_seq(seqs[b]));
    const int64_t pages = (tokens[b] + config_.page_size - 1) / config_.page_size;
    KC_CHECK_ARG(tokens[b] >= 0 && pages <= static_cast<int64_t>(sequences_[seqs[b]].pages.size()),
                 "kv cache: block table for ", tokens[b], " tokens of sequence ", seqs[b], " beyond its capacity");
    out.max_pages_per_seq = std::max<int32_t>(out.max_pages_per_seq, static_cast<int32_t>(pages));
  }
  out.max_pages_per_seq = std::max(out.max_pages_per_seq, 1);
  out.table.assign(seqs.size() * out.max_pages_per_seq, -1);
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int64_t pages = (tokens[b] + config_.page_size - 1) / config_.page_size;
    const auto& src = sequences_[seqs[b]].pages;
    std::copy(src.begin(), src.begin() + pages, out.table.begin() + b * out.max_pages_per_seq);
  }
  return out;
}

Result<PagedKv> PagedKvCache::view(int32_t layer, const BlockTables& tables, const int32_t* kv_lens) const {
  KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "kv cache: layer ", layer, " outside [0, ",
               config_.num_layers, ")");
  KC_CHECK_ARG(kv_lens != nullptr, "kv cache: kv_lens is null");
  KC_CHECK_ARG(tables.max_pages_per_seq > 0 && !tables.table.empty(), "kv cache: empty block tables");
  PagedKv kv;
  const size_t elem = dtype_size(config_.dtype);
  kv.k = k_.get() + layer * layer_elements() * elem;
  kv.v = v_.get() + layer * layer_elements() * elem;
  kv.dtype = config_.dtype;
  kv.num_pages = config_.num_pages;
  kv.page_size = config_.page_size;
  kv.num_kv_heads = config_.num_kv_heads;
  kv.head_dim = config_.head_dim;
  kv.block_table = tables.table.data();
  kv.max_pages_per_seq = tables.max_pages_per_seq;
  kv.kv_lens = kv_lens;
  return kv;
}

Status PagedKvCache::read(int32_t layer, int32_t seq, int64_t pos, float* k, float* v) const {
  KC_RETURN_IF_ERROR(check_seq(seq));
  KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "kv cache: layer ", layer, " out of range");
  KC_CHECK_ARG(k != nullptr && v != nullptr, "kv cache: read into null buffers");
  const Sequence& s = sequences_[seq];
  KC_CHECK_ARG(pos >= 0 && pos < static_cast<int64_t>(s.pages.size()) * config_.page_size, "kv cache: read of row ",
               pos, " of sequence ", seq, " beyond its capacity");
  const int64_t off = element_offset(layer, s.pages[pos / config_.page_size], pos % config_.page_size);
  const size_t elem = dtype_size(config_.dtype);
  convert_buffer(k_.get() + off * elem, config_.dtype, k, DType::kF32, row_elements());
  convert_buffer(v_.get() + off * elem, config_.dtype, v, DType::kF32, row_elements());
  return ok_status();
}

}  // namespace kascade::runtime
