// src/policy/cpu_fast_select.h — the CPU backend's fast score-based selection, with exactly the
// semantics and errors of cpu_select.h's reference versions (kascade/backend.h defines them):
//   select_decode   pooled post-softmax scores of each sequence's query over its n keys → Top-k;
//   select_prefill  per (sequence, tile): pooled scores of the tile's queries in this call over the
//                   candidates j < s_t → Top-k at the planned row length (DESIGN.md §2.3).
// Two passes, both GEMM-shaped (cpu_fast_core.h): (1) the lse of every (query, head) over its full
// causal range (fast_causal_lse); (2) per job (a tile, or a decode sequence) and KV group, logit
// tiles [queries × group heads, 256 keys] by sgemm, p = exp(logit − lse) vectorised, reduced into
// the job's pooled rows. Jobs run in parallel (OpenMP), each with its own scratch of rows × n
// floats (never the n²/T score matrix); each job writes only its own index rows, so results do not
// depend on the thread count. Top-k: an exact threshold (nth_element over the values) and one
// ascending pass taking the scores above it and, at the threshold, the lowest indices first.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp (against src/ref's scores and Top-k,
// tie-aware, and 1 vs 2 threads).
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::policy {

// The k largest of n scores under the order (score descending, index ascending), written in
// ascending index order — the contract of ref::topk_select_ref, same errors (k outside [0, n], NaN
// scores, null pointers). scratch: reused storage of n floats.
// scores: [n]; out: [k].
Status fast_topk(const float* scores, int64_t n, int64_t k, int32_t* out, std::vector<float>& scratch);

Status fast_select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const ScorePooling& pooling, const int32_t* k_per_seq /* [batch] host */,
                          const DecodeIndexRows& rows);

Status fast_select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const ScorePooling& pooling, const PrefillIndexRows& rows);

}  // namespace kascade::policy
