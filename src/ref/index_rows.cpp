// src/ref/index_rows.cpp — validation of decode and prefill index rows (index_rows.h). Duplicates are
// found with a stamp array over key positions (O(entries + kv_len) per sequence, no sorting), so the
// message can name both the repeated entry and the one it repeats.
// Tested by tests/unit/ref/test_sparse_attention.cpp through sparse_decode_ref / sparse_prefill_ref.
#include "ref/index_rows.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ref/views.h"

namespace kascade::ref {
namespace {

// Remembers, per key position, the last row that held it and at which entry.
class DuplicateFinder {
 public:
  explicit DuplicateFinder(int64_t positions) : row_stamp_(positions, -1), entry_(positions, 0) {}
  void next_row() { ++row_; }
  // Returns the earlier entry of this row that holds `pos`, or -1.
  int64_t insert(int32_t pos, int64_t entry) {
    if (row_stamp_[pos] == row_) return entry_[pos];
    row_stamp_[pos] = row_;
    entry_[pos] = entry;
    return -1;
  }

 private:
  std::vector<int64_t> row_stamp_;
  std::vector<int64_t> entry_;
  int64_t row_ = 0;
};

int32_t max_kv_len(const PagedKv& kv, int32_t batch) {
  int32_t n = 0;
  for (int32_t b = 0; b < batch; ++b) n = std::max(n, kv.kv_lens[b]);
  return n;
}

}  // namespace

CallTiles call_tiles(int32_t q_len, int32_t kv_len, int32_t tile_size) {
  if (q_len <= 0) return CallTiles{static_cast<int64_t>(kv_len) / tile_size, 0};
  const int64_t first = (static_cast<int64_t>(kv_len) - q_len) / tile_size;
  const int64_t last = (static_cast<int64_t>(kv_len) - 1) / tile_size;
  return CallTiles{first, last - first + 1};
}

Status validate_row_mapping(IndexGranularity granularity, int32_t num_rows, const int32_t* head_map,
                            int32_t num_heads, int32_t num_kv_heads) {
  KC_CHECK_ARG(num_rows >= 1, "rows.num_rows is ", num_rows, "; expected >= 1");
  switch (granularity) {
    case IndexGranularity::kPerKvGroup:
      if (head_map == nullptr) {
        KC_CHECK_ARG(num_rows == num_kv_heads, "rows.num_rows is ", num_rows,
                     " but per-KV-group rows without a head_map need one row per KV head (",
                     num_kv_heads, ")");
        return ok_status();
      }
      for (int32_t g = 0; g < num_kv_heads; ++g) {
        if (head_map[g] < 0 || head_map[g] >= num_rows) {
          return out_of_range("head_map[", g, "] = ", head_map[g], " is outside [0, rows.num_rows = ", num_rows,
                              ")");
        }
      }
      return ok_status();
    case IndexGranularity::kPerQueryHead:
      KC_CHECK_ARG(head_map == nullptr, "head_map must be null for per-query-head rows");
      KC_CHECK_ARG(num_rows == num_heads, "rows.num_rows is ", num_rows,
                   " but per-query-head rows need one row per query head (", num_heads, ")");
      return ok_status();
  }
  return invalid_argument("rows.granularity holds unknown value ", static_cast<int>(granularity));
}

Status validate_decode_rows(const DecodeIndexRows& rows, const int32_t* head_map, const QueryBatch& q,
                            const PagedKv& kv) {
  KC_CHECK_ARG(rows.batch == q.batch, "rows.batch is ", rows.batch, " but q.batch is ", q.batch);
  KC_RETURN_IF_ERROR(validate_row_mapping(rows.granularity, rows.num_rows, head_map, q.num_heads, kv.num_kv_heads));
  KC_CHECK_ARG(rows.k_max >= 0, "rows.k_max is ", rows.k_max, "; expected >= 0");
  KC_CHECK_ARG(rows.row_lens != nullptr, "rows.row_lens is null");
  KC_CHECK_ARG(rows.k_max == 0 || rows.indices != nullptr, "rows.indices is null");
  DuplicateFinder seen(max_kv_len(kv, q.batch));
  for (int32_t b = 0; b < rows.batch; ++b) {
    const int32_t kv_len = kv.kv_lens[b];
    for (int32_t r = 0; r < rows.num_rows; ++r) {
      const int64_t row = static_cast<int64_t>(b) * rows.num_rows + r;
      const int32_t len = rows.row_lens[row];
      if (len < 0 || len > rows.k_max) {
        return out_of_range("rows.row_lens[b=", b, "][row=", r, "] = ", len, " is outside [0, rows.k_max = ",
                            rows.k_max, "]");
      }
      const int32_t* entries = rows.indices + row * rows.k_max;
      seen.next_row();
      for (int32_t e = 0; e < len; ++e) {
        const int32_t pos = entries[e];
        if (pos < 0 || pos >= kv_len) {
          return out_of_range("rows.indices[b=", b, "][row=", r, "][", e, "] = ", pos, " is outside [0, kv_len = ",
                              kv_len, ")");
        }
        const int64_t earlier = seen.insert(pos, e);
        if (earlier >= 0) {
          return invalid_argument("rows.indices[b=", b, "][row=", r, "][", e, "] = ", pos, " repeats entry ",
                                  earlier, " (rows are sets)");
        }
      }
      for (int32_t e = len; e < rows.k_max; ++e) {
        KC_CHECK_ARG(entries[e] == -1, "rows.indices[b=", b, "][row=", r, "][", e, "] = ", entries[e],
                     " lies past row_len ", len, "; padding must be -1");
      }
    }
  }
  return ok_status();
}

Status validate_prefill_rows(const PrefillIndexRows& rows, const int32_t* head_map, const QueryBatch& q,
                             const PagedKv& kv) {
  KC_CHECK_ARG(rows.batch == q.batch, "rows.batch is ", rows.batch, " but q.batch is ", q.batch);
  KC_CHECK_ARG(rows.tile_size >= 1, "rows.tile_size is ", rows.tile_size, "; expected >= 1");
  KC_RETURN_IF_ERROR(validate_row_mapping(rows.granularity, rows.num_rows, head_map, q.num_heads, kv.num_kv_heads));
  KC_CHECK_ARG(rows.tile_base != nullptr, "rows.tile_base is null");
  KC_CHECK_ARG(rows.row_offsets != nullptr, "rows.row_offsets is null");
  KC_CHECK_ARG(rows.tile_base[0] == 0, "rows.tile_base[0] is ", rows.tile_base[0], "; expected 0");
  for (int32_t b = 0; b < rows.batch; ++b) {
    const CallTiles tiles = call_tiles(q_len(q, b), kv.kv_lens[b], rows.tile_size);
    const int64_t slots = static_cast<int64_t>(rows.tile_base[b + 1]) - rows.tile_base[b];
    KC_CHECK_ARG(slots == tiles.count, "rows.tile_base[", b + 1, "] - rows.tile_base[", b, "] = ", slots,
                 " but sequence ", b, " (q_len ", q_len(q, b), ", kv_len ", kv.kv_lens[b], ") touches ", tiles.count,
                 " tiles of ", rows.tile_size);
  }
  const int64_t num_row_total = static_cast<int64_t>(rows.tile_base[rows.batch]) * rows.num_rows;
  KC_CHECK_ARG(rows.row_offsets[0] == 0, "rows.row_offsets[0] is ", rows.row_offsets[0], "; expected 0");
  for (int64_t row = 0; row < num_row_total; ++row) {
    KC_CHECK_ARG(rows.row_offsets[row + 1] >= rows.row_offsets[row], "rows.row_offsets is not monotone: row_offsets[",
                 row + 1, "] = ", rows.row_offsets[row + 1], " < row_offsets[", row, "] = ", rows.row_offsets[row]);
  }
  KC_CHECK_ARG(rows.row_offsets[num_row_total] == 0 || rows.indices != nullptr, "rows.indices is null");

  DuplicateFinder seen(max_kv_len(kv, q.batch));
  for (int32_t b = 0; b < rows.batch; ++b) {
    const int32_t kv_len = kv.kv_lens[b];
    const CallTiles tiles = call_tiles(q_len(q, b), kv_len, rows.tile_size);
    for (int64_t s = 0; s < tiles.count; ++s) {
      const int64_t tile = tiles.first + s;
      const int64_t tile_start = tile * rows.tile_size;
      const int64_t bound = rows.include_local ? tile_start : std::min<int64_t>(tile_start + rows.tile_size, kv_len);
      const int64_t slot = rows.tile_base[b] + s;
      for (int32_t r = 0; r < rows.num_rows; ++r) {
        const int64_t row = slot * rows.num_rows + r;
        seen.next_row();
        for (int64_t e = rows.row_offsets[row]; e < rows.row_offsets[row + 1]; ++e) {
          const int32_t pos = rows.indices[e];
          const int64_t entry = e - rows.row_offsets[row];
          if (pos < 0 || pos >= bound) {
            return out_of_range("rows.indices of sequence ", b, ", tile ", tile, " (slot ", slot, "), row ", r,
                                ", entry ", entry, " = ", pos, " is outside [0, ", bound, ")",
                                rows.include_local ? " (candidates lie below the tile start s_t)"
                                                   : " (keys below min(s_t + tile_size, kv_len))");
          }
          const int64_t earlier = seen.insert(pos, entry);
          if (earlier >= 0) {
            return invalid_argument("rows.indices of sequence ", b, ", tile ", tile, " (slot ", slot, "), row ", r,
                                    ", entry ", entry, " = ", pos, " repeats entry ", earlier, " (rows are sets)");
          }
        }
      }
    }
  }
  return ok_status();
}

}  // namespace kascade::ref
