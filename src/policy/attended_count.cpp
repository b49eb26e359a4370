// src/policy/attended_count.cpp — attended-key counts (attended_count.h) and the statistics
// aggregation of kascade/policy.h (AttendedCount, AttendedStatistics).
// Tested by tests/unit/policy/test_statistics.cpp.
#include "policy/attended_count.h"

#include <limits>

namespace kascade {

double AttendedCount::fraction() const {
  if (causal == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(attended) / static_cast<double>(causal);
}

AttendedCount AttendedStatistics::layer(ForwardMode mode, int32_t layer) const {
  const auto& layers = per_layer[static_cast<int>(mode)];
  if (layer < 0 || static_cast<size_t>(layer) >= layers.size()) return {};
  return layers[static_cast<size_t>(layer)];
}

AttendedCount AttendedStatistics::by_role(ForwardMode mode, LayerRole role) const {
  const auto& layers = per_layer[static_cast<int>(mode)];
  const auto& layer_roles = roles[static_cast<int>(mode)];
  AttendedCount sum;
  for (size_t l = 0; l < layers.size() && l < layer_roles.size(); ++l) {
    if (layer_roles[l] == role) sum += layers[l];
  }
  return sum;
}

AttendedCount AttendedStatistics::total(ForwardMode mode) const {
  AttendedCount sum;
  for (const auto& count : per_layer[static_cast<int>(mode)]) sum += count;
  return sum;
}

namespace policy {
namespace {

// Σ_{p = n - q}^{n - 1} (p + 1): the causal range of a sequence's queries.
int64_t causal_keys(int64_t q_len, int64_t kv_len) {
  const int64_t first = kv_len - q_len + 1;  // smallest causal range
  return (first + kv_len) * q_len / 2;
}

// Number of query heads reading row r: per query head 1 (row = head); per KV group, g heads for
// every group mapped to r.
std::vector<int64_t> heads_per_row(int32_t num_rows, IndexGranularity granularity, const int32_t* map,
                                   int32_t num_heads, int32_t num_kv_heads) {
  std::vector<int64_t> readers(static_cast<size_t>(num_rows), 0);
  if (granularity == IndexGranularity::kPerQueryHead) {
    for (int32_t h = 0; h < num_heads && h < num_rows; ++h) readers[static_cast<size_t>(h)] = 1;
    return readers;
  }
  const int32_t group = num_heads / num_kv_heads;
  for (int32_t g = 0; g < num_kv_heads; ++g) {
    const int32_t row = map ? map[g] : g;
    if (row >= 0 && row < num_rows) readers[static_cast<size_t>(row)] += group;
  }
  return readers;
}

}  // namespace

AttendedCount count_dense(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens, int32_t num_heads) {
  AttendedCount count;
  for (size_t b = 0; b < q_lens.size(); ++b) count.causal += num_heads * causal_keys(q_lens[b], kv_lens[b]);
  count.attended = count.causal;
  return count;
}

AttendedCount count_sparse_decode(const std::vector<int32_t>& kv_lens, const std::vector<int32_t>& row_lens,
                                  int32_t num_rows, IndexGranularity granularity, const int32_t* map,
                                  int32_t num_heads, int32_t num_kv_heads) {
  const std::vector<int64_t> readers = heads_per_row(num_rows, granularity, map, num_heads, num_kv_heads);
  AttendedCount count;
  for (size_t b = 0; b < kv_lens.size(); ++b) {
    count.causal += static_cast<int64_t>(num_heads) * kv_lens[b];
    for (int32_t r = 0; r < num_rows; ++r) {
      count.attended += readers[static_cast<size_t>(r)] * row_lens[b * num_rows + static_cast<size_t>(r)];
    }
  }
  return count;
}

AttendedCount count_sparse_prefill(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens,
                                   const ref::PrefillRowPlan& plan, bool include_local, IndexGranularity granularity,
                                   const int32_t* map, int32_t num_heads, int32_t num_kv_heads) {
  const int32_t num_rows = plan.num_rows;
  const int64_t tile_size = plan.tile_size;
  const std::vector<int64_t> readers = heads_per_row(num_rows, granularity, map, num_heads, num_kv_heads);
  AttendedCount count;
  for (size_t b = 0; b < q_lens.size(); ++b) {
    const int64_t kv_len = kv_lens[b];
    const int64_t first_pos = kv_len - q_lens[b];
    count.causal += num_heads * causal_keys(q_lens[b], kv_len);
    for (int64_t p = first_pos; p < kv_len; ++p) {
      const int64_t tile = p / tile_size;
      const int64_t slot = plan.tile_base[b] + (tile - plan.tile_first[b]);
      const int64_t local = include_local ? p - tile * tile_size + 1 : 0;
      for (int32_t r = 0; r < num_rows; ++r) {
        const int64_t row = slot * num_rows + r;
        const int64_t len = plan.row_offsets[static_cast<size_t>(row) + 1] - plan.row_offsets[static_cast<size_t>(row)];
        count.attended += readers[static_cast<size_t>(r)] * (len + local);
      }
    }
  }
  return count;
}

}  // namespace policy
}  // namespace kascade
