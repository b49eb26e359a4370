// src/cuda/attention/dense_decode.h — dense split-KV decode over the paged KV cache (DESIGN.md §3):
// each sequence's one query attends keys 0..kv_len-1; writes o [B, H, d] in the input dtype and
// the natural-log lse [B, H]. Same semantics as ref::dense_attention_ref with q_len = 1.
//   auto plan = plan_dense_decode(shape);             // host, once per batch shape
//   cudaMalloc(&ws, plan->workspace.total_bytes);  initialize_workspace(plan->workspace, ws, s);
//   dense_decode(*plan, q, kv, params, out, ws, s);   // graph-capturable, allocates nothing
// All pointers in the views are device pointers; kv_lens is read on the device.
// Tested by tests/cuda/test_dense_decode.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/attention/decode_plan.h"
#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::cuda {

struct DenseDecodePlan {
  DecodeShape shape;
  PassPlan pass;  // slots = G
  WorkspaceLayout workspace;
};

Result<DenseDecodePlan> plan_dense_decode(const DecodeShape& shape);

// q: [B, H, d]; kv: paged cache (device); out.o: [B, H, d] (shape.dtype), out.lse: [B, H] or null.
Status dense_decode(const DenseDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                    const AttentionParams& params, const AttentionOutput& out, void* workspace,
                    cudaStream_t stream);

}  // namespace kascade::cuda
