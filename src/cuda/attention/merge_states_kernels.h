// src/cuda/attention/merge_states_kernels.h — cudaError_t launcher of the merge kernel
// (merge_states_kernels.cu), wrapped into a Status by merge_states.cpp.
// Tested by tests/cuda/test_merge_states.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kascade::cuda::detail {

// o_*: device [rows, head_dim] fp32; lse_*: device [rows]; outputs may alias input a or b.
cudaError_t launch_merge_states(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b,
                                int64_t rows, int head_dim, float* o, float* lse, cudaStream_t stream);

}  // namespace kascade::cuda::detail
