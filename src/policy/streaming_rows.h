// src/policy/streaming_rows.h — StreamingLLM rows in closed form (DESIGN.md §2.4), built on the
// host: with budget k (per step) or k_t (per tile, the planned row length), s = min(sinks, k):
//   decode:  {0 .. s-1} ∪ [n - (k - s), n)
//   prefill: {0 .. s-1} ∪ [s_t - (k_t - s), s_t)    (local keys s_t..i are attended anyway)
// A saturated budget (k = n, k_t = s_t) gives every candidate. Rows are ascending.
// Tested by tests/unit/policy/test_baselines.cpp (closed form checked key by key in the test).
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/status.h"
#include "ref/prefill_rows.h"

namespace kascade::policy {

// kv_lens, k_per_seq: [batch]; indices: [batch, k_max] (-1 padded); row_lens: [batch].
Status streaming_decode_rows(const std::vector<int32_t>& kv_lens, const std::vector<int32_t>& k_per_seq,
                             int32_t sinks, int32_t k_max, int32_t* indices, int32_t* row_lens);

// One row per tile slot (plan.num_rows must be 1); indices: [plan.total_indices()].
Status streaming_prefill_rows(const ref::PrefillRowPlan& plan, int32_t sinks, int32_t* indices);

}  // namespace kascade::policy
