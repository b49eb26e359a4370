// src/cuda/backend/oracle_prefill_select.h — the prefill oracle for the CUDA backend, with the
// semantics of AttentionBackend::select_prefill_oracle (kascade/backend.h) and the CPU backend:
// per query head h and query i, the top-k_i keys of its own post-softmax scores over j <= i.
// Composed from the decode selection: query i of a prefill call is a decode step of a sequence of
// i + 1 keys (its own sequence's block table), so select_decode with per-query-head pooling
// (R = H, as the decode oracle) selects exactly its rows; queries go max_batch at a time and each
// query's H rows are copied into their CSR place. The planned row lengths come to the host
// (stream synchronised); not graph-safe — an accuracy baseline (DESIGN.md §3), one selection per
// query, not a tuned kernel.
// Tested by tests/cuda/test_backend_prefill.cpp (rows against the CPU backend's, tie-aware; the
// oracle policy's prefill against the CPU backend's) and, without a GPU, plan_oracle_queries by
// tests/cuda/test_backend_ops.cpp (CudaBackendSupport.OracleQueriesArePlannedAndChecked).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/backend/device_memory.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// One query of a prefill call, in packed order: its sequence, absolute position, CSR tile slot and
// the number of keys every one of its head rows holds.
struct OracleQuery {
  int32_t sequence = 0;
  int32_t position = 0;
  int64_t slot = 0;
  int32_t k = 0;
};

// The queries of a prefill call from host copies of its views — cu_q_lens [B + 1], kv_lens [B],
// tile_base [B + 1], row_offsets [tile_base[B] · H + 1] — checked: one tile slot per query, every head
// of a query with the same row length k, 0 <= k <= position + 1. InvalidArgument naming the query
// otherwise. Host only (tested without a GPU).
Result<std::vector<OracleQuery>> plan_oracle_queries(const std::vector<int32_t>& cu_q_lens,
                                                     const std::vector<int32_t>& kv_lens,
                                                     const std::vector<int32_t>& tile_base,
                                                     const std::vector<int64_t>& row_offsets, int32_t num_heads);

class OraclePrefillSelector {
 public:
  // q, kv: device views of a prefill call that passed check_prefill_call; rows: device CSR rows with
  // tile_size 1, !include_local, kPerQueryHead, num_rows == H, offsets planned (every head of query i
  // holds the same k_i <= i + 1 keys). `select` runs select_decode (the backend itself, eagerly);
  // max_batch: the most sequences one of its calls may take. Fills rows.indices.
  Status run(AttentionBackend& select, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
             const PrefillIndexRows& rows, int32_t max_batch, int64_t* allocations, cudaStream_t stream);

 private:
  // One chunk's device inputs, packed as int32: cu_q_lens [C + 1], kv_lens [C], block table [C, P],
  // then its decode rows [C, H, k_max] and row lengths [C, H].
  GrowingDeviceBuffer chunk_;
  std::vector<int32_t> cu_q_lens_, kv_lens_, tile_base_, block_table_;  // host copies of the call's views
  std::vector<int64_t> row_offsets_;                                    // [num_slots * H + 1]
  std::vector<int32_t> chunk_host_, k_per_query_;  // [C + 1 + C + C·P] staging; [total_q] k of each query
  // The sequence of each slot of the current chunk, and of the chunk whose cu_q_lens and block table
  // the device holds (uploaded again only when they differ: one prompt's chunks share them).
  std::vector<int32_t> chunk_sequences_, table_sequences_;
};

}  // namespace kascade::cuda
