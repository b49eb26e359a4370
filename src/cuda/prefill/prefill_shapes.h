// src/cuda/prefill/prefill_shapes.h — host-side arithmetic the prefill plan and ops share: the
// element type of a DType, how many tiles one sequence's call can touch, how many tile slots a whole
// call can have (the bound the anchor's waves must cover), and the attention grids (block grids of
// the reference kernels, persistent grids of the warp-specialised ones).
// Header-only; tested by tests/cuda/test_prefill_plan.cpp (bounds against brute force).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "cuda/prefill/prefill_params.h"
#include "kascade/dtype.h"

namespace kascade::cuda::prefill {

inline ElementType element_type(DType dtype) {
  return dtype == DType::kBF16 ? ElementType::kBF16 : ElementType::kF16;
}

// Most tiles of `tile_size` that q_len consecutive positions can touch (at an unaligned start):
// floor((q_len + T - 2) / T) + 1, 0 for q_len 0.
inline int64_t max_tiles_per_sequence(int64_t q_len, int64_t tile_size) {
  return q_len <= 0 ? 0 : (q_len + tile_size - 2) / tile_size + 1;
}

// Most tile slots of a call of `batch` sequences, at most max_q_len and max_total_q queries in all.
inline int64_t max_call_slots(int64_t batch, int64_t max_total_q, int64_t max_q_len, int64_t tile_size) {
  const int64_t per_sequence = batch * max_tiles_per_sequence(max_q_len, tile_size);
  const int64_t by_total = (max_total_q + batch * (2 * tile_size - 2)) / tile_size;
  return std::min(per_sequence, by_total);
}

// Dense / LSE attention: x = row blocks of 128 (query, head) rows, y = KV groups, z = sequences.
inline dim3 dense_grid(int64_t max_q_len, int32_t group_size, int32_t num_kv_heads, int32_t batch) {
  const int64_t blocks = (max_q_len * group_size + kBlockRows - 1) / kBlockRows;
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(num_kv_heads), static_cast<unsigned>(batch));
}

// Warp-specialised dense / LSE kernels: row blocks of 128 (query, head) rows per (KV group,
// sequence), and the persistent grid: one CTA per multiprocessor, never more than the units.
inline int64_t dense_row_blocks(int64_t max_q_len, int32_t group_size) {
  return (max_q_len * group_size + kWsBlockRows - 1) / kWsBlockRows;
}
inline int ws_grid_ctas(int64_t units, int32_t num_sms) {
  return static_cast<int>(std::clamp<int64_t>(units, 1, std::max<int32_t>(num_sms, 1)));
}

}  // namespace kascade::cuda::prefill
