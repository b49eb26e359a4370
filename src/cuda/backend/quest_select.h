// src/cuda/backend/quest_select.h — Quest decode selection on the GPU, with the semantics of
// AttentionBackend::select_quest_decode (kascade/backend.h) and the CPU backend
// (policy/cpu_baselines.h): pages of `page_size` keys, per-channel min/max of each page's valid
// keys, page score Σ_d max(q_d·min_d, q_d·max_d) per query head in fp64 (bit-identical to the CPU),
// pages in descending score (ties: lower page) taken whole until they hold >= k keys; rows per
// query head in ascending key order, −1 padded. Two kernels (baseline_kernels.h), no host round
// trip; the scratch (page scores and flags, [max_batch, H, ceil(max_seq_len / page_size)]) grows
// on first use only.
// Tested by tests/cuda/test_backend_ops.cpp (rows equal the CPU backend's) and
// test_backend_policies.cpp (the quest policy).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/backend/decode_plan_cache.h"
#include "cuda/backend/device_memory.h"
#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::cuda {

class QuestSelector {
 public:
  // q, kv: device views that passed check_decode_call (key); k_device: device [batch] budgets;
  // rows: device, per query head, num_rows == H. error_flags: device uint32 (DeviceError bits).
  Status run(const DecodeKey& key, const QueryBatch& q, const PagedKv& kv, int32_t page_size,
             const int32_t* k_device, const DecodeIndexRows& rows, int32_t max_batch, int32_t max_seq_len,
             uint32_t* error_flags, int64_t* allocations, cudaStream_t stream);

 private:
  GrowingDeviceBuffer scores_;  // [max_batch, H, pages] fp64
  GrowingDeviceBuffer taken_;   // [max_batch, H, pages] uint8
};

}  // namespace kascade::cuda
