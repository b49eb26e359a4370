// src/cuda/ops/norm_kernels.cu — RMSNorm kernel (norm.h): one block per output row. Rows of a
// width divisible by 4 up to kVecMaxDim (every model's hidden size) take the vector kernel: x and
// the weight are loaded once, as float4, into registers before the reduction (one memory round trip
// per row instead of two: at decode the kernel runs on a handful of rows and its latency is its
// cost); other widths take the scalar kernel.
// Tested by tests/cuda/test_ops_norm.cpp (both paths).
#include <cmath>
#include <cstdint>

#include "cuda/common/cuda_status.h"
#include "cuda/common/programmatic_launch.cuh"
#include "cuda/ops/act_types.cuh"
#include "cuda/ops/norm.h"

namespace kascade::cuda {
namespace {

constexpr int kThreads = 256;

// The sum of every thread's `sum` over the block (kThreads threads), returned to every thread.
// partial: [kThreads / 32] shared floats. Contains a barrier: call from every thread.
__device__ __forceinline__ float block_sum(float sum, float* partial) {
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  float v = (threadIdx.x & 31) < kThreads / 32 ? partial[threadIdx.x & 31] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename TOut>
__global__ void rmsnorm_kernel(const float* __restrict__ x, const int32_t* __restrict__ row_index, int32_t dim,
                               const float* __restrict__ weight, float eps, TOut* __restrict__ out) {
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();
  const int64_t r = blockIdx.x;
  const int64_t src = row_index != nullptr ? row_index[r] : r;
  const float* xr = x + src * dim;
  float sum = 0.0f;
  for (int32_t c = threadIdx.x; c < dim; c += kThreads) sum += xr[c] * xr[c];
  __shared__ float partial[kThreads / 32];
  const float inv = rsqrtf(block_sum(sum, partial) / static_cast<float>(dim) + eps);
  TOut* yr = out + r * dim;
  for (int32_t c = threadIdx.x; c < dim; c += kThreads) yr[c] = ops_detail::from_float<TOut>((xr[c] * inv) * weight[c]);
}

constexpr int kVecPerThread = 8;
constexpr int32_t kVecMaxDim = kThreads * 4 * kVecPerThread;  // 8192

// dim % 4 == 0, dim <= kVecMaxDim, x and weight 16-byte aligned.
template <typename TOut>
__global__ void __launch_bounds__(kThreads) rmsnorm_vec_kernel(const float* __restrict__ x,
                                                               const int32_t* __restrict__ row_index, int32_t dim,
                                                               const float* __restrict__ weight, float eps,
                                                               TOut* __restrict__ out) {
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();
  const int64_t r = blockIdx.x;
  const int64_t src = row_index != nullptr ? row_index[r] : r;
  const float4* xr = reinterpret_cast<const float4*>(x + src * dim);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  const int32_t quads = dim / 4;
  float4 xv[kVecPerThread], wv[kVecPerThread];
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int32_t c = threadIdx.x + k * kThreads;
    xv[k] = c < quads ? xr[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    wv[k] = c < quads ? w4[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) sum += xv[k].x * xv[k].x + xv[k].y * xv[k].y + xv[k].z * xv[k].z + xv[k].w * xv[k].w;
  __shared__ float partial[kThreads / 32];
  const float inv = rsqrtf(block_sum(sum, partial) / static_cast<float>(dim) + eps);
  TOut* yr = out + r * dim;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int32_t c = threadIdx.x + k * kThreads;
    if (c < quads) {
      yr[4 * c + 0] = ops_detail::from_float<TOut>((xv[k].x * inv) * wv[k].x);
      yr[4 * c + 1] = ops_detail::from_float<TOut>((xv[k].y * inv) * wv[k].y);
      yr[4 * c + 2] = ops_detail::from_float<TOut>((xv[k].z * inv) * wv[k].z);
      yr[4 * c + 3] = ops_detail::from_float<TOut>((xv[k].w * inv) * wv[k].w);
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

Status rmsnorm_rows(const float* x, const int32_t* row_index, int64_t rows, int32_t dim, const float* weight,
                    float eps, void* out, DType out_dtype, cudaStream_t stream, bool programmatic) {
  KC_CHECK_ARG(rows >= 0 && rows <= 0x7fffffff, "rmsnorm_rows: rows = ", rows, " outside [0, 2^31)");
  KC_CHECK_ARG(dim >= 1, "rmsnorm_rows: dim = ", dim, " must be >= 1");
  KC_CHECK_ARG(std::isfinite(eps) && eps >= 0.0f, "rmsnorm_rows: eps = ", eps, " must be finite and >= 0");
  if (rows == 0) return ok_status();
  KC_CHECK_ARG(x != nullptr && weight != nullptr && out != nullptr, "rmsnorm_rows: null pointer");
  return ops_detail::dispatch_act(out_dtype, "rmsnorm_rows", [&](auto tag) -> Status {
    using T = decltype(tag);
    const unsigned rows32 = static_cast<unsigned>(rows);
    if (dim % 4 == 0 && dim <= kVecMaxDim && aligned(x, 16) && aligned(weight, 16)) {
      KC_RETURN_IF_ERROR(cuda_status(detail::launch_kernel(programmatic, rmsnorm_vec_kernel<T>, dim3(rows32),
                                                           dim3(kThreads), 0, stream, x, row_index, dim, weight, eps,
                                                           static_cast<T*>(out)),
                                     "launch of rmsnorm_vec_kernel"));
    } else {
      KC_RETURN_IF_ERROR(cuda_status(detail::launch_kernel(programmatic, rmsnorm_kernel<T>, dim3(rows32),
                                                           dim3(kThreads), 0, stream, x, row_index, dim, weight, eps,
                                                           static_cast<T*>(out)),
                                     "launch of rmsnorm_kernel"));
    }
    return ok_status();
  });
}

}  // namespace kascade::cuda
