// src/cuda/ops/small_m_linear.h — y[m, n] (+)= x[m, k] · w[n, k]ᵀ for the few rows of a decode
// step (m <= kSmallMLinearMaxRows), the same contract as CublasContext::linear (gemm.h): 16-bit x
// and w (bf16 or fp16), fp32 accumulation, y in the input dtype or fp32, `accumulate` adds into y.
// Decode linear layers read every weight once for a handful of rows, so their time is the weight
// stream; cuBLAS reached 61–68 % of the read roof on the qkv / o_proj shapes at batch 4 and added a
// split-K reduce launch for o_proj / down_proj (docs/perf.md, GPU runtime round 7). This kernel
// streams w once with 16-byte loads, several in flight per thread, and does the arithmetic on the
// tensor cores (mma.sync m16n8k16: 16 weight rows × the m ≤ 8 rows of x, k split over the warps of a
// block and summed in shared memory in a fixed order, so results do not depend on timing).
// Used by the CUDA forward pass when RuntimeOptions::small_m_linear is set.
// Tested by tests/cuda/test_ops_gemm.cpp against an fp64 product of the same rounded inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

constexpr int64_t kSmallMLinearMaxRows = 8;

// Whether small_m_linear takes this call: 1 <= m <= kSmallMLinearMaxRows, n >= 1, k >= 8 and a multiple
// of 8 (whole 16-byte pieces of every row), x and w 16-byte aligned, n and k < 2^31, in_dtype bf16 / f16,
// out_dtype in_dtype or f32. Host arithmetic only.
bool small_m_linear_supports(const void* x, const void* w, int64_t m, int64_t n, int64_t k, DType in_dtype,
                             DType out_dtype);

// x: device [m, k], w: device [n, k], y: device [m, n] (row-major, row stride n), all on `stream`.
// programmatic: programmatic dependent launch (sm_90+; cuda/common/programmatic_launch.cuh) — the
// kernel may start while the stream's previous kernel runs, prefetching its weights into L2 until that
// kernel has finished. Refuses (kInvalidArgument naming the value) what small_m_linear_supports refuses.
Status small_m_linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                      DType out_dtype, bool accumulate, cudaStream_t stream, bool programmatic = false);

}  // namespace kascade::cuda
