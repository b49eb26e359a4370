// src/policy/attended_count.h — counts of attended (query, head, key) triples of one layer call,
// computed on the host from the call's lengths and the row lengths (never from the rows
// themselves, so counting needs no copy from the backend). Denominator: each (query, head)'s
// causal range, position + 1. Tested by tests/unit/policy/test_statistics.cpp (hand-computed
// cases).
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/attention.h"
#include "kascade/policy.h"
#include "ref/prefill_rows.h"

namespace kascade::policy {

// Every (query, head) attends its whole causal range. q_lens, kv_lens: [batch].
AttendedCount count_dense(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens, int32_t num_heads);

// Decode rows: head h attends row h (kPerQueryHead) or row map[h / g] (kPerKvGroup; identity when
// map is null). row_lens: [batch, num_rows]; map: [G] host or null.
AttendedCount count_sparse_decode(const std::vector<int32_t>& kv_lens, const std::vector<int32_t>& row_lens,
                                  int32_t num_rows, IndexGranularity granularity, const int32_t* map,
                                  int32_t num_heads, int32_t num_kv_heads);

// Prefill rows of `plan`: query at position p of tile t attends its head's row of the tile plus,
// with include_local, its local keys s_t..p. q_lens, kv_lens: [batch].
AttendedCount count_sparse_prefill(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens,
                                   const ref::PrefillRowPlan& plan, bool include_local, IndexGranularity granularity,
                                   const int32_t* map, int32_t num_heads, int32_t num_kv_heads);

}  // namespace kascade::policy
