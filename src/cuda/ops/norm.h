// src/cuda/ops/norm.h — RMSNorm on the GPU (Llama / Qwen3, DESIGN.md §3 "ops/"): the residual
// stream is fp32, the normed output is the activation dtype (bf16 / fp16), weights fp32.
//   out[r][c] = x[src(r)][c] / sqrt(mean_c(x[src(r)]²) + eps) · weight[c],  src(r) = row_index[r] or r
// The optional row_index gathers rows (the final norm of the rows whose logits are wanted).
// Sum of squares in fp32 per thread, tree-reduced in fp32; the CPU reference (ref::rmsnorm_ref)
// sums in fp64. Tested by tests/cuda/test_ops_norm.cpp against ref::rmsnorm_ref.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

// x: [*, dim] fp32 (device); row_index: [rows] int32 (device) or null; weight: [dim] fp32 (device);
// out: [rows, dim] `out_dtype` (bf16 / f16, device). rows >= 0, dim >= 1. programmatic: launch with
// programmatic dependent launch (cuda/common/programmatic_launch.cuh; sm_90+ only).
Status rmsnorm_rows(const float* x, const int32_t* row_index, int64_t rows, int32_t dim, const float* weight,
                    float eps, void* out, DType out_dtype, cudaStream_t stream, bool programmatic = false);

}  // namespace kascade::cuda
