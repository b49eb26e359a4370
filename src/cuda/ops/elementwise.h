// src/cuda/ops/elementwise.h — the element-wise ops of the CUDA forward pass:
//   silu_mul          SwiGLU over the fused gate/up projection: gate_up [T, 2I] (gate columns
//                     [0, I), up columns [I, 2I)), out[t][i] = silu(gate) · up, fp32 arithmetic,
//                     rounded once to the activation dtype (ref::silu_mul_ref).
//   embedding_gather  out[t][:] = table[tokens[t]][:] widened to fp32 (the residual stream);
//                     a token outside [0, vocab) writes a zero row and sets bit 1 of *error
//                     (ref::embedding_gather_ref refuses it on the host).
// Tested by tests/cuda/test_ops_elementwise.cpp against the src/ref ops.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

// gate_up: [tokens, 2 · inter] dtype; out: [tokens, inter] dtype (must not alias gate_up).
// programmatic: programmatic dependent launch (cuda/common/programmatic_launch.cuh; sm_90+ only).
Status silu_mul(const void* gate_up, int64_t tokens, int64_t inter, void* out, DType dtype, cudaStream_t stream,
                bool programmatic = false);

// table: [vocab, hidden] dtype; tokens: [n] int32; out: [n, hidden] fp32; error: one uint32 (device)
// or null.
Status embedding_gather(const void* table, DType dtype, int64_t vocab, int32_t hidden, const int32_t* tokens,
                        int64_t n, float* out, uint32_t* error, cudaStream_t stream);

}  // namespace kascade::cuda
