// src/cuda/ops/elementwise_kernels.cu — SwiGLU and embedding gather kernels (elementwise.h).
// Tested by tests/cuda/test_ops_elementwise.cpp.
#include <algorithm>

#include "cuda/common/cuda_status.h"
#include "cuda/common/programmatic_launch.cuh"
#include "cuda/ops/act_types.cuh"
#include "cuda/ops/elementwise.h"

namespace kascade::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, int64_t tokens, int64_t inter, T* __restrict__ out) {
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();
  const int64_t total = tokens * inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / inter, c = i - t * inter;
    const float z = ops_detail::to_float(gate_up[t * 2 * inter + c]);
    const float u = ops_detail::to_float(gate_up[t * 2 * inter + inter + c]);
    out[i] = ops_detail::from_float<T>(z / (1.0f + expf(-z)) * u);
  }
}

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ table, int64_t vocab, int32_t hidden,
                                 const int32_t* __restrict__ tokens, float* __restrict__ out, uint32_t* error) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  const bool valid = id >= 0 && id < vocab;
  if (!valid && threadIdx.x == 0 && error != nullptr) atomicOr(error, 1u);
  const T* row = table + (valid ? static_cast<int64_t>(id) : 0) * hidden;
  for (int32_t c = threadIdx.x; c < hidden; c += kThreads)
    out[t * hidden + c] = valid ? ops_detail::to_float(row[c]) : 0.0f;
}

}  // namespace

Status silu_mul(const void* gate_up, int64_t tokens, int64_t inter, void* out, DType dtype, cudaStream_t stream,
                bool programmatic) {
  KC_CHECK_ARG(tokens >= 0 && inter >= 1, "silu_mul: tokens = ", tokens, ", inter = ", inter);
  if (tokens == 0) return ok_status();
  KC_CHECK_ARG(gate_up != nullptr && out != nullptr, "silu_mul: null pointer");
  KC_CHECK_ARG(gate_up != out, "silu_mul: out must not alias gate_up");
  return ops_detail::dispatch_act(dtype, "silu_mul", [&](auto tag) -> Status {
    using T = decltype(tag);
    const int64_t blocks = std::min<int64_t>((tokens * inter + kThreads - 1) / kThreads, 65536);
    KC_RETURN_IF_ERROR(cuda_status(detail::launch_kernel(programmatic, silu_mul_kernel<T>,
                                                         dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                                                         static_cast<const T*>(gate_up), tokens, inter,
                                                         static_cast<T*>(out)),
                                   "launch of silu_mul_kernel"));
    return ok_status();
  });
}

Status embedding_gather(const void* table, DType dtype, int64_t vocab, int32_t hidden, const int32_t* tokens,
                        int64_t n, float* out, uint32_t* error, cudaStream_t stream) {
  KC_CHECK_ARG(vocab >= 1 && hidden >= 1 && n >= 0 && n <= 0x7fffffff, "embedding_gather: vocab = ", vocab,
               ", hidden = ", hidden, ", n = ", n);
  if (n == 0) return ok_status();
  KC_CHECK_ARG(table != nullptr && tokens != nullptr && out != nullptr, "embedding_gather: null pointer");
  return ops_detail::dispatch_act(dtype, "embedding_gather", [&](auto tag) -> Status {
    using T = decltype(tag);
    embedding_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(static_cast<const T*>(table), vocab, hidden,
                                                                          tokens, out, error);
    KC_CUDA_RETURN_IF_LAUNCH_FAILED("embedding_kernel");
    return ok_status();
  });
}

}  // namespace kascade::cuda
