// src/cuda/backend/lessismore_select.h — LessIsMore decode selection for the CUDA backend, with
// the semantics of AttentionBackend::select_lessismore_decode (kascade/backend.h) and the CPU
// backend (policy/cpu_baselines.h): one row per sequence = sinks ∪ the most recent ceil(k/4) keys,
// then every head's keys ranked by p_h (descending, ties: lower index) merged rank by rank across
// heads, skipping keys already present, until k − ceil(k/4) new keys were added.
// Split: the GPU computes p_h for every head (the anchor pipeline with one pooling row per head)
// and each head's Top-m (m = to_merge + present keys, exactly as the CPU bounds it); the host
// downloads those m keys and their scores per head, sorts them into rankings and merges — the
// merge is sequential by definition and exists for accuracy studies (DESIGN.md §3). Synchronises
// the stream (kv_lens and the rankings come to the host); not graph-safe.
// Tested by tests/cuda/test_backend_ops.cpp and test_backend_policies.cpp (rows against the CPU
// backend's, tie-aware).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/backend/decode_plan_cache.h"
#include "cuda/backend/device_memory.h"
#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::cuda {

class LessIsMoreSelector {
 public:
  // q, kv: device views that passed check_decode_call (key); k_per_seq: host [batch];
  // k_device: device [max_batch] upload buffer the selector may overwrite; rows: device, one row
  // per sequence. Writes rows.indices (ascending, −1 padded) and rows.row_lens.
  Status run(DecodePlanCache& plans, const DecodeKey& key, const QueryBatch& q, const PagedKv& kv,
             const AttentionParams& params, const int32_t* k_per_seq, int32_t num_sinks,
             const DecodeIndexRows& rows, int32_t* k_device, int32_t max_batch, int32_t max_seq_len,
             int64_t* allocations, cudaStream_t stream);

 private:
  GrowingDeviceBuffer top_indices_;  // [max_batch, H, max_seq_len] int32: each head's Top-m
  GrowingDeviceBuffer top_lens_;     // [max_batch, H] int32
  GrowingDeviceBuffer top_scores_;   // [max_batch, H, max_seq_len] fp32: p_h of those keys
  GrowingDeviceBuffer scratch_o_;    // [max_batch, H, d]: the anchor pipeline's (unused) dense output
  std::vector<int32_t> kv_lens_, m_, host_indices_, host_lens_, row_indices_, row_lens_;
  std::vector<float> host_scores_;
};

}  // namespace kascade::cuda
