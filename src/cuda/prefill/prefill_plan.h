// src/cuda/prefill/prefill_plan.h — the host half of prefill's plan/run split (DESIGN.md §3): the
// shape a plan is made for (limits of the calls it serves), supports(), the anchor selection's
// waves of tiles, and the layout of the caller's workspace. A plan is made on the host once per
// batch shape; the ops (prefill_ops.h) only launch kernels — lengths, rows and head maps are read
// on the device — so a prefill call can be captured in a CUDA graph and replayed with new data of
// the same limits. The plan also fixes the kernel family (PrefillKernels below): by default the
// fastest one measured that the device and build can run, chosen per call for the causal passes.
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

// Which kernels a plan runs. Every variant computes the same attention (the tests hold each to the
// CPU reference); they differ in speed and in the devices and builds they need. Measured on the
// H200 (bf16, H = 32, G = 8, d = 128, causal, TFLOP/s at 16K / 128K keys; cuDNN SDPA 673 / 581):
// dense prefill mma 182 / 185, ws 206 / 220 contiguous but 113 / 114 with 16-key pages, ws_tma
// 616 / 496 contiguous and 613 / 501 with 128-key pages; the LSE pass on ws_tma 427 / 412.
enum class PrefillKernels {
  // The default: on an sm_90 device with a build holding sm_90a code (KASCADE_CUDA_ARCHS with
  // 90a-real), each causal pass (dense prefill, the anchor's LSE pass) and each pooled-score wave
  // runs the warp-specialised kernels with the TMA K/V producer when the call's K/V layout allows
  // TMA (contiguous, or pages of a multiple of 128 keys: ws_tensor_map.h) and the mma.sync kernels
  // otherwise; sparse prefill runs the warp-specialised kernel with gathered key lists on every
  // layout (causal_launch.h: choose_causal_kernel, choose_pool_kernel, choose_sparse_kernel);
  // elsewhere everything runs on mma.sync. Top-k has one kernel.
  kAuto,
  kMma,    // forced: every kernel on mma.sync (runs on every device the build targets)
  kWgmma,  // forced: Q·Kᵀ of every kernel on sm_90a warpgroup MMAs issued synchronously
  // forced: the causal passes and sparse prefill on the warp-specialised sm_90a mainloop
  // (ws_attention_kernel.cuh: producer warpgroup, mbarrier ring, two ping-ponging consumer
  // warpgroups on wgmma, persistent longest-first grid) with cp.async producers (sparse: K/V rows
  // gathered key by key); pooled scores and Top-k on mma.sync.
  kWarpSpecialized,
  // forced: as kWarpSpecialized, with the TMA K/V producer for the causal passes and the
  // warp-specialised pooled-score kernel wherever the call's layout allows TMA (cp.async producer /
  // mma.sync pooling for other layouts).
  kWarpSpecializedTma,
};

// "auto", "mma", "wgmma", "ws", "ws_tma" (the benchmark's --variants names).
const char* prefill_kernels_name(PrefillKernels kernels);

struct PrefillPlanOptions {
  bool selection = true;  // reserve the anchor's LSE and score scratch (select / anchor ops)
  int32_t tiles_in_flight = 0;  // tiles pooled and selected per wave; 0: as many as fit the budget below
  size_t selection_scratch_budget = size_t{256} << 20;  // bytes of score scratch when tiles_in_flight = 0
  int32_t key_splits = 0;  // CTAs per (tile, group) of the pooled-score kernel; 0: enough to fill the GPU
  // kAuto picks per call (see PrefillKernels). The forced sm_90a variants (kWgmma,
  // kWarpSpecialized, kWarpSpecializedTma) are refused (kUnsupported) off sm_90 devices and by
  // builds without sm_90a code; kAuto falls back to mma.sync there.
  PrefillKernels kernels = PrefillKernels::kAuto;
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
  // The options' kernels, resolved for the planned device and build: kAuto stays only when the
  // warp-specialised sm_90a kernels are ready there (else it becomes kMma). The kernel of each
  // causal pass is then chosen per call from this and the call's K/V layout (choose_causal_kernel
  // in causal_launch.h).
  PrefillKernels kernels = PrefillKernels::kMma;
  int32_t num_sms = 1;          // multiprocessors of the planned device (persistent grids)
  int32_t tiles_in_flight = 0;  // W
  int32_t num_waves = 0;        // ceil(most tile slots a call can have / W)
  int32_t key_splits = 1;
  int32_t pool_m_tiles = 1;     // 16-row MMA tiles per warp of the pooled-score kernel (T·g <= 128·this)
  int64_t score_stride = 0;     // floats per score row, >= max_kv_len, multiple of 4
  PrefillWorkspaceLayout workspace;

  int32_t slot_capacity() const { return num_waves * tiles_in_flight; }
  // Q·Kᵀ of the reference kernels (attention_kernel.cuh: causal fallback, sparse; pooled scores) on
  // sm_90a wgmma rather than mma.sync.
  bool uses_wgmma() const { return kernels == PrefillKernels::kWgmma; }
  // Device bytes anchor selection uses besides the caller's index rows (LSE + score scratch).
  size_t selection_scratch_bytes() const;
};

// Checks the shape, prepares the kernels on the current device (shared-memory limits), resolves
// options.kernels (kAuto keeps the warp-specialised family when the device is sm_90 and the build
// holds its sm_90a code) and lays out the workspace. Fails with kUnsupported for a shape the kernels
// are not built for or a forced variant the device or build cannot run, and with kInternal when the
// CUDA runtime fails (no device, for instance).
Result<PrefillPlan> plan_prefill(const PrefillShape& shape, const PrefillPlanOptions& options = {});

// The arithmetic of plan_prefill without the device: what plan_prefill computes once it knows the
// device's multiprocessor count, how many pooled-score CTAs fit on one and whether the
// warp-specialised kernels are ready (sm_90 device, sm_90a code; kAuto resolves to kMma without
// them). Forced variants are taken as given (plan_prefill refuses them where they cannot run).
// Needs no GPU.
Result<PrefillPlan> layout_prefill_plan(const PrefillShape& shape, const PrefillPlanOptions& options, int32_t num_sms,
                                        int32_t pool_ctas_per_sm, bool warp_specialized_ready = false);

// Zeroes the error word, asynchronously on `stream`.
Status initialize_prefill_workspace(const PrefillPlan& plan, void* workspace, cudaStream_t stream);

// Reads and clears the error word: synchronises `stream` (keep it out of captured work). Returns the
// bits set since the last read (describe_prefill_errors in prefill_errors.h names them).
Result<uint32_t> read_prefill_errors(const PrefillPlan& plan, void* workspace, cudaStream_t stream);

}  // namespace kascade::cuda
