// src/policy/cpu_backend.h — the CPU implementation of AttentionBackend (kascade/backend.h):
// host memory (64-byte aligned allocations, memcpy copies). Attention (dense, sparse decode, sparse
// prefill) and score-based selection (select_decode, select_prefill) run on the fast, blocked,
// multithreaded kernels of cpu_fast_attention.h / cpu_fast_select.h by default; CpuBackendOptions
// (kascade/backends.h, beside the factory make_cpu_backend) selects the reference kernels instead
// (src/ref and cpu_select.h's reference loops), the oracle every fast kernel is tested against. The prefill oracle (cpu_select.h) and Quest / LessIsMore
// (cpu_baselines.h) always run the reference code. It supports every op.
// Tested by tests/unit/policy/test_cpu_backend.cpp and test_cpu_fast_kernels.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "kascade/backend.h"
#include "kascade/backends.h"  // CpuKernels, CpuBackendOptions, make_cpu_backend

namespace kascade {

class CpuBackend final : public AttentionBackend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {}) : options_(options) {}
  const CpuBackendOptions& options() const { return options_; }
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

 private:
  bool fast() const { return options_.kernels == CpuKernels::kFast; }
  CpuBackendOptions options_;
};

}  // namespace kascade
