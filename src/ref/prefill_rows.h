// src/ref/prefill_rows.h — layout of a prefill call's compact index rows (PrefillIndexRows,
// include/kascade/attention.h), planned on the host from the call's lengths. Every row of tile t
// holds exactly tile_budget(s_t, kv_len, budget, rolling) entries (DESIGN.md §2.1, §2.3), so the
// offsets are known before selection runs and selection writes rows in place.
// Tested by tests/unit/ref/test_prefill_rows.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/attention.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade::ref {

struct PrefillRowPlan {
  std::vector<int32_t> tile_base;    // [batch + 1]
  std::vector<int64_t> row_offsets;  // [num_slots * num_rows + 1]
  std::vector<int64_t> tile_first;   // [batch] first tile index of each sequence in this call
  int32_t num_rows = 0;
  int32_t tile_size = 32;
  int64_t total_indices() const { return row_offsets.empty() ? 0 : row_offsets.back(); }
  int32_t num_slots() const { return tile_base.empty() ? 0 : tile_base.back(); }
};

// q_lens, kv_lens: [batch] host arrays. Fails (InvalidArgument) on batch < 1, q_len < 1,
// kv_len < q_len, tile_size < 1, num_rows < 1 or an invalid budget. tile_first[b] =
// (kv_len - q_len) / tile_size; sequence b owns tile_base[b+1] - tile_base[b] =
// (kv_len - 1) / tile_size - tile_first[b] + 1 slots.
Result<PrefillRowPlan> plan_prefill_rows(const int32_t* q_lens, const int32_t* kv_lens, int32_t batch,
                                         int32_t tile_size, int32_t num_rows, const Budget& budget,
                                         bool rolling);

// Owns the storage of a planned set of rows and exposes it as a PrefillIndexRows view.
struct PrefillIndexSet {
  PrefillRowPlan plan;
  std::vector<int32_t> indices;  // [plan.total_indices()], filled by selection
  // A view over plan and indices (which it first sizes to plan.total_indices(), new entries -1);
  // valid until either is modified.
  PrefillIndexRows view(bool include_local, IndexGranularity granularity);
};

}  // namespace kascade::ref
