// src/cuda/attention/decode_params.h — the argument block of the decode kernel
// (decode_kernel.cuh) and its fixed geometry, in a header the host-only planner can include.
// Tested through the kernels (tests/cuda/).
#pragma once

#include <cstdint>

namespace kascade::cuda::detail {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kTileKeys = 16;
constexpr int kMaxHeadsPerSlot = 8;  // GQA group sizes 1..8: MMA rows 0..7, rows 8..15 stay zero
constexpr int kMaxSplits = 256;

// Floats per key in the key-major logits [B, G, logits_stride, logits_heads]: the group size g rounded
// up to a power of two (1, 2, 4, 8), so one key's heads are one 4-, 8-, 16- or 32-byte block.
constexpr int logits_heads_for_group(int group_size) {
  return group_size <= 1 ? 1 : group_size <= 2 ? 2 : group_size <= 4 ? 4 : 8;
}

struct DecodeKernelParams {
  // Inputs.
  const void* q = nullptr;            // [B, H, D] T (one decode query per sequence)
  const void* k = nullptr;            // [num_pages, page_size, G, D] T
  const void* v = nullptr;            // [num_pages, page_size, G, D] T
  const int32_t* block_table = nullptr;  // [B, max_pages_per_seq]
  const int32_t* kv_lens = nullptr;   // [B]
  int32_t max_pages_per_seq = 0;
  int32_t num_pages = 0;
  int32_t log2_page_size = 0;
  int32_t num_heads = 0;              // H
  int32_t num_kv_heads = 0;           // G
  int32_t group_size = 0;             // g = H / G
  int32_t max_seq_len = 0;            // kv_len above this is an error (flagged, clamped)
  float scale = 0.0f;                 // σ
  // Index rows (kIndexed).
  const int32_t* indices = nullptr;   // [B, num_rows, k_max]
  const int32_t* row_lens = nullptr;  // [B, num_rows]
  const int32_t* head_map = nullptr;  // [G] or null: group g reads row g·num_rows/G
  int32_t num_rows = 0;
  int32_t k_max = 0;
  int32_t per_query_head = 0;         // 1: slot = query head h, row h
  // Work split.
  int32_t num_splits = 1;             // S
  int32_t num_slots = 0;              // G, or H with per_query_head
  // Outputs.
  void* o = nullptr;                  // [B, H, D] T (kPV)
  float* lse = nullptr;               // [B, H] natural-log LSE, or null
  float* lse2 = nullptr;              // [B, H] second copy (the anchor's exact dense LSE), or null
  float* logits = nullptr;            // [B, G, logits_stride, logits_heads] σ·q·k, key-major per KV group:
                                      // head h at [b, h / g, key, h % g] (written by kLogits,
                                      // read by kStoredLogits and the pooling)
  int64_t logits_stride = 0;          // keys per (sequence, KV group) block, >= max_seq_len
  int32_t logits_heads = 0;           // logits_heads_for_group(g) (set by make_decode_params)
  float* partial_o = nullptr;         // [B, S, H, D]
  float* partial_lse = nullptr;       // [B, S, H]
  int32_t* counters = nullptr;        // [B, num_slots], zero between launches
  uint32_t* error_flags = nullptr;    // one word, DeviceError bits
};

}  // namespace kascade::cuda::detail
