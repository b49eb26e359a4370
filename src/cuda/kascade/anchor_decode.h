// src/cuda/kascade/anchor_decode.h — anchor-layer decode (DESIGN.md §2.2, §2.4): exact per-head
// LSE over all keys, post-softmax scores pooled into R rows, the exact Top-k(k(n)) of each row on
// the GPU, and the layer's output. One call runs, all on `stream`, without host round trips:
//   1. the decode kernel in scoring mode: reads K (and V when the output is dense), writes the
//      logits σ·q·k per head and the exact LSE (split-KV merged on the device);
//   2. pooling: S_r[j] = sum (or max) over the heads of row r of exp(logit − lse), also counting
//      the first radix digit of each score into a per-row histogram (workspace header);
//   3. radix Top-k of each row (starting from that histogram) → −1-padded int32 rows
//      [B, R, k_max] with row lengths (2 and 3 fused into one kernel with PoolFusion::kFused);
//   4. for a sparse output, the sparse decode pass over the anchor's own rows, with S taken from the
//      stored logits, so it gathers V rows only (plus one logits block of 4·g bytes per key).
// Pooling rows R: G with a sum (kascade), 1 with a sum (kascade-pooled) or a max (omnikv), H with
// either (per query head: oracle). Output: dense (layer 0, omnikv filter layers) or sparse over
// the own rows (any other anchor; KV group g reads row g·R/G, or per query head when R = H > G).
// Memory: the workspace holds the logits [B, G, max_seq_len, g'] (key-major per KV group, g' = g
// rounded up to a power of two) and pooled scores [B, R, max_seq_len] in fp32 (O(n) per head, never O(n²)).
// Tested by tests/cuda/test_anchor_decode.cpp (against ref::pooled_scores_decode_ref,
// ref::topk_select_ref, ref::dense_attention_ref and ref::sparse_decode_ref).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention/decode_plan.h"
#include "cuda/kascade/radix_topk.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade::cuda {

// Steps 2 and 3 as two kernels (kSeparate: the pooling writes the pooled rows, the Top-k reads them
// back) or as one (kFused: the row Top-k pools each slice of a row from the logits into shared
// memory and selects from there — same pooled scores, same rows; rows of up to
// detail::kRowTopkMaxKeys keys in clusters of up to 8 CTAs, or kFusedPoolMaxSliceKeys without
// clusters). kSeparate is the default: the fused kernel gives the same bits but measured 1–4 % slower
// (docs/perf.md "Decode round 12 measured").
enum class PoolFusion { kSeparate, kFused };

struct AnchorOptions {
  ScorePooling pooling;       // R = pooling.num_rows divides H (G, 1 or H for the policies)
  Budget budget;              // k(n) per sequence, unless the run passes k_per_seq
  bool dense_output = false;  // true: dense o (layer 0); false: sparse o over the selected rows
  TopkAlgorithm topk_algorithm = TopkAlgorithm::kAuto;  // which Top-k kernels (radix_topk.h); kFused
                                                        // needs the row kernel (kAuto or kByRows)
  int32_t topk_row_cluster = 0;  // the row kernel's CTAs per row: 0 the plan's, or 1, 2, 4, 8 (benchmarks)
  PoolFusion pool_fusion = PoolFusion::kSeparate;
};

struct AnchorDecodePlan {
  DecodeShape shape;
  AnchorOptions options;
  int32_t k_max = 0;                 // k(max_seq_len): width the output rows need
  int64_t logits_stride = 0;         // keys per (sequence, KV group) block of the logits and per pooled row
                                     // (>= max_seq_len, % 4 == 0)
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;  // of the output rows
  PassPlan scoring;                  // the full-length pass
  PassPlan sparse;                   // the sparse output pass (when !dense_output)
  detail::TopkPlan topk;             // the Top-k's chunking of the pooled rows (PoolFusion::kFused: by
                                     // rows, the fused cluster in topk.row_cluster)
  WorkspaceLayout workspace;
};

Result<AnchorDecodePlan> plan_anchor_decode(const DecodeShape& shape, const AnchorOptions& options);

// Optional arguments of a run (all device pointers).
struct AnchorRunExtras {
  const int32_t* k_per_seq = nullptr;  // [B] selection sizes (0 <= k <= kv_len, <= plan.k_max);
                                       // null: k(kv_len) from the plan's budget, on the device
  const int32_t* head_map = nullptr;   // [G] rows the sparse output reads (null: g·R/G)
  float* exact_lse = nullptr;          // [B, H] LSE over all keys (sparse output only; a dense
                                       // output's out.lse already is that LSE)
  bool write_pooled_scores = false;    // fused pooling: also write the pooled scores to the workspace
                                       // (anchor_pooled_scores); the separate kernels always do
};

// rows: device output rows (num_rows = R, plan.granularity; k_max >= plan.k_max when
// extras.k_per_seq is null, otherwise >= every k_per_seq[b], a larger k being flagged as
// kErrorRowLen and clamped on the device); out: o and lse of the layer (dense or sparse per the plan).
Status anchor_decode(const AnchorDecodePlan& plan, const QueryBatch& q, const PagedKv& kv,
                     const AttentionParams& params, const DecodeIndexRows& rows, const AttentionOutput& out,
                     const AnchorRunExtras& extras, void* workspace, cudaStream_t stream);

// The pooled scores of the last run inside the workspace: device [B, R, plan.logits_stride] fp32,
// valid for j < kv_len[b] — with the fused pooling only after a run with write_pooled_scores. For
// tests, LessIsMore and diagnostics.
const float* anchor_pooled_scores(const AnchorDecodePlan& plan, const void* workspace);

// The scoring pass's logits of the last run inside the workspace: device [B, G, plan.logits_stride,
// logits_heads_for_group(H / G)] fp32, key-major (σ·q·k of head h = g·(H/G) + i of key j at
// [b, g, j, i]; padding heads 0), valid for j < kv_len[b]. For tests and diagnostics.
const float* anchor_logits(const AnchorDecodePlan& plan, const void* workspace);

}  // namespace kascade::cuda
