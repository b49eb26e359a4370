// src/cuda/backend/decode_plan_cache.h — the CUDA backend's decode plans, made once per call
// shape (DecodeKey) and op variant for the key's batch bucket and the backend's max_seq_len, each
// with its own workspace (allocated and initialised when the plan is made). Lookups after the first
// allocate nothing. error_words() lists the error word of every workspace (the backend reads them).
// Batch buckets: a plan made for max_batch splits the KV sequence for max_batch sequences; a call
// of fewer sequences would then leave most SMs idle (measured: a runtime made for batch 8 decoded
// one 128K sequence at half the speed of one made for batch 1, docs/perf.md "GPU runtime round 3").
// So each call gets the plan of decode_plan_batch(q.batch): the next power of two, at most
// max_batch — at most log2(max_batch) + 1 plans per shape.
// Tested through the backend (tests/cuda/test_backend_ops.cpp, test_backend_policies.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cuda/attention/dense_decode.h"
#include "cuda/backend/call_heads.h"
#include "cuda/kascade/anchor_decode.h"
#include "cuda/kascade/sparse_decode.h"
#include "kascade/backend.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade::cuda {

// The batch a decode call of `batch` sequences is planned for: the smallest power of two >= batch,
// capped at max_batch (1 <= batch <= max_batch).
inline int32_t decode_plan_batch(int32_t batch, int32_t max_batch) {
  int32_t planned = 1;
  while (planned < batch) planned *= 2;
  return planned < max_batch ? planned : max_batch;
}

// The static shape of a decode call, from its views: the heads, the KV cache page size and the
// batch bucket (decode_plan_batch) the plans are made for.
struct DecodeKey : CallHeads {
  int32_t page_size = 0;   // KV cache page size
  int32_t plan_batch = 0;  // decode_plan_batch(q.batch, max_batch)
  bool operator==(const DecodeKey&) const = default;
};

class DecodePlanCache {
 public:
  // programmatic: every decode-kernel pass of the plans launches with programmatic dependent launch
  // (PassPlan::programmatic; CudaBackendOptions::programmatic_launch).
  DecodePlanCache(int32_t max_seq_len, const Budget& budget, cudaStream_t stream, bool programmatic = false);

  struct Dense {
    DenseDecodePlan plan;
    BackendBuffer workspace;  // [plan.workspace.total_bytes]
  };
  struct Sparse {
    SparseDecodePlan plan;
    BackendBuffer workspace;
  };
  struct Anchor {
    AnchorDecodePlan plan;
    BackendBuffer workspace;
  };

  Result<const Dense*> dense(const DecodeKey& key);
  // Split for rows of up to k(max_seq_len) keys of the backend's budget (rows may be longer).
  Result<const Sparse*> sparse(const DecodeKey& key, IndexGranularity granularity);
  // Rows of k(max_seq_len) keys by default; runs pass explicit sizes (AnchorRunExtras::k_per_seq).
  Result<const Anchor*> anchor(const DecodeKey& key, const ScorePooling& pooling, bool dense_output);

  // The shape a key's plans are made for.
  DecodeShape shape_of(const DecodeKey& key) const;
  // Appends the device address of every workspace's error word (uint32 DeviceError bits) to
  // *words: the backend copies and clears them all with one synchronisation.
  void error_words(std::vector<uint32_t*>* words) const;
  int64_t allocations() const { return allocations_; }

 private:
  template <typename Entry>
  struct Keyed {
    DecodeKey key;
    int32_t variant = 0;  // granularity / pooling / output, packed
    std::unique_ptr<Entry> entry;
  };
  Result<BackendBuffer> make_workspace(const WorkspaceLayout& layout, const char* what);

  int32_t max_seq_len_;
  Budget budget_;
  cudaStream_t stream_;
  bool programmatic_;
  int64_t allocations_ = 0;
  std::vector<Keyed<Dense>> dense_;
  std::vector<Keyed<Sparse>> sparse_;
  std::vector<Keyed<Anchor>> anchor_;
  std::vector<std::pair<void*, WorkspaceLayout>> workspaces_;  // every workspace, for error_words
};

}  // namespace kascade::cuda
