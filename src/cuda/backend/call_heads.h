// src/cuda/backend/call_heads.h — the head layout every CUDA backend call has (dtype, H, G, d),
// the common part of the decode and prefill plan keys (decode_plan_cache.h, prefill_plan_cache.h):
// taken from a call's views, and copied into the kernels' plan shapes. Header-only.
// Tested through the plan caches and the backend (tests/cuda/test_backend_ops.cpp,
// test_backend_prefill.cpp: shape_of without a GPU, the ops on the GPU).
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/dtype.h"

namespace kascade::cuda {

struct CallHeads {
  DType dtype = DType::kF16;
  int32_t num_heads = 0;     // H
  int32_t num_kv_heads = 0;  // G
  int32_t head_dim = 0;      // d
  bool operator==(const CallHeads&) const = default;
};

// The heads of a call's views: q's dtype, H and d, and the KV cache's G.
inline CallHeads call_heads_of(const QueryBatch& q, const PagedKv& kv) {
  CallHeads heads;
  heads.dtype = q.dtype;
  heads.num_heads = q.num_heads;
  heads.num_kv_heads = kv.num_kv_heads;
  heads.head_dim = q.head_dim;
  return heads;
}

// Sets the dtype, batch and heads of a kernel plan shape (DecodeShape, PrefillShape).
template <typename Shape>
void set_plan_heads(const CallHeads& heads, int32_t batch, Shape& shape) {
  shape.dtype = heads.dtype;
  shape.batch = batch;
  shape.num_heads = heads.num_heads;
  shape.num_kv_heads = heads.num_kv_heads;
  shape.head_dim = heads.head_dim;
}

}  // namespace kascade::cuda
