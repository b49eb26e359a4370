// src/ref/topk_ref.h — exact Top-k selection: the k largest of n scores, ties to the lower index
// (a total order: score descending, then index ascending), output written in ascending index
// order. k > n is an error; k == n selects everything. NaN scores are refused.
// -0 and +0 tie; ±inf are ordinary scores. Errors (InvalidArgument): n < 0, n > 2^31, k < 0, k > n, a
// NaN score (named by index), null pointers when k > 0.
// Tested by tests/unit/ref/test_topk_ref.cpp (against a full sort).
#pragma once

#include <cstdint>

#include "kascade/status.h"

namespace kascade::ref {

// The checks of topk_select_ref (also the CPU backend's fast Top-k): n in [0, 2^31], k in [0, n],
// and, when k > 0, non-null pointers and no NaN score.
Status validate_topk_args(const float* scores /* [n] */, int64_t n, int64_t k, const int32_t* out);

// out: [k] int32, ascending.
Status topk_select_ref(const float* scores /* [n] */, int64_t n, int64_t k, int32_t* out);

}  // namespace kascade::ref
