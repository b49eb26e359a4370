// kascade/budget.h — the Top-k budget k(n) of DESIGN.md §2.1, in integer arithmetic.
//
//   k(n) = min(n, round_up(max(k_min, ceil(rho * n)), k_round)),  ceil(rho*n) =
//   (n * rho_ppm + 999999) / 1000000 in int64,
// and the per-tile prefill budget of §2.3 (rolling: k(s_t); non-rolling: k(n_call)), capped by
// the number of candidates s_t. Tested by tests/unit/core/test_core.cpp (against exact rational
// arithmetic for every n < 2^20 and several rho).
#pragma once

#include <cstdint>

#include "kascade/status.h"

namespace kascade {

struct Budget {
  int64_t rho_ppm = 100000;  // Top-k fraction in parts per million (0.10 → 100000)
  int64_t k_min = 128;       // lower bound on k before the min with n
  int64_t k_round = 1;       // k is rounded up to a multiple of this before the min with n
};

// Checks 0 < rho_ppm <= 1e6, k_min >= 0, k_round >= 1.
Status validate_budget(const Budget& budget);

// Converts a fraction (0.1) to parts per million, refusing values outside (0, 1].
Result<int64_t> fraction_to_ppm(double fraction);

// k(n) for n >= 0 keys (k(0) = 0).
int64_t budget_k(int64_t n, const Budget& budget);

// The width decode index rows are allocated with to hold `k` indices per row: the smallest value of
// the form 2^m or 3*2^(m-1) that is >= max(k, 16). Sized per call from k(kv_len), the rows then
// keep their width (and their buffer) while k grows by up to half, so a captured CUDA graph of the
// decode step (its row stride is baked in) replays for hundreds of steps instead of ~1/rho steps.
int64_t decode_row_width(int64_t k);

// Number of indices selected for a prefill tile starting at s_t (candidates j < s_t):
//   rolling:     min(s_t, k(s_t))
//   non-rolling: min(s_t, k(call_kv_len))
int64_t tile_budget(int64_t tile_start, int64_t call_kv_len, const Budget& budget, bool rolling);

}  // namespace kascade
