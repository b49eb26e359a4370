// src/cuda/backend/prefill_plan_cache.h — the CUDA backend's prefill plans (cuda/prefill/
// prefill_plan.h), made on first use of each call shape and kept, and the one workspace they share.
//
// The host knows a prefill call's dtype, heads, head dim, batch and total_q, not its per-sequence
// lengths (cu_q_lens and kv_lens live on the device). A plan is therefore made for limits that
// cover every call of its key: batch = the backend's max_batch, max_kv_len = max_seq_len,
// max_total_q = total_q rounded up to a power of two (planned_total_q; at least 16, at most
// max_batch · max_seq_len), max_q_len = min(that, max_seq_len) (a sequence's q_len is at most both).
// Rounding keeps the number of plans logarithmic in the chunk sizes a run uses; the kernels read
// the true lengths on the device.
//
// Workspace: one device allocation shared by every plan (the ops run one at a time on the backend's
// stream), grown only when a plan needs more than it holds. All plans must keep their error word at
// the same offset (the layout puts it first; a plan that does not is refused as an internal error).
// Growing reads the old workspace's error word first (a synchronising call, made only when a new,
// larger plan appears), so no error bit is lost; read_errors() returns those bits with the current
// word's.
// Tested without a GPU by tests/cuda/test_backend_ops.cpp (planned_total_q, shape_of), and through
// the backend by test_backend_ops.cpp and test_backend_prefill.cpp (allocation counts, errors).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/backend/call_heads.h"
#include "cuda/prefill/prefill_plan.h"
#include "kascade/backend.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

// What the host knows of a prefill call (the heads and total_q), plus what the op needs from the plan.
struct PrefillKey : CallHeads {
  int64_t total_q = 0;       // queries of the call (cu_q_lens[batch])
  bool selection = false;    // select_prefill / anchor_prefill: LSE and score scratch
  int32_t tile_size = 1;     // the rows' tile size (selection plans); 1 otherwise
};

// total_q rounded up to a power of two, at least 16, capped at max_batch · max_seq_len and at the
// kernels' int32 row limit (INT32_MAX / num_heads), and never below total_q.
int32_t planned_total_q(int64_t total_q, int32_t num_heads, int32_t max_batch, int32_t max_seq_len);

class PrefillPlanCache {
 public:
  PrefillPlanCache(int32_t max_batch, int32_t max_seq_len, cudaStream_t stream);

  // The limits a key's plan is made for (see the header comment). Needs no GPU.
  PrefillShape shape_of(const PrefillKey& key) const;

  struct Planned {
    const PrefillPlan* plan = nullptr;
    void* workspace = nullptr;  // device [>= plan->workspace.total_bytes], error word zeroed when made
  };
  // The plan of `key` (plan_prefill on the current device the first time) and the workspace.
  Result<Planned> plan(const PrefillKey& key);

  // The device address of the workspace's error word (PrefillError / DeviceError bits; null before
  // any plan), which the backend copies and clears, and the bits read when the workspace grew
  // (returned once, then 0).
  uint32_t* error_word() const;
  uint32_t take_carried_errors();
  // Device allocations made (workspaces).
  int64_t allocations() const { return allocations_; }
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  Status grow_workspace(const PrefillPlan& plan);

  int32_t max_batch_;
  int32_t max_seq_len_;
  cudaStream_t stream_;
  int64_t allocations_ = 0;
  uint32_t carried_errors_ = 0;  // bits read from a workspace that was replaced
  std::vector<std::unique_ptr<PrefillPlan>> plans_;
  BackendBuffer workspace_;
};

}  // namespace kascade::cuda
