// src/ref/prefill_rows.cpp — plan of a prefill call's compact index rows (prefill_rows.h): the tiles
// each sequence's call touches, their slots, and the CSR offsets of rows of exactly
// tile_budget(s_t, kv_len, budget, rolling) entries.
// Tested by tests/unit/ref/test_prefill_rows.cpp (hand-computed budgets at tile boundaries,
// rolling and not, chunked calls, several sequences).
#include "ref/prefill_rows.h"

#include <limits>

#include "ref/index_rows.h"

namespace kascade::ref {

Result<PrefillRowPlan> plan_prefill_rows(const int32_t* q_lens, const int32_t* kv_lens, int32_t batch,
                                         int32_t tile_size, int32_t num_rows, const Budget& budget, bool rolling) {
  KC_CHECK_ARG(batch >= 1, "batch is ", batch, "; expected >= 1");
  KC_CHECK_ARG(q_lens != nullptr, "q_lens is null");
  KC_CHECK_ARG(kv_lens != nullptr, "kv_lens is null");
  KC_CHECK_ARG(tile_size >= 1, "tile_size is ", tile_size, "; expected >= 1");
  KC_CHECK_ARG(num_rows >= 1, "num_rows is ", num_rows, "; expected >= 1");
  KC_RETURN_IF_ERROR(validate_budget(budget));

  PrefillRowPlan plan;
  plan.num_rows = num_rows;
  plan.tile_size = tile_size;
  plan.tile_base.assign(1, 0);
  plan.tile_first.reserve(static_cast<size_t>(batch));
  int64_t slots = 0;
  for (int32_t b = 0; b < batch; ++b) {
    KC_CHECK_ARG(q_lens[b] >= 1, "q_lens[", b, "] is ", q_lens[b], "; expected >= 1");
    KC_CHECK_ARG(kv_lens[b] >= q_lens[b], "kv_lens[", b, "] = ", kv_lens[b], " is smaller than q_lens[", b,
                 "] = ", q_lens[b]);
    const CallTiles tiles = call_tiles(q_lens[b], kv_lens[b], tile_size);
    plan.tile_first.push_back(tiles.first);
    slots += tiles.count;
    KC_CHECK_ARG(slots <= std::numeric_limits<int32_t>::max(), "the call touches ", slots,
                 " tiles, more than tile_base (int32) can index");
    plan.tile_base.push_back(static_cast<int32_t>(slots));
  }
  KC_CHECK_ARG(slots * num_rows < std::numeric_limits<int32_t>::max(), "the call has ", slots * num_rows,
               " rows, more than row indices (int32) can address");
  plan.row_offsets.reserve(static_cast<size_t>(slots * num_rows + 1));
  plan.row_offsets.push_back(0);
  for (int32_t b = 0; b < batch; ++b) {
    for (int64_t tile = plan.tile_first[b]; tile < plan.tile_first[b] + (plan.tile_base[b + 1] - plan.tile_base[b]);
         ++tile) {
      const int64_t k = tile_budget(tile * tile_size, kv_lens[b], budget, rolling);
      for (int32_t r = 0; r < num_rows; ++r) plan.row_offsets.push_back(plan.row_offsets.back() + k);
    }
  }
  return plan;
}

PrefillIndexRows PrefillIndexSet::view(bool include_local, IndexGranularity granularity) {
  if (indices.size() != static_cast<size_t>(plan.total_indices())) {
    indices.resize(static_cast<size_t>(plan.total_indices()), -1);
  }
  PrefillIndexRows rows;
  rows.indices = indices.data();
  rows.row_offsets = plan.row_offsets.data();
  rows.tile_base = plan.tile_base.data();
  rows.batch = static_cast<int32_t>(plan.tile_first.size());
  rows.num_rows = plan.num_rows;
  rows.tile_size = plan.tile_size;
  rows.include_local = include_local;
  rows.granularity = granularity;
  return rows;
}

}  // namespace kascade::ref
