// budget.cpp — k(n) and the per-tile budget (include/kascade/budget.h).
// Tested by tests/unit/core/test_core.cpp.
#include "kascade/budget.h"

#include <algorithm>
#include <cmath>

namespace kascade {

Status validate_budget(const Budget& budget) {
  KC_CHECK_ARG(budget.rho_ppm > 0 && budget.rho_ppm <= 1000000, "budget rho_ppm is ", budget.rho_ppm,
               "; expected 1..1000000 (a Top-k fraction in (0, 1])");
  KC_CHECK_ARG(budget.k_min >= 0, "budget k_min is ", budget.k_min, "; expected >= 0");
  KC_CHECK_ARG(budget.k_round >= 1, "budget k_round is ", budget.k_round, "; expected >= 1");
  return ok_status();
}

Result<int64_t> fraction_to_ppm(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    return invalid_argument("Top-k fraction is ", fraction, "; expected a value in (0, 1]");
  return static_cast<int64_t>(std::llround(fraction * 1e6));
}

int64_t budget_k(int64_t n, const Budget& budget) {
  if (n <= 0) return 0;
  const int64_t ceil_rho_n = (n * budget.rho_ppm + 999999) / 1000000;
  int64_t k = std::max(budget.k_min, ceil_rho_n);
  k = (k + budget.k_round - 1) / budget.k_round * budget.k_round;
  return std::min(n, k);
}

int64_t decode_row_width(int64_t k) {
  int64_t width = 16;
  while (width < k) {
    const int64_t next = width % 3 == 0 ? width / 3 * 4 : width / 2 * 3;  // 16, 24, 32, 48, 64, 96, ...
    width = next;
  }
  return width;
}

int64_t tile_budget(int64_t tile_start, int64_t call_kv_len, const Budget& budget, bool rolling) {
  const int64_t k = rolling ? budget_k(tile_start, budget) : budget_k(call_kv_len, budget);
  return std::min(tile_start, k);
}

}  // namespace kascade
