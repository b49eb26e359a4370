// src/ref/topk_ref.cpp — exact Top-k (topk_ref.h): nth_element under the total order (score
// descending, index ascending), then the k winners sorted by index. O(n + k log k).
// Tested by tests/unit/ref/test_topk_ref.cpp (against a full sort under the same order, random and
// heavily tied inputs).
#include "ref/topk_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kascade::ref {

Status validate_topk_args(const float* scores, int64_t n, int64_t k, const int32_t* out) {
  KC_CHECK_ARG(n >= 0, "n is ", n, "; expected >= 0");
  KC_CHECK_ARG(n <= static_cast<int64_t>(std::numeric_limits<int32_t>::max()) + 1, "n is ", n,
               "; indices are int32, so n must not exceed 2^31");
  KC_CHECK_ARG(k >= 0, "k is ", k, "; expected >= 0");
  KC_CHECK_ARG(k <= n, "k = ", k, " exceeds the number of candidates n = ", n);
  if (k == 0) return ok_status();
  KC_CHECK_ARG(scores != nullptr, "scores is null");
  KC_CHECK_ARG(out != nullptr, "out is null");
  for (int64_t i = 0; i < n; ++i) {
    KC_CHECK_ARG(!std::isnan(scores[i]), "scores[", i, "] is NaN");
  }
  return ok_status();
}

Status topk_select_ref(const float* scores, int64_t n, int64_t k, int32_t* out) {
  KC_RETURN_IF_ERROR(validate_topk_args(scores, n, k, out));
  if (k == 0) return ok_status();
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto before = [scores](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  std::sort(order.begin(), order.begin() + k);
  std::copy_n(order.begin(), k, out);
  return ok_status();
}

}  // namespace kascade::ref
