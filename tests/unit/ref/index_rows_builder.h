// tests/unit/ref/index_rows_builder.h — builds decode and prefill index rows for the sparse tests
// from explicit key sets, and says which keys each (sequence, query, head) should then attend
// (the test's own reading of DESIGN.md §2.3 / include/kascade/attention.h, independent of
// src/ref/index_rows.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "attention_problem.h"
#include "kascade/attention.h"

namespace kascade::testing {

// rows[b][r] = the key set of row r of sequence b.
struct DecodeRowsHolder {
  std::vector<std::vector<std::vector<int32_t>>> rows;
  int32_t k_max = 0;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
  std::vector<int32_t> indices;   // [batch, num_rows, k_max], -1 padded
  std::vector<int32_t> row_lens;  // [batch, num_rows]

  DecodeRowsHolder(std::vector<std::vector<std::vector<int32_t>>> sets, int32_t k_max_, IndexGranularity g)
      : rows(std::move(sets)), k_max(k_max_), granularity(g) {
    for (const auto& seq : rows) {
      for (const auto& row : seq) {
        row_lens.push_back(static_cast<int32_t>(row.size()));
        for (int32_t e = 0; e < k_max; ++e) indices.push_back(e < static_cast<int32_t>(row.size()) ? row[e] : -1);
      }
    }
  }
  int32_t num_rows() const { return rows.empty() ? 0 : static_cast<int32_t>(rows[0].size()); }
  DecodeIndexRows view() {
    DecodeIndexRows v;
    v.indices = indices.data();
    v.row_lens = row_lens.data();
    v.batch = static_cast<int32_t>(rows.size());
    v.num_rows = num_rows();
    v.k_max = k_max;
    v.granularity = granularity;
    return v;
  }
  // Keys of (b, i = 0, h): the row its group reads (through head_map) or its own row.
  KeySetFn keys(const AttentionProblem& p, const std::vector<int32_t>& head_map) const {
    return [this, &p, head_map](int32_t b, int32_t, int32_t h) {
      int32_t r = h;
      if (granularity == IndexGranularity::kPerKvGroup) r = head_map.empty() ? h / p.group() : head_map[h / p.group()];
      return std::vector<int64_t>(rows[b][r].begin(), rows[b][r].end());
    };
  }
};

// Tiles of one call of sequence b, computed directly from DESIGN.md §2.3.
inline int64_t first_tile(const AttentionProblem& p, int32_t b, int32_t tile_size) {
  return (p.kv_len(b) - p.q_len(b)) / tile_size;
}
inline int64_t last_tile(const AttentionProblem& p, int32_t b, int32_t tile_size) {
  return (p.kv_len(b) - 1) / tile_size;
}

// Prefill rows: sets[b][tile - first_tile][r].
struct PrefillRowsHolder {
  std::vector<std::vector<std::vector<std::vector<int32_t>>>> sets;
  int32_t tile_size = 32;
  int32_t num_rows = 0;
  bool include_local = true;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
  std::vector<int32_t> tile_base;
  std::vector<int64_t> row_offsets;
  std::vector<int32_t> indices;

  // make(b, tile, r) gives row r of tile `tile` of sequence b.
  PrefillRowsHolder(const AttentionProblem& p, int32_t tile_size_, int32_t num_rows_, bool include_local_,
                    IndexGranularity g, const std::function<std::vector<int32_t>(int32_t, int64_t, int32_t)>& make)
      : tile_size(tile_size_), num_rows(num_rows_), include_local(include_local_), granularity(g) {
    tile_base.push_back(0);
    row_offsets.push_back(0);
    for (int32_t b = 0; b < p.batch(); ++b) {
      sets.emplace_back();
      if (p.q_len(b) > 0) {
        for (int64_t t = first_tile(p, b, tile_size); t <= last_tile(p, b, tile_size); ++t) {
          sets[b].emplace_back();
          for (int32_t r = 0; r < num_rows; ++r) {
            sets[b].back().push_back(make(b, t, r));
            const auto& row = sets[b].back().back();
            indices.insert(indices.end(), row.begin(), row.end());
            row_offsets.push_back(static_cast<int64_t>(indices.size()));
          }
        }
      }
      tile_base.push_back(tile_base.back() + static_cast<int32_t>(sets[b].size()));
    }
  }
  PrefillIndexRows view() {
    PrefillIndexRows v;
    v.indices = indices.data();
    v.row_offsets = row_offsets.data();
    v.tile_base = tile_base.data();
    v.batch = static_cast<int32_t>(sets.size());
    v.num_rows = num_rows;
    v.tile_size = tile_size;
    v.include_local = include_local;
    v.granularity = granularity;
    return v;
  }
  // Keys of query i of sequence b, head h: its tile's row (keys <= its position) ∪ local keys.
  KeySetFn keys(const AttentionProblem& p, const std::vector<int32_t>& head_map) const {
    return [this, &p, head_map](int32_t b, int32_t i, int32_t h) {
      const int64_t pos = p.position(b, i);
      const int64_t tile = pos / tile_size;
      int32_t r = h;
      if (granularity == IndexGranularity::kPerKvGroup) r = head_map.empty() ? h / p.group() : head_map[h / p.group()];
      std::vector<int64_t> keys;
      for (int32_t j : sets[b][tile - first_tile(p, b, tile_size)][r]) {
        if (j <= pos) keys.push_back(j);
      }
      if (include_local) {
        for (int64_t j = tile * tile_size; j <= pos; ++j) keys.push_back(j);
      }
      return keys;
    };
  }
};

}  // namespace kascade::testing
