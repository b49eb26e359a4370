// src/ref/scores_ref.h — CPU reference of the anchor layers' scoring: exact post-softmax weights
// p_h[j] = exp(σ q_h·k_j − lse_h) (lse over the query's full causal range), pooled into rows.
// A pooling spec groups query heads into rows: row r holds heads [r·H/R, (r+1)·H/R) and reduces
// them with a sum (Kascade: R = G per KV group; kascade-pooled: R = 1 over all heads) or a max
// (omnikv: R = 1); R = H gives per-query-head scores (oracle, lessismore).
// Both ops validate q, kv and params like the attention ops (views.h), plus the pooling spec
// (num_rows >= 1 dividing H: InvalidArgument). Tested by tests/unit/ref/test_scores_ref.cpp.
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::ref {

enum class PoolReduce : uint8_t { kSum = 0, kMax = 1 };

struct PoolingSpec {
  int32_t num_rows = 0;  // R; must divide H
  PoolReduce reduce = PoolReduce::kSum;
};

// Decode (q_len = 1 per sequence, position n−1 with n = kv_len[b]):
//   scores[b][r][j] = reduce over heads h of row r of p_h[j], for j < n; entries j >= n of the
// row (up to scores_row_stride) are left untouched.
// scores: [batch, num_rows, scores_row_stride] fp32, scores_row_stride >= max kv_len.
Status pooled_scores_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                const PoolingSpec& pooling, float* scores, int64_t scores_row_stride);

// Prefill, one tile t of sequence b (the call's queries of that tile only, DESIGN.md §2.3):
//   scores[r][j] = reduce over (queries i of the tile in this call, heads h of row r) of
//                  p_{h,i}[j],  for candidates j < s_t = t·tile_size;
//   local_mass[r] = the same reduction of the mass each query puts on its local keys s_t..i
//                  (sum of per-query local masses for kSum, max for kMax).
// scores: [num_rows, s_t] fp32 (row stride s_t); local_mass: [num_rows] (may be null).
// The tile must intersect the call's queries of sequence b (InvalidArgument otherwise). For kMax the
// rows start from 0 (all p >= 0).
Status pooled_scores_prefill_tile_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                      const PoolingSpec& pooling, int32_t b, int64_t tile, int32_t tile_size,
                                      float* scores, float* local_mass);

}  // namespace kascade::ref
