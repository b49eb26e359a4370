// src/cuda/attention/decode_plan.h — the host half of the decode plan/run split (DESIGN.md §3):
// the shape a plan is made for, supports(), how each pass of the decode kernel is split across
// CTAs, and the layout of the caller's workspace. Plans are made on the host once per batch shape
// for a declared max_seq_len; runs (dense_decode, sparse_decode, anchor_decode) only launch
// kernels, allocate nothing and never wait for the device, so a decode step can be captured in a
// CUDA graph and replayed while lengths and indices in device memory change.
// Tested by tests/cuda/test_decode_plan.cpp (refusals need no GPU) and every op test.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/attention/decode_params.h"
#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

struct DecodeShape {
  DType dtype = DType::kF16;  // q, K, V and o: kF16 or kBF16
  int32_t batch = 0;          // B: most sequences a run may carry
  int32_t num_heads = 0;      // H
  int32_t num_kv_heads = 0;   // G; g = H / G in 1..8
  int32_t head_dim = 0;       // d: 64 or 128
  int32_t page_size = 0;      // keys per page: a power of two >= 16 (contiguous K/V: one page)
  int32_t max_seq_len = 0;    // longest kv_len any run may see (fixes splits, k_max, workspace)
};

// OK when the decode kernels are built for `shape`; otherwise a Status naming the value
// ("head_dim is 96; the decode kernels are built for 64 and 128").
Status supports_decode(const DecodeShape& shape);

// One launch of the decode kernel: CTAs per (sequence, slot) and the longest key list planned.
struct PassPlan {
  int32_t num_slots = 0;   // G (per KV group) or H (per query head)
  int32_t num_splits = 1;  // S; each run cuts a list of length L into chunks of ceil(L/S) keys
  int32_t max_len = 0;     // longest key list (max_seq_len, or k_max for index rows)
  bool from_logits = false;  // sparse pass: S from the stored logits, V rows only (kSparseFromLogits)
  bool programmatic = false;  // launch with programmatic dependent launch (sm_90+; cuda/common/programmatic_launch.cuh):
                              // the pass may start while the stream's previous kernel runs (set by the caller)
};

// Byte offsets into the caller's workspace (one device allocation of total_bytes, 256-aligned
// regions). The header — error word and split-merge counters — must be zero before the first
// run: initialize_workspace() does that once; the kernels leave it zero after every run.
struct WorkspaceLayout {
  size_t error_flags = 0;  // uint32, DeviceError bits (cuda/common/device_errors.h)
  size_t counters = 0;     // int32 [B, H]
  size_t topk_scratch = 0;  // anchor: the Top-k's scratch (detail::TopkScratch, radix_topk.h), zeroed with the header
  size_t header_bytes = 0;
  size_t partial_lse = 0;  // f32 [B, S, H]
  size_t partial_o = 0;    // f32 [B, S, H, d]
  size_t exact_lse = 0;    // f32 [B, H] (anchor: LSE over all keys)
  size_t logits = 0;       // f32 [B, G, logits_stride, logits_heads_for_group(g)] (anchor: σ·q·k, key-major)
  size_t pooled = 0;       // f32 [B, R, logits_stride] (anchor: pooled post-softmax scores)
  size_t total_bytes = 0;
};

// Zeroes the workspace header (error word and counters), asynchronously on `stream`.
Status initialize_workspace(const WorkspaceLayout& layout, void* workspace, cudaStream_t stream);

// Reads and clears the error word: synchronises `stream` (keep it out of captured steps).
// Returns the DeviceError bits set since the last read.
Result<uint32_t> read_device_errors(const WorkspaceLayout& layout, void* workspace, cudaStream_t stream);

namespace detail {

// Checks the run-time views against the plan's shape (host-side fields only; device memory is
// never read): dtypes, head counts, head dim, page size, batch <= planned, non-null pointers,
// block-table width covering max_seq_len.
Status validate_decode_run(const DecodeShape& shape, const QueryBatch& q, const PagedKv& kv,
                           const AttentionOutput& out, bool needs_o);

// Splits for `pairs` = batch·slots key lists of up to max_len keys when `ctas_per_sm` CTAs fit on
// each multiprocessor of the current device: the fewest splits that fill whole waves of CTAs.
Result<int32_t> choose_num_splits(int64_t pairs, int32_t ctas_per_sm, int32_t max_len);

// Lays out the workspace: header, partials for max_splits, optional anchor buffers (logits_stride
// > 0: exact LSE, logits, pooled scores of pooled_rows rows and topk_scratch_bytes of Top-k scratch
// in the header).
WorkspaceLayout layout_workspace(const DecodeShape& shape, int32_t max_splits, int64_t logits_stride,
                                 int32_t pooled_rows, size_t topk_scratch_bytes = 0);

// Kernel arguments shared by every mode: views, scale, the pass's split and the workspace
// pointers (partials, counters, error word). Mode-specific fields stay at their defaults.
DecodeKernelParams make_decode_params(const DecodeShape& shape, const QueryBatch& q, const PagedKv& kv,
                                      const AttentionParams& params, const PassPlan& pass,
                                      const WorkspaceLayout& layout, void* workspace);

// log2 of a power of two.
int32_t log2_exact(int64_t power_of_two);

}  // namespace detail
}  // namespace kascade::cuda
