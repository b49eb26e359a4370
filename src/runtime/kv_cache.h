// src/runtime/kv_cache.h — the paged KV cache of the CPU runtime (DESIGN.md §3 "KV cache").
//
// Storage: for every layer, K and V arrays of [num_pages, page_size, G, d] elements of `dtype`
// (the layout of PagedKv in include/kascade/attention.h). Pages are allocated per sequence from
// one free list and shared by all layers: page p of a sequence holds the same positions in every
// layer, so one block table per sequence serves every layer (as in vLLM). Memory is reserved up
// front (num_pages is fixed) but the operating system only backs pages that are written.
//
// Life of a forward call: reserve(seq, len + q) makes room; each layer writes its q new rows with
// write(); attention reads the layer through view(); commit_length(seq, len + q) makes the new
// length the sequence's length once every layer holds it.
//
// Tested by tests/unit/runtime/test_kv_cache.cpp (against a dense per-sequence copy of every row
// written, through random interleavings of sequences, page releases and reuse).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::runtime {

struct KvCacheConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;  // G
  int32_t head_dim = 0;      // d
  int32_t page_size = 16;    // power of two
  int32_t num_pages = 0;     // total pages shared by all sequences
  DType dtype = DType::kF32;
};

// Bytes of K + V storage for a configuration (all layers).
int64_t kv_cache_bytes(const KvCacheConfig& config);

// Block tables of a batch of sequences for one forward call: [batch, max_pages_per_seq] page ids,
// rows padded with -1 past a sequence's pages.
struct BlockTables {
  std::vector<int32_t> table;  // [batch, max_pages_per_seq]
  int32_t max_pages_per_seq = 0;
};

class PagedKvCache {
 public:
  // Validates the configuration (positive sizes, power-of-two page size) and reserves storage;
  // a size larger than the machine's physical memory, or that cannot be allocated, is refused with
  // ResourceExhausted (naming the GiB needed and available).
  static Result<std::unique_ptr<PagedKvCache>> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int32_t free_pages() const { return static_cast<int32_t>(free_list_.size()); }

  // A new empty sequence; returns its id.
  int32_t add_sequence();
  // Returns the sequence's pages to the free list; its id becomes invalid.
  Status release_sequence(int32_t seq);

  // Committed length (tokens whose K/V every layer holds) and reserved capacity in tokens.
  Result<int64_t> length(int32_t seq) const;
  Result<int64_t> capacity(int32_t seq) const;

  // Ensures pages for `tokens` positions; all-or-nothing: ResourceExhausted (naming the pages
  // needed and free) leaves the sequence as it was.
  Status reserve(int32_t seq, int64_t tokens);

  // Writes `count` rows at positions [start, start + count) of one layer.
  // k, v: [count, G, d] fp32, rounded to the cache dtype. The positions must be reserved.
  Status write(int32_t layer, int32_t seq, int64_t start, int64_t count, const float* k, const float* v);

  // Declares that every layer holds positions [0, tokens); tokens <= capacity.
  Status commit_length(int32_t seq, int64_t tokens);

  // Block tables covering `tokens[b]` positions of sequence seqs[b] (each within its capacity).
  Result<BlockTables> block_tables(std::span<const int32_t> seqs, std::span<const int64_t> tokens) const;

  // The PagedKv view of one layer for a batch. block_tables and kv_lens must outlive the view;
  // kv_lens: [batch] keys per sequence including the call's own (already written) rows.
  Result<PagedKv> view(int32_t layer, const BlockTables& tables, const int32_t* kv_lens) const;

  // Reads row `pos` of one layer back as fp32 (tests, debugging). k, v: [G, d] fp32.
  Status read(int32_t layer, int32_t seq, int64_t pos, float* k, float* v) const;

 private:
  struct Sequence {
    bool live = false;
    int64_t length = 0;
    std::vector<int32_t> pages;
  };
  explicit PagedKvCache(const KvCacheConfig& config) : config_(config) {}
  Status check_seq(int32_t seq) const;
  int64_t row_elements() const { return static_cast<int64_t>(config_.num_kv_heads) * config_.head_dim; }
  int64_t layer_elements() const {
    return static_cast<int64_t>(config_.num_pages) * config_.page_size * row_elements();
  }
  // Element offset of (layer, page, row) in the K or V storage.
  int64_t element_offset(int32_t layer, int32_t page, int64_t row_in_page) const {
    return layer * layer_elements() + (static_cast<int64_t>(page) * config_.page_size + row_in_page) * row_elements();
  }

  KvCacheConfig config_;
  std::unique_ptr<uint8_t[]> k_;  // [num_layers, num_pages, page_size, G, d] `dtype`
  std::unique_ptr<uint8_t[]> v_;  // [num_layers, num_pages, page_size, G, d] `dtype`
  std::vector<int32_t> free_list_;
  std::vector<Sequence> sequences_;
};

}  // namespace kascade::runtime
