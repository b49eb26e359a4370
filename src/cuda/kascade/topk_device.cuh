// src/cuda/kascade/topk_device.cuh — device helpers both decode Top-k kernels share (the chunked
// radix select, radix_topk_kernels.cu, and the one-CTA-per-row select, row_topk_kernel.cu): the
// row of a CTA with its length and k checked, and the choice of a radix digit from a shared
// histogram (the block scan is device_primitives.cuh's). Blocks of kTopkThreads threads. Device-only; tested through both kernels
// (tests/cuda/test_radix_topk.cpp, test_anchor_decode.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_errors.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda::detail {

// The row of (blockIdx.y, blockIdx.z): its length n and selection size k, clamped as the error
// bits say (reported by the caller that passes report = true, once per row).
struct TopkRow {
  int64_t index = 0;  // b·R + r
  int n = 0;
  int k = 0;
  const float* scores = nullptr;
};

__device__ __forceinline__ TopkRow topk_row(const TopkParams& p, bool report) {
  TopkRow row;
  const int r = blockIdx.y, b = blockIdx.z;
  row.index = static_cast<int64_t>(b) * p.num_rows + r;
  row.scores = p.scores + row.index * p.stride;
  int n = p.kv_lens[b];
  if (n < 0 || n > p.max_seq_len) {
    if (report) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorKvLen));
    n = n < 0 ? 0 : p.max_seq_len;
  }
  int k = p.k_per_seq ? p.k_per_seq[b] : static_cast<int>(budget_k_device(n, p.rho_ppm, p.k_min, p.k_round));
  if (k < 0 || k > n) {
    if (report) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
    k = k < 0 ? 0 : n;
  }
  if (k > p.k_max) {
    if (report) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
    k = p.k_max;
  }
  row.n = n;
  row.k = k;
  return row;
}

// The digit of the k_rem-th largest key (1 <= k_rem <= the histogram's total) in a shared
// histogram of `bins` bins (<= kTopkBins, a power of two), and how many keys lie in the bins above
// it. Thread t sums kTopkBins / kTopkThreads consecutive bins from the top, one block scan orders
// them. scratch: [kTopkThreads / 32 + 1] shared ints; chosen: [2] shared ints. Contains barriers:
// call from every thread.
struct DigitChoice {
  int digit = 0;
  int above = 0;
};
__device__ __forceinline__ DigitChoice choose_digit(const int* hist, int bins, int k_rem, int* scratch, int* chosen) {
  constexpr int kBinsPerThread = kTopkBins / kTopkThreads;
  static_assert(kBinsPerThread >= 1 && kTopkThreads / 32 <= 32, "Top-k block shape");
  const int hi = bins - 1 - kBinsPerThread * static_cast<int>(threadIdx.x);
  int counts[kBinsPerThread];
  int mine = 0;
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    counts[j] = hi - j >= 0 ? hist[hi - j] : 0;
    mine += counts[j];
  }
  int total = 0;
  int running = block_exclusive_scan<kTopkThreads>(mine, scratch, total);
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    if (hi - j >= 0 && running < k_rem && running + counts[j] >= k_rem) {
      chosen[0] = hi - j;
      chosen[1] = running;
    }
    running += counts[j];
  }
  __syncthreads();
  const DigitChoice choice{chosen[0], chosen[1]};
  __syncthreads();  // chosen may be written again by the next call
  return choice;
}

}  // namespace kascade::cuda::detail
