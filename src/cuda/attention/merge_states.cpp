// src/cuda/attention/merge_states.cpp — validation and launch of merge_states (merge_states.h).
// Tested by tests/cuda/test_merge_states.cpp.
#include "cuda/attention/merge_states.h"

#include "cuda/attention/merge_states_kernels.h"
#include "cuda/common/cuda_status.h"

namespace kascade::cuda {

Status merge_states(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int64_t rows,
                    int32_t head_dim, float* o, float* lse, cudaStream_t stream) {
  KC_CHECK_ARG(o_a && lse_a && o_b && lse_b && o && lse, "merge_states: a pointer is null");
  KC_CHECK_ARG(rows >= 1, "merge_states: rows is ", rows, "; expected >= 1");
  KC_CHECK_ARG(head_dim >= 1, "merge_states: head_dim is ", head_dim, "; expected >= 1");
  return cuda_status(detail::launch_merge_states(o_a, lse_a, o_b, lse_b, rows, head_dim, o, lse, stream),
                     "launch of merge_states_kernel");
}

}  // namespace kascade::cuda
