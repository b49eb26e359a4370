// src/cuda/prefill/prefill_ops.h — the CUDA prefill ops (issue 6), with the semantics of the CPU
// references and the views of include/kascade/attention.h, all pointers in device memory:
//   dense_prefill   — ref::dense_attention_ref: causal GQA attention of the call's queries over the
//                     paged cache (varlen batch; chunked prefill: queries are the last q_len
//                     positions of each kv_len); o in the input dtype, natural-log lse in fp32.
//   sparse_prefill  — ref::sparse_prefill_ref: per (tile, row consumer), softmax restricted to the
//                     row's keys ∪ the tile's local keys s_t..i (include_local), KV group g reading
//                     row head_map[g] (identity when null), or per-query-head rows.
//   select_prefill  — policy::cpu_select_prefill: for every (tile, pooled row), the pooled
//                     post-softmax scores of candidates j < s_t over the call's queries of the tile
//                     (ref::pooled_scores_prefill_tile_ref, sum or max over the row's heads), then
//                     the exact Top-k at the row's planned length k_t (ref::topk_select_ref, ties to
//                     the lower index), written into the compact rows in ascending order.
//                     An LSE pass first, then waves of plan.tiles_in_flight tiles: pool, select.
//   anchor_prefill  — select_prefill, then the layer's own output: dense (layer 0: the dense
//                     kernel also provides the LSE the pooling needs) or sparse over the fresh rows.
// Kernels (plan.kernels, prefill_plan.h): by default (kAuto) the causal passes — dense_prefill, the
// LSE pass of select / anchor and the layer-0 anchor's dense output — run the warp-specialised
// sm_90a mainloop with TMA K/V loads when the device is sm_90, the build holds sm_90a code and the
// call's K/V is contiguous or paged in multiples of 128 keys (16-byte aligned bases), and the
// mma.sync kernel otherwise (choose_causal_kernel, causal_launch.h); pooled scores, Top-k and sparse
// prefill run on mma.sync. The forced variants (kMma, kWgmma, kWarpSpecialized, kWarpSpecializedTma)
// run what they name on every call.
// Run-time rules: the views must match the plan's shape (dtype, heads, head dim; batch, total_q,
// q_len, kv_len within its limits); q, K, V and o 16-byte aligned. Host-side fields are checked
// here (Status naming the field); device data (lengths, page ids, rows, head maps) is checked by
// the kernels, which set bits in the workspace's error word (read_prefill_errors) and skip the bad
// unit. No allocation, no host synchronisation: graph-capturable.
// Tested by tests/cuda/test_prefill_dense.cpp, test_prefill_sparse.cpp, test_prefill_select.cpp,
// test_prefill_anchor.cpp and test_prefill_plan.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/prefill/prefill_plan.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// out.o: [total_q, H, d] (plan dtype); out.lse: [total_q, H] or null.
Status dense_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const AttentionOutput& out, void* workspace, cudaStream_t stream);

// rows: device CSR rows of the call (rows.batch == q.batch); head_map: device [G] or null.
Status sparse_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out,
                      void* workspace, cudaStream_t stream);

// rows: per KV group, include_local, tile_size == plan tile size, num_rows == pooling.num_rows,
// which must divide G; offsets planned (ref::plan_prefill_rows); fills rows.indices.
Status select_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const ScorePooling& pooling, const PrefillIndexRows& rows, void* workspace, cudaStream_t stream);

// select_prefill, then out = dense attention (kDense) or sparse attention over the fresh rows read
// through head_map (kSparse).
Status anchor_prefill(const PrefillPlan& plan, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                      const ScorePooling& pooling, const PrefillIndexRows& rows, AnchorOutput output,
                      const int32_t* head_map, const AttentionOutput& out, void* workspace, cudaStream_t stream);

}  // namespace kascade::cuda
