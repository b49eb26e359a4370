// tests/unit/policy/compose_ref.h — Kascade composed by hand from the src/ref ops (pooled scores →
// Top-k → sparse attention), independently of src/policy: the reference the policy tests compare
// the kascade variants and the decode oracle against. Rows are selected over the whole batch in
// one pooled-scores call (decode) or per tile (prefill), without the policy's shortcuts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kascade/policy.h"
#include "policy_fixture.h"

namespace kascade::testing {

// Decode rows of one layer: R rows per sequence, top-k(kv_len) of the pooled scores.
struct DecodeRowsStore {
  std::vector<int32_t> indices;  // [batch, R, k_max]
  std::vector<int32_t> lens;     // [batch, R]
  int32_t num_rows = 0;
  int32_t k_max = 0;
  DecodeIndexRows view(IndexGranularity granularity);
};

// Prefill rows of one layer: R rows per tile, top-k_t of the tile's pooled scores (ref plan).
struct PrefillRowsStore {
  std::vector<int32_t> indices;
  std::vector<int64_t> row_offsets;
  std::vector<int32_t> tile_base;
  std::vector<int64_t> tile_first;
  int32_t num_rows = 0;
  int32_t tile_size = 0;
  PrefillIndexRows view(int32_t batch, IndexGranularity granularity);
};

// reduce_max: max pooling instead of sum.
DecodeRowsStore select_decode_by_ref(const Problem& problem, const Call& call, int32_t layer, int32_t num_rows,
                                     bool reduce_max, const Budget& budget);
PrefillRowsStore select_prefill_by_ref(const Problem& problem, const Call& call, int32_t layer, int32_t num_rows,
                                       const PolicyConfig& config);

// The outputs of kascade / kascade-noremap / kascade-pooled (config.name) over all layers of the
// call, composed from ref ops. Layer 0 dense, anchors sparse over their own rows, reuse layers
// over anchor(l)'s rows through the head map.
RunResult compose_kascade(const Problem& problem, const Call& call, const PolicyConfig& config);

// The decode oracle: layer 0 dense, every other layer per query head top-k(n) of its own p.
RunResult compose_oracle_decode(const Problem& problem, const Call& call, const PolicyConfig& config);

}  // namespace kascade::testing
