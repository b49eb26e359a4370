// src/cuda/backend/cuda_backend.h — the CUDA implementation of kascade::AttentionBackend
// (include/kascade/backend.h), decode and prefill:
//   memory      cudaMalloc-backed BackendBuffers, host <-> device copies on the backend's stream;
//   dense       one query per sequence (total_q == batch): split-KV decode + in-kernel merge
//               (cuda/attention/dense_decode.h); otherwise causal varlen prefill over the paged
//               cache, chunked (the queries are the last q_len positions of each kv_len)
//               (cuda/prefill/prefill_ops.h dense_prefill);
//   select_decode / anchor_decode   exact LSE, pooled post-softmax scores (sum per KV group, sum
//               or max over all heads, or per query head) and the radix Top-k on the GPU
//               (cuda/kascade/anchor_decode.h); the anchor op is fused: layer-0 dense + select
//               and select + sparse output run as one pipeline without a host round trip;
//   sparse_decode   the gather kernel over index rows through the head map
//               (cuda/kascade/sparse_decode.h), per KV group or per query head;
//   select_prefill / sparse_prefill / anchor_prefill   the prefill kernels of cuda/prefill/
//               prefill_ops.h: an LSE pass (or the dense kernel's LSE for a dense-output anchor),
//               pooled scores and the exact Top-k per tile in waves, and sparse attention over
//               the compact rows ∪ local keys; anchor_prefill runs them as one pipeline;
//   select_quest_decode   per-page channel min/max and page scores in fp64 on the GPU, whole
//               pages taken in score order on the GPU (quest_select.h);
//   select_lessismore_decode   per-head scores and per-head Top-m on the GPU, the rank-by-rank
//               merge on the host over the downloaded rankings (lessismore_select.h);
//   select_prefill_oracle   every query a decode step of select_decode over its own i + 1 keys
//               (per query head), max_batch queries a call, rows copied into their CSR place
//               (oracle_prefill_select.h): never the full score matrix; slow, an accuracy baseline.
// supports() says for every op whether the kernels it runs on are built for the shape (head dim
// 64 / 128, GQA group 1..8). Per-call limits that the
// shape does not fix are refused per call with a Status naming the value: selection rows whose
// tile_size × group exceeds 256, page sizes the decode kernels do not take, dtype f32.
//
// Plans: decode plans are made on first use of each (dtype, heads, head dim, KV page size, op
// variant) for the declared max_batch and max_seq_len, each with its workspace
// (decode_plan_cache.h). Prefill plans are made on first use of each (dtype, heads, head dim,
// total_q rounded up to a power of two, selection and tile size) for max_batch and max_seq_len and
// share one workspace that grows only when a larger plan needs it (prefill_plan_cache.h). After
// that the ops allocate nothing (internal_allocations() stays constant). The selection ops of
// decode upload the host k_per_seq array into a preallocated device buffer (pageable
// cudaMemcpyAsync), which a graph cannot capture: inside a graph pass (below) the sizes are staged
// instead and copied before each launch.
// CUDA graphs: begin_graph_pass(kCapture) declares that the ops which follow are being captured
// into a graph on the backend's stream (one decode step): the graph-safe ops (dense decode,
// sparse_decode, select_decode, anchor_decode) record their arguments (graph_pass.h OpTrace) and
// launch as usual, except that k_per_seq is staged on the host instead of copied inside the graph;
// upload_graph_inputs() copies the staged sizes into the device buffer the captured ops read and
// must run before every launch of the graph. begin_graph_pass(kCheck) is a host-only pass: the
// ops record their arguments and stage the sizes but launch nothing; end_graph_pass() then says
// whether the step's trace equals the captured one (the graph replays it). Inside a pass every
// other op (prefill, the Quest / LessIsMore selections, allocate, copies, check_device_errors)
// refuses with Unsupported naming it: those are not graph-safe.
// Device-side bad data (a kv_len above max_seq_len, an index outside its sequence, a page id
// outside the cache, cu_q_lens or tile_base inconsistent with the call) sets bits in the kernels'
// error words: copy_to_host (which waits for the stream anyway) and check_device_errors() turn
// them into a Status naming them; check_errors_every_op does it after every op (synchronising).
// Tested by tests/cuda/test_backend_policies.cpp (every policy through make_policy, decode, CPU
// backend vs CUDA backend), tests/cuda/test_backend_prefill.cpp (every policy that prefills on
// CUDA: chunked prefill then decode steps, CPU backend vs CUDA backend) and
// tests/cuda/test_backend_ops.cpp (ops, refusals, errors, allocation counts); the graph passes by
// tests/cuda/test_gpu_runtime_graph.cpp (trace rules without a GPU, graph vs eager decode on one).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "cuda/backend/graph_pass.h"
#include "kascade/backend.h"
#include "kascade/backends.h"  // CudaBackendOptions, make_cuda_backend
#include "kascade/budget.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade {


