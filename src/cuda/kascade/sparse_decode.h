// src/cuda/kascade/sparse_decode.h — sparse (reuse) decode: attention of each sequence's query
// over the keys named by index rows (DESIGN.md §2.2 reuse layers, §2.4 baselines), the same
// semantics as ref::sparse_decode_ref:
//   kPerKvGroup:   KV group g (its g query heads) reads row head_map[g] (identity when null);
//   kPerQueryHead: query head h reads row h (head_map must be null).
// Rows are [B, num_rows, k_max] int32 with row_lens [B, num_rows], read on the device; softmax is
// restricted to the row; an empty row gives o = 0, lse = -inf. Long rows are split across CTAs
// (split-K, merged by the last CTA) so that B = 1 fills the GPU; whole K/V rows are gathered with
// 16-byte cp.async copies, several tiles in flight per warp. Entries outside [0, kv_len) are
// masked and flagged in the workspace's error word (read_device_errors).
// Tested by tests/cuda/test_sparse_decode.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/attention/decode_plan.h"
#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::cuda {

struct SparseDecodePlan {
  DecodeShape shape;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
  int32_t k_max = 0;  // longest row the plan is split for (rows may be shorter at run time)
  PassPlan pass;      // slots = G (per KV group) or H (per query head)
  WorkspaceLayout workspace;
};

Result<SparseDecodePlan> plan_sparse_decode(const DecodeShape& shape, IndexGranularity granularity, int32_t k_max);

// rows: device index rows (rows.k_max <= plan.k_max is not required; the split adapts, but the
// plan is tuned for plan.k_max); head_map: device [G] int32 or null.
Status sparse_decode(const SparseDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                     const AttentionParams& params, const DecodeIndexRows& rows, const int32_t* head_map,
                     const AttentionOutput& out, void* workspace, cudaStream_t stream);

namespace detail {

// The logits a layer's scoring pass stored (key-major, DecodeKernelParams::logits): given to the sparse
// pass, S is read from them and only V rows are gathered (the anchor's own sparse output).
struct StoredLogits {
  const float* logits = nullptr;  // device [B, G, stride, logits_heads_for_group(g)] fp32 σ·q·k
  int64_t stride = 0;             // keys per (sequence, KV group) block
};

// The pass behind sparse_decode and the anchors' own sparse output. With head_map null and
// per-KV-group rows, group g reads row g·num_rows/G (identity when num_rows = G, row 0 when 1).
// `stored` non-null: S from those logits (the pass must be planned with from_logits).
Status run_sparse_pass(const DecodeShape& shape, const PassPlan& pass, const QueryBatch& q, const PagedKv& kv,
                       const AttentionParams& params, const DecodeIndexRows& rows, const int32_t* head_map,
                       const AttentionOutput& out, const WorkspaceLayout& layout, void* workspace,
                       cudaStream_t stream, const StoredLogits* stored = nullptr);

// Validates the rows' host-side fields against the shape and granularity.
Status validate_index_rows(const DecodeShape& shape, const QueryBatch& q, const DecodeIndexRows& rows,
                           IndexGranularity granularity);

// Plans the split of a sparse pass over rows of up to k_max keys (from_logits: the V-only form,
// whose CTAs take less shared memory, so more fit on a multiprocessor).
Result<PassPlan> plan_sparse_pass(const DecodeShape& shape, IndexGranularity granularity, int32_t k_max,
                                  bool from_logits = false);

}  // namespace detail
}  // namespace kascade::cuda
