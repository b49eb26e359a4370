// src/cuda/prefill/prefill_plan.h — the host half of prefill's plan/run split (DESIGN.md §3): the
// shape a plan is made for (limits of the calls it serves), supports(), the anchor selection's
// waves of tiles, and the layout of the caller's workspace. A plan is made on the host once per
// batch shape; the ops (prefill_ops.h) only launch kernels — lengths, rows and head maps are read
// on the device — so a prefill call can be captured in a CUDA graph and replayed with new data of
// the same limits.
//
// Memory of anchor selection: the LSE of the call's queries ([max_total_q, H] fp32) plus the score
// scratch of one wave, tiles_in_flight × G × n fp32 (the tiles of a wave are pooled and selected
// before the next wave starts), plus the caller's compact index rows. Never the O(n²/T) matrix.
// Tested by tests/cuda/test_prefill_plan.cpp (refusals need no GPU) and every op test.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::cuda {

struct PrefillShape {
  DType dtype = DType::kF16;  // q, K, V and o: kF16 or kBF16
  int32_t batch = 0;          // most sequences one call may carry
  int32_t num_heads = 0;      // H
  int32_t num_kv_heads = 0;   // G; g = H / G in 1..8
  int32_t head_dim = 0;       // d: 64 or 128
  int32_t max_total_q = 0;    // most queries of one call (cu_q_lens[batch])
  int32_t max_q_len = 0;      // most queries of one sequence in one call
  int32_t max_kv_len = 0;     // longest kv_len of a call (the block table must cover it)
  int32_t tile_size = 32;     // T of the rows anchor selection writes; T·g <= 256
};

struct PrefillPlanOptions {
  bool selection = true;  // reserve the anchor's LSE and score scratch (select / anchor ops)
  int32_t tiles_in_flight = 0;  // tiles pooled and selected per wave; 0: as many as fit the budget below
  size_t selection_scratch_budget = size_t{256} << 20;  // bytes of score scratch when tiles_in_flight = 0
  int32_t key_splits = 0;  // CTAs per (tile, group) of the pooled-score kernel; 0: enough to fill the GPU
  // Q·Kᵀ of every kernel on sm_90a warpgroup MMAs (wgmma) instead of mma.sync. Needs an sm_90 device
  // and a build with 90a-real; refused (kUnsupported) otherwise. Off by default until measured.
  bool wgmma = false;
  // Dense prefill and the anchor's LSE pass on the warp-specialised sm_90a mainloop
  // (ws_attention_kernel.cuh: producer warpgroup, mbarrier ring, two ping-ponging consumer
  // warpgroups on wgmma, persistent longest-first grid). Needs an sm_90 device and a build with
  // 90a-real; refused (kUnsupported) otherwise. Off by default until measured on the GPU; the other
  // kernels (pooled scores, Top-k, sparse) keep the path `wgmma` selects.
  bool warp_specialized = false;
  // With warp_specialized: the producer loads K/V tiles by TMA (cp.async.bulk.tensor, tensor maps
  // encoded per call) whenever the call's layout allows it (contiguous K/V, or pages of a multiple
  // of 128 keys: ws_tensor_map.h), keeping cp.async for other page sizes and for each unit's last,
  // partial tile. Ignored without warp_specialized. Off by default until measured on the GPU.
  bool ws_tma = false;
};

// OK when the prefill kernels are built for `shape`; otherwise a Status naming the value
// ("head_dim is 96; the prefill kernels are built for 64 and 128"). Needs no GPU.
Status supports_prefill(const PrefillShape& shape);

// Byte offsets into the caller's workspace (one device allocation of total_bytes, regions
// 256-byte aligned). The error word must be zero before the first run
// (initialize_prefill_workspace); the kernels only ever set bits in it.
struct PrefillWorkspaceLayout {
  size_t error_flags = 0;  // uint32: DeviceError | PrefillError bits
  size_t lse = 0;          // f32 [max_total_q, H] (selection only)
  size_t scores = 0;       // f32 [tiles_in_flight, G, score_stride] (selection only)
  size_t total_bytes = 0;
};

struct PrefillPlan {
  PrefillShape shape;
  bool selection = false;
  bool wgmma = false;           // Q·Kᵀ on wgmma (sm_90a)
  bool warp_specialized = false;  // dense + LSE on the warp-specialised sm_90a mainloop
  bool ws_tma = false;            // warp_specialized with the TMA K/V producer where the layout allows
  int32_t num_sms = 1;          // multiprocessors of the planned device (persistent grids)
  int32_t tiles_in_flight = 0;  // W
  int32_t num_waves = 0;        // ceil(most tile slots a call can have / W)
  int32_t key_splits = 1;
  int32_t pool_m_tiles = 1;     // 16-row MMA tiles per warp of the pooled-score kernel (T·g <= 128·this)
  int64_t score_stride = 0;     // floats per score row, >= max_kv_len, multiple of 4
  PrefillWorkspaceLayout workspace;

  int32_t slot_capacity() const { return num_waves * tiles_in_flight; }
  // Device bytes anchor selection uses besides the caller's index rows (LSE + score scratch).
  size_t selection_scratch_bytes() const;
};

// Checks the shape, prepares the kernels on the current device (shared-memory limits) and lays out
// the workspace. Fails with kUnsupported for a shape the kernels are not built for and with
// kInternal when the CUDA runtime fails (no device, for instance).
Result<PrefillPlan> plan_prefill(const PrefillShape& shape, const PrefillPlanOptions& options = {});

// The arithmetic of plan_prefill without the device: what plan_prefill computes once it knows the
// device's multiprocessor count and how many pooled-score CTAs fit on one. Needs no GPU.
Result<PrefillPlan> layout_prefill_plan(const PrefillShape& shape, const PrefillPlanOptions& options, int32_t num_sms,
                                        int32_t pool_ctas_per_sm);

// Zeroes the error word, asynchronously on `stream`.
Status initialize_prefill_workspace(const PrefillPlan& plan, void* workspace, cudaStream_t stream);

// Reads and clears the error word: synchronises `stream` (keep it out of captured work). Returns the
// bits set since the last read (describe_prefill_errors in prefill_errors.h names them).
Result<uint32_t> read_prefill_errors(const PrefillPlan& plan, void* workspace, cudaStream_t stream);

}  // namespace kascade::cuda
