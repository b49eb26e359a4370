// src/cuda/kascade/radix_topk_kernels.cu — exact Top-k of k(n) out of n scores per (sequence,
// row) on the GPU, with no sort and no host round trip (KERNELS.md "Top-k"). One CTA of 1024
// threads per row:
//   1. three histogram passes over the order-preserving uint32 image of the scores (digits of
//      11, 11 and 10 bits, most significant first; each pass counts only the elements that match
//      the digits chosen so far; counts of a thread's frequent bin stay in a register
//      (BinCache) because skewed rows crowd into one bin), each followed by a block scan that picks the digit holding the k-th
//      largest — after the third pass the k-th largest key T is known exactly, with `take_eq` =
//      how many of the elements equal to T belong to the Top-k. The first pass's histogram may come
//      from the pooling kernel (anchor decode), which saves one read of the row;
//   2. one compaction pass in index order: an element is selected when its key is > T, or == T
//      and it is among the first take_eq such elements; its output slot is the number of
//      selected elements before it (a block scan of per-thread counts), so the row comes out in
//      ascending index order and ties go to the lower index — exactly ref::topk_select_ref.
// The histogram passes keep four 16-byte loads per thread in flight; the compaction prefetches
// its next chunk before the block scan of the current one.
// Rows are −1-padded to k_max and row_lens gets k. Tested by tests/cuda/test_radix_topk.cpp
// (exact equality with ref::topk_select_ref, ties included) and test_anchor_decode.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_errors.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda::detail {
namespace {

constexpr int kTopkThreads = 1024;
constexpr int kTopkWarps = kTopkThreads / 32;
constexpr int kVecPerThread = 4;                        // float4 loads per thread per iteration
constexpr int kCompactVecs = 2;                         // float4 per thread per compaction chunk
constexpr int kCompactItems = 4 * kCompactVecs;         // consecutive elements per thread per chunk
constexpr int kCompactChunk = kTopkThreads * kCompactItems;

// Exclusive prefix sum of `value` over the block (in thread order); `total` gets the block sum.
// scratch: [kTopkWarps + 1] shared ints. Contains barriers: call from every thread.
__device__ __forceinline__ int block_exclusive_scan(int value, int* scratch, int& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += y;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const int w = scratch[lane];  // kTopkWarps == 32
    int w_inclusive = w;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w_inclusive, offset);
      if (lane >= offset) w_inclusive += y;
    }
    scratch[lane] = w_inclusive - w;
    if (lane == 31) scratch[kTopkWarps] = w_inclusive;
  }
  __syncthreads();
  const int result = scratch[warp] + inclusive - value;
  total = scratch[kTopkWarps];
  __syncthreads();
  return result;
}

// Loads the kCompactItems elements of thread `tid` in the chunk at `base` (keys; 0 past n).
__device__ __forceinline__ void load_chunk(const float* scores, int n, int base, uint32_t (&keys)[kCompactItems]) {
  const int i0 = base + threadIdx.x * kCompactItems;
  if (i0 + kCompactItems <= n) {
#pragma unroll
    for (int u = 0; u < kCompactVecs; ++u) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(scores + i0) + u);
      keys[4 * u + 0] = float_order_key(v.x);
      keys[4 * u + 1] = float_order_key(v.y);
      keys[4 * u + 2] = float_order_key(v.z);
      keys[4 * u + 3] = float_order_key(v.w);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) keys[e] = i0 + e < n ? float_order_key(__ldcg(scores + i0 + e)) : 0u;
  }
}

