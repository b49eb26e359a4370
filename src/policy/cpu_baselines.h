// src/policy/cpu_baselines.h — the CPU backend's decode selection for two baselines of DESIGN.md
// §2.4, exactly as kascade/backend.h defines them:
//   Quest:      per query head, pages of `page_size` keys scored by Σ_d max(q_d·min_d, q_d·max_d)
//               (per-channel min/max of the page's valid keys, accumulated in fp64, channel order),
//               pages in descending score (ties: lower page) taken whole until they hold >= k keys.
//   LessIsMore: one row per sequence: sinks ∪ the most recent ceil(k/4) keys, then every head's
//               keys ranked by p_h (descending, ties: lower index) merged rank by rank (heads in
//               order), skipping keys already present, until k - ceil(k/4) new keys or none left.
// Rows are written in ascending key order. Host memory.
// Tested by tests/unit/policy/test_baselines.cpp (against brute-force reimplementations in the test).
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::policy {

Status cpu_select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size,
                               const int32_t* k_per_seq /* [batch] host */, const DecodeIndexRows& rows);

Status cpu_select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                    const int32_t* k_per_seq /* [batch] host */, int32_t num_sinks,
                                    const DecodeIndexRows& rows);

// LessIsMore's split of a budget k: the recent window ceil(k/4), the merged part k - ceil(k/4).
inline int64_t lessismore_recent(int64_t k) { return (k + 3) / 4; }

}  // namespace kascade::policy
