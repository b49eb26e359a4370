// tests/cuda/test_backend_support.h — what the CUDA backend tests (test_backend_ops.cpp,
// test_backend_policies.cpp, test_backend_prefill.cpp) share: the budget and the policy configs
// (rotating kascade schedules) they run with, fp64 post-softmax probabilities of a
// decode problem (the independent reference behind tie-aware row comparisons), pooled rows, row
// extraction and structure checks, and a tie-aware equivalence of LessIsMore rows.
// The helpers are exercised by those tests; the LessIsMore equivalence is itself checked on
// hand-made rows in test_backend_ops.cpp (CudaBackendSupport.*, no GPU needed).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kascade/budget.h"
#include "kascade/policy.h"

namespace kascade::testing {

// The Top-k budget of the backend tests: rho = 10 %, k_min = 16.
Budget test_budget();

// Anchors `anchors` (sorted) over `num_layers` layers; reuse layer l, KV group g reads anchor row
// (g + l) % G. head_map: [num_layers, G].
Schedule rotating_schedule(int32_t num_layers, const std::vector<int32_t>& anchors, int32_t num_kv_heads);

// Policy `name` over `num_layers` layers of H query heads, G KV heads and head dim d, with
// test_budget(); the kascade policies get rotating_schedule(num_layers, anchors, G).
PolicyConfig backend_policy_config(const std::string& name, int32_t num_layers, const std::vector<int32_t>& anchors,
                                   int32_t num_heads, int32_t num_kv_heads, int32_t head_dim);

// p_h[j] = softmax_j(σ q_h·k_j) over j < n = kv_len[b], in fp64 from the problem's host floats: [H, n].
std::vector<double> head_probabilities(const DecodeProblem& p, int32_t b);

// Rows r = 0..R-1 reducing heads [r·H/R, (r+1)·H/R) of `probs` ([H, n]) with a sum or a max: [R, n].
std::vector<float> pooled_rows(const std::vector<double>& probs, int32_t num_heads, int64_t n, int32_t num_rows,
                               bool reduce_max);

// Entries [0, len) of row (b, r) of a [batch, num_rows, k_max] index buffer with lens [batch, num_rows].
std::vector<int32_t> row_entries(const std::vector<int32_t>& indices, const std::vector<int32_t>& lens,
                                 int32_t num_rows, int32_t k_max, int32_t b, int32_t r);

// Row (b, r): length in [0, k_max], entries distinct and in [0, n), −1 after the length.
::testing::AssertionResult well_formed_row(const std::vector<int32_t>& indices, const std::vector<int32_t>& lens,
                                           int32_t num_rows, int32_t k_max, int32_t b, int32_t r, int64_t n);

// Equal as sets.
::testing::AssertionResult same_set(std::vector<int32_t> got, std::vector<int32_t> want);

// LessIsMore rows of one sequence (budget k, `sinks` sinks) equal up to near-ties of the per-head
// scores: same size, both hold the sinks and the recent ceil(k/4) keys, and every key in one row
// but not the other has a partner on the other side that some head scores within eps_rel of it
// (a swap of two nearly tied keys of one head at the merge's cut exchanges exactly such a pair).
::testing::AssertionResult lessismore_rows_equivalent(const std::vector<int32_t>& got,
                                                      const std::vector<int32_t>& want,
                                                      const std::vector<double>& probs, int32_t num_heads, int64_t n,
                                                      int64_t k, int32_t sinks, double eps_rel);

}  // namespace kascade::testing
