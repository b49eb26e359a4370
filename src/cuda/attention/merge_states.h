// src/cuda/attention/merge_states.h — merge of two partial attention states over disjoint key
// sets (DESIGN.md §3 "outputs o and lse, so partial results merge"), the GPU twin of
// ref::merge_states_ref:  lse = log(e^lse_a + e^lse_b),  o = o_a·e^(lse_a−lse) + o_b·e^(lse_b−lse);
// an empty state (lse = −inf) contributes nothing, two empty states give o = 0, lse = −inf.
// Used to combine a sparse pass with another partial result (e.g. dense + sparse segments); the
// split-KV merge inside the decode kernel applies the same formula. Outputs may alias input a.
// Tested by tests/cuda/test_merge_states.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/status.h"

namespace kascade::cuda {

// o_*: device [rows, head_dim] fp32; lse_*: device [rows] fp32.
Status merge_states(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int64_t rows,
                    int32_t head_dim, float* o, float* lse, cudaStream_t stream);
}  // namespace kascade::cuda
