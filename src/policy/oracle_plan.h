// src/policy/oracle_plan.h — layout of the prefill oracle's rows (DESIGN.md §2.4): one "tile" per
// query (tile_size 1), one row per query head, row of the query at position p holding
// k(p + 1) keys out of j <= p (no local keys). Same CSR layout as src/ref/prefill_rows.h.
// Tested by tests/unit/policy/test_policy.cpp (the oracle's rows have these lengths).
#pragma once

#include <cstdint>

#include "kascade/budget.h"
#include "kascade/status.h"
#include "ref/prefill_rows.h"

namespace kascade::policy {

// q_lens, kv_lens: [batch] host. Fails on q_len < 1 or kv_len < q_len.
Result<ref::PrefillRowPlan> plan_oracle_prefill_rows(const int32_t* q_lens, const int32_t* kv_lens, int32_t batch,
                                                     int32_t num_heads, const Budget& budget);

}  // namespace kascade::policy
