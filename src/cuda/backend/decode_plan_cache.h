// src/cuda/backend/decode_plan_cache.h — the CUDA backend's decode plans, made once per call
// shape (DecodeKey) and op variant for the backend's max_batch and max_seq_len, each with its own
// workspace (allocated and initialised when the plan is made). Lookups after the first allocate
// nothing. read_errors() reads and clears the error word of every workspace.
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

// The static shape of a decode call, from its views: the heads and the KV cache page size.
struct DecodeKey : CallHeads {
  int32_t page_size = 0;  // KV cache page size
  bool operator==(const DecodeKey&) const = default;
};

class DecodePlanCache {
 public:
  DecodePlanCache(int32_t max_batch, int32_t max_seq_len, const Budget& budget, cudaStream_t stream);

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
  // Reads and clears the error words of every workspace (synchronises the stream); the DeviceError
  // bits set since the last read, OR-ed over the workspaces.
  Result<uint32_t> read_errors();
  int64_t allocations() const { return allocations_; }

 private:
  template <typename Entry>
  struct Keyed {
    DecodeKey key;
    int32_t variant = 0;  // granularity / pooling / output, packed
    std::unique_ptr<Entry> entry;
  };
  Result<BackendBuffer> make_workspace(const WorkspaceLayout& layout, const char* what);

  int32_t max_batch_;
  int32_t max_seq_len_;
  Budget budget_;
  cudaStream_t stream_;
  int64_t allocations_ = 0;
  std::vector<Keyed<Dense>> dense_;
  std::vector<Keyed<Sparse>> sparse_;
  std::vector<Keyed<Anchor>> anchor_;
  std::vector<std::pair<void*, WorkspaceLayout>> workspaces_;  // every workspace, for read_errors
};

}  // namespace kascade::cuda