__global__ void __launch_bounds__(kTopkThreads) radix_topk_kernel(const TopkParams p) {
  __shared__ int hist[kTopkBins];
  __shared__ int scratch[kTopkWarps + 1];
  __shared__ int selected_digit, selected_above;
  static_assert(kTopkWarps == 32, "block_exclusive_scan assumes 32 warps");

  const int r = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
  int n = p.kv_lens[b];
  if (n < 0 || n > p.max_seq_len) {
    if (tid == 0) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorKvLen));
    n = n < 0 ? 0 : p.max_seq_len;
  }
  const int64_t row = static_cast<int64_t>(b) * p.num_rows + r;
  const float* scores = p.scores + row * p.stride;
  int32_t* out = p.indices + row * p.k_max;
  int32_t* first_hist = p.first_histograms ? p.first_histograms + row * kTopkBins : nullptr;
  int k = p.k_per_seq ? p.k_per_seq[b] : static_cast<int>(budget_k_device(n, p.rho_ppm, p.k_min, p.k_round));
  if (k < 0 || k > n) {
    if (tid == 0) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
    k = k < 0 ? 0 : n;
  }
  if (k > p.k_max) {
    if (tid == 0) atomicOr(p.error_flags, static_cast<uint32_t>(kErrorRowLen));
    k = p.k_max;
  }
  if (tid == 0) p.row_lens[row] = k;
  for (int i = k + tid; i < p.k_max; i += kTopkThreads) out[i] = -1;
  if (k == 0 || k >= n) {  // no key, or every key (k == n), is selected; the given histogram is only cleared
    for (int i = tid; i < k; i += kTopkThreads) out[i] = i;
    if (first_hist)
      for (int i = tid; i < kTopkBins; i += kTopkThreads) first_hist[i] = 0;
    return;
  }

  // ---- radix select of the k-th largest key
  const int n4 = n / 4;
  const float4* scores4 = reinterpret_cast<const float4*>(scores);
  uint32_t prefix = 0, prefix_mask = 0;
  int k_rem = k;
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? kTopkFirstShift : (pass == 1 ? 10 : 0);
    const int bins = pass == 2 ? 1024 : kTopkBins;
    if (pass == 0 && first_hist) {
      for (int i = tid; i < kTopkBins; i += kTopkThreads) {
        hist[i] = first_hist[i];
        first_hist[i] = 0;  // ready for the next run
      }
    } else {
      for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0;
      __syncthreads();
      auto bin_of = [&](float x) -> int {
        const uint32_t key = float_order_key(x);
        return (key & prefix_mask) == prefix ? static_cast<int>((key >> shift) & (bins - 1)) : -1;
      };
      BinCache cache;
      auto count = [&](int bin) { cache.add(hist, bin); };
      for (int base = 0; base < n4; base += kTopkThreads * kVecPerThread) {  // block-uniform trip count
        float4 x[kVecPerThread];
#pragma unroll
        for (int u = 0; u < kVecPerThread; ++u) {
          const int v = base + u * kTopkThreads + tid;
          x[u] = v < n4 ? __ldcg(scores4 + v) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < kVecPerThread; ++u) {
          const bool ok = base + u * kTopkThreads + tid < n4;
          count(ok ? bin_of(x[u].x) : -1);
          count(ok ? bin_of(x[u].y) : -1);
          count(ok ? bin_of(x[u].z) : -1);
          count(ok ? bin_of(x[u].w) : -1);
        }
      }
      if (tid < 32) {  // the n % 4 tail, one warp
        const int i = n4 * 4 + tid;
        count(i < n ? bin_of(__ldcg(scores + i)) : -1);
      }
      cache.flush(hist);
    }
    __syncthreads();
    // Bins in descending order; thread t owns bins hi = bins-1-2t and hi-1.
    const int hi = bins - 1 - 2 * tid;
    const int c_hi = hi >= 1 ? hist[hi] : 0;
    const int c_lo = hi >= 1 ? hist[hi - 1] : 0;
    int total = 0;
    const int above = block_exclusive_scan(c_hi + c_lo, scratch, total);
    if (hi >= 1) {
      if (above < k_rem && above + c_hi >= k_rem) {
        selected_digit = hi;
        selected_above = above;
      } else if (above + c_hi < k_rem && above + c_hi + c_lo >= k_rem) {
        selected_digit = hi - 1;
        selected_above = above + c_hi;
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(selected_digit) << shift;
    prefix_mask |= static_cast<uint32_t>(bins - 1) << shift;
    k_rem -= selected_above;
    __syncthreads();
  }
  const uint32_t threshold = prefix;
  const int take_eq = k_rem;        // elements equal to the threshold that are selected
  const int take_gt = k - take_eq;  // elements above it (all selected)

  // ---- compaction in index order, the next chunk's loads in flight during this chunk's scan
  int run_gt = 0, run_eq = 0;
  uint32_t keys[kCompactItems], next[kCompactItems];
  load_chunk(scores, n, 0, next);
  for (int base = 0; base < n; base += kCompactChunk) {
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) keys[e] = next[e];
    if (base + kCompactChunk < n) load_chunk(scores, n, base + kCompactChunk, next);
    const int i0 = base + tid * kCompactItems;
    int count_gt = 0, count_eq = 0;
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) {
      if (i0 + e < n) {
        count_gt += keys[e] > threshold;
        count_eq += keys[e] == threshold;
      }
    }
    int total = 0;
    const int before = block_exclusive_scan((count_gt << 16) | count_eq, scratch, total);
    int gt_before = run_gt + (before >> 16), eq_before = run_eq + (before & 0xffff);
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) {
      if (i0 + e < n) {
        if (keys[e] > threshold) {
          out[gt_before + min(eq_before, take_eq)] = i0 + e;
          ++gt_before;
        } else if (keys[e] == threshold) {
          if (eq_before < take_eq) out[gt_before + eq_before] = i0 + e;
          ++eq_before;
        }
      }
    }
    run_gt += total >> 16;
    run_eq += total & 0xffff;
    if (run_gt >= take_gt && run_eq >= take_eq) break;  // block-uniform
  }
}

}  // namespace

cudaError_t launch_radix_topk(const TopkParams& params, int batch, cudaStream_t stream) {
  if (batch < 1 || params.num_rows < 1 || params.stride % 4 != 0 || params.k_max < 1) return cudaErrorInvalidValue;
  const dim3 grid(params.num_rows, batch);
  radix_topk_kernel<<<grid, kTopkThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace kascade::cuda::detail