// The options' stream as the CUDA type (kascade/backends.h keeps it opaque).
inline cudaStream_t options_stream(const CudaBackendOptions& options) {
  return static_cast<cudaStream_t>(options.stream);
}

// Checks device >= 0, 1 <= max_batch <= 65535, 1 <= max_seq_len <= 2^30, a valid budget. No GPU needed.
Status validate_cuda_backend_options(const CudaBackendOptions& options);

// What CudaBackend::supports() answers, without a device: OK when the kernels the op runs on are
// built for the shape (dense: both the decode and the prefill kernels; the *_decode ops: the decode
// kernels; select_prefill / sparse_prefill: the prefill kernels — head_dim 64/128, GQA group size
// 1..8; the prefill oracle runs on the decode kernels), kUnsupported naming the value otherwise.
Status cuda_backend_supports(BackendOp op, const AttentionShape& shape);
// OK for f16 and bf16; kUnsupported naming the dtype otherwise (the kernels take no f32). No GPU needed.
Status cuda_backend_supports_dtype(DType dtype);

class CudaBackend final : public AttentionBackend {
 public:
  // Selects options.device and allocates the k_per_seq upload buffer; fails without a device.
  static Result<std::shared_ptr<CudaBackend>> create(const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
  Status supports(BackendOp op, const AttentionShape& shape) const override;

  Result<BackendBuffer> allocate(size_t bytes) override;
  Status copy_from_host(void* dst, const void* src, size_t bytes) override;
  // Waits for the stream, copies, then reports any device error bits set since the last check.
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
  Status anchor_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                       const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows,
                       AnchorOutput output, const int32_t* head_map, const AttentionOutput& out) override;
  Status anchor_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        const ScorePooling& pooling, const PrefillIndexRows& rows, AnchorOutput output,
                        const int32_t* head_map, const AttentionOutput& out) override;

  const CudaBackendOptions& options() const;
  // Waits for the stream, reads and clears every error word of the backend's kernels; a Status
  // naming the bits (kv_len out of range, index entry out of range, ...) when any was set. One
  // synchronisation: enqueue_error_check(), cudaStreamSynchronize, finish_error_check().
  Status check_device_errors();
  // The same in two halves, for a caller that waits for the stream anyway (the CUDA session after
  // a forward call): enqueue_error_check(slot) queues the copies of every error word into the
  // slot's pinned host memory and their clearing, without waiting; finish_error_check(slot), once
  // the caller has waited for the stream past that point, reports the bits. Slots 0 and 1 are the
  // callers' (a pipelined caller has two calls' checks pending); check_device_errors uses the last,
  // so it may run while they are pending. Each enqueue is followed by its finish.
  static constexpr int kErrorCheckSlots = 3;
  Status enqueue_error_check(int slot = 0);
  Status finish_error_check(int slot = 0);
  // Device allocations the backend made for its own plans, workspaces and scratch (not those of
  // allocate()). Constant once every op variant in use has run once.
  int64_t internal_allocations() const;

  // ---- CUDA graph passes (see the header comment) ----
  // Starts a pass; refused inside another pass and with check_errors_every_op (it synchronises).
  Status begin_graph_pass(cuda::GraphPass pass);
  // Ends the pass. kCapture: keeps the trace as the captured one, returns true. kCheck: true when
  // a capture pass ended before and the pass's trace equals its trace. Either way the backend is
  // eager again.
  Result<bool> end_graph_pass();
  // Ends a pass that failed (the trace is dropped, the captured one kept).
  void abort_graph_pass();
  // Copies the sizes staged by the last pass into the device buffer the captured selections read
  // (pageable cudaMemcpyAsync on the stream, outside any capture). Nothing to copy: no-op.
  Status upload_graph_inputs();

 private:
  struct State;
  explicit CudaBackend(std::unique_ptr<State> state);
  Status finish_op(Status status);
  std::unique_ptr<State> state_;
};

}  // namespace kascade
