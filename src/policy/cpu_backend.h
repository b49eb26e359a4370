// src/policy/cpu_backend.h — the CPU implementation of AttentionBackend (kascade/backend.h):
// host memory (64-byte aligned allocations, memcpy copies), attention through the src/ref
// reference ops, score-based selection in cpu_select.h, Quest / LessIsMore selection in
// cpu_baselines.h. It supports every op, the prefill oracle included.
// Tested by tests/unit/policy/test_cpu_backend.cpp.
#pragma once

#include <memory>

#include "kascade/backend.h"

namespace kascade {

class CpuBackend final : public AttentionBackend {
 public:
  const char* name() const override { return "cpu"; }
  Status supports(BackendOp op, const AttentionShape& shape) const override;

  Result<BackendBuffer> allocate(size_t bytes) override;
  Status copy_from_host(void* dst, const void* src, size_t bytes) override;
  Status copy_to_host(void* dst, const void* src, size_t bytes) override;

  Status dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
               const AttentionOutput& out) override;
  Status sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                       const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) override;
  Status sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) override;

  Status select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                       const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows) override;
  Status select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        const ScorePooling& pooling, const PrefillIndexRows& rows) override;
  Status select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const PrefillIndexRows& rows) override;
  Status select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size, const int32_t* k_per_seq,
                             const DecodeIndexRows& rows) override;
  Status select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const int32_t* k_per_seq, int32_t num_sinks, const DecodeIndexRows& rows) override;
};

std::shared_ptr<AttentionBackend> make_cpu_backend();

}  // namespace kascade
