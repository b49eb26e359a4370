// src/cuda/kascade/radix_topk_kernels.cu — exact Top-k of k(n) out of n scores per (sequence,
// row) on the GPU, with no sort and no host round trip (KERNELS.md "Top-k"). Each row is cut into
// chunks of p.chunk scores, one CTA per chunk, so a few long rows (decode at small batch) still
// spread over the whole GPU; the chunking comes from the plan (radix_topk.cpp), the number of active
// chunks from the length read on the device. Five launches:
//   1-3. one per radix digit of the order-preserving uint32 image of the scores (11, 11 and 10 bits,
//        most significant first): each chunk CTA counts the elements of its chunk that match the
//        digits chosen so far into a shared histogram (a thread's frequent bin counted in a register,
//        BinCache: skewed rows crowd into one bin) and adds it to the row's global histogram; the
//        last CTA of the row to finish (an atomic ticket) scans the histogram, picks the digit that
//        holds the k-th largest key, stores (prefix, mask, k_rem) in the row state and zeroes the
//        histogram and the ticket for the next run. The first digit's histogram may come from the
//        pooling kernel (anchor decode): then launch 1 is one CTA per row that only selects. After
//        launch 3 the k-th largest key T is known exactly and `take_eq` = k_rem = how many of the
//        elements equal to T belong to the Top-k;
//   4.   (more than one chunk per row only) each chunk counts its elements > T and == T;
//   5.   each chunk compacts its selected elements in index order: an element is selected when its
//        key is > T, or == T and it is among the first take_eq such elements of the row; its output
//        slot is the number of selected elements before it (the counts of the earlier chunks, then
//        a block scan of per-thread counts), so the row comes out in ascending index order with ties
//        to the lower index — exactly ref::topk_select_ref.
// Rows are −1-padded to k_max and row_lens gets k. Tested by tests/cuda/test_radix_topk.cpp
// (exact equality with ref::topk_select_ref, ties included, one and many chunks per row) and
// test_anchor_decode.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_errors.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/selection_kernels.h"
#include "cuda/kascade/topk_device.cuh"

namespace kascade::cuda::detail {
namespace {

constexpr int kThreads = kTopkThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kVecPerThread = kTopkChunkQuantum / (4 * kThreads);  // float4 loads in flight per thread
constexpr int kCompactVecs = 2;                  // float4 per thread per compaction step
constexpr int kCompactItems = 4 * kCompactVecs;  // consecutive elements per thread per step
constexpr int kCompactStep = kThreads * kCompactItems;
static_assert(kVecPerThread >= 1, "Top-k block shape");

__device__ __forceinline__ int digit_shift(int pass) { return pass == 0 ? kTopkFirstShift : (pass == 1 ? 10 : 0); }
__device__ __forceinline__ int digit_bins(int pass) { return pass == 2 ? 1024 : kTopkBins; }

// Launches 1-3: the histogram of digit `pass` over one chunk, and the digit's selection by the
// row's last chunk CTA (or by the only CTA when the pooling kernel counted the first digit).
__global__ void __launch_bounds__(kThreads) topk_digit_kernel(const TopkParams p, int pass) {
  __shared__ int hist[kTopkBins];
  __shared__ int scratch[kWarps + 1];
  __shared__ int is_last, chosen[2];
  const int tid = threadIdx.x;
  const TopkRow row = topk_row(p, false);
  int* global_hist = p.scratch.histograms + row.index * kTopkBins;
  uint32_t* state = p.scratch.state + row.index * kTopkStateWords;
  const bool counted = pass == 0 && p.first_digit_counted;
  if (row.k == 0 || row.k >= row.n) {  // nothing to select; a histogram the pooling filled is cleared
    if (counted)
      for (int i = tid; i < kTopkBins; i += kThreads) global_hist[i] = 0;
    return;
  }
  const int shift = digit_shift(pass), bins = digit_bins(pass);
  const uint32_t prefix = pass == 0 ? 0u : state[0];
  const uint32_t prefix_mask = pass == 0 ? 0u : state[1];
  const int k_rem = pass == 0 ? row.k : static_cast<int>(state[2]);

  if (!counted) {
    const int begin = blockIdx.x * p.chunk;
    if (begin >= row.n) return;  // past this row's length: not one of its active chunks
    const int end = min(row.n, begin + p.chunk);
    const int active = ceil_div_device(row.n, p.chunk);
    for (int i = tid; i < bins; i += kThreads) hist[i] = 0;
    __syncthreads();
    auto bin_of = [&](float x) -> int {
      const uint32_t key = float_order_key(x);
      return (key & prefix_mask) == prefix ? static_cast<int>((key >> shift) & (bins - 1)) : -1;
    };
    BinCache cache;
    const float4* scores4 = reinterpret_cast<const float4*>(row.scores);
    const int v_begin = begin / 4, v_end = end / 4;  // begin is a multiple of 4 (chunk is)
    for (int base = v_begin; base < v_end; base += kThreads * kVecPerThread) {  // block-uniform trip count
      float4 x[kVecPerThread];
#pragma unroll
      for (int u = 0; u < kVecPerThread; ++u) {
        const int v = base + u * kThreads + tid;
        x[u] = v < v_end ? __ldcg(scores4 + v) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kVecPerThread; ++u) {
        const bool ok = base + u * kThreads + tid < v_end;
        cache.add(hist, ok ? bin_of(x[u].x) : -1);
        cache.add(hist, ok ? bin_of(x[u].y) : -1);
        cache.add(hist, ok ? bin_of(x[u].z) : -1);
        cache.add(hist, ok ? bin_of(x[u].w) : -1);
      }
    }
    if (tid < 32) {  // the end % 4 tail, one warp
      const int i = v_end * 4 + tid;
      cache.add(hist, i < end ? bin_of(__ldcg(row.scores + i)) : -1);
    }
    cache.flush(hist);
    __syncthreads();
    for (int i = tid; i < bins; i += kThreads)
      if (hist[i] != 0) atomicAdd(global_hist + i, hist[i]);
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(p.scratch.tickets + row.index, 1) == active - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    if (tid == 0) p.scratch.tickets[row.index] = 0;  // ready for the next digit
  }

  // ---- select the digit: the bin of the k_rem-th largest key, bins in descending order
  for (int i = tid; i < bins; i += kThreads) {
    hist[i] = __ldcg(global_hist + i);
    global_hist[i] = 0;  // ready for the next digit / run
  }
  __syncthreads();
  const DigitChoice choice = choose_digit(hist, bins, k_rem, scratch, chosen);
  if (tid == 0) {
    state[0] = prefix | (static_cast<uint32_t>(choice.digit) << shift);
    state[1] = prefix_mask | (static_cast<uint32_t>(bins - 1) << shift);
    state[2] = static_cast<uint32_t>(k_rem - choice.above);
  }
}

// Loads the kCompactItems keys of this thread at `base` (0 at or past `end`).
__device__ __forceinline__ void load_keys(const float* scores, int end, int base, uint32_t (&keys)[kCompactItems]) {
  const int i0 = base + threadIdx.x * kCompactItems;
  if (i0 + kCompactItems <= end) {
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
    for (int e = 0; e < kCompactItems; ++e) keys[e] = i0 + e < end ? float_order_key(__ldcg(scores + i0 + e)) : 0u;
  }
}

// Launch 4 (several chunks per row): the chunk's counts of keys > T and == T.
__global__ void __launch_bounds__(kThreads) topk_count_kernel(const TopkParams p) {
  __shared__ int scratch[kWarps + 1];
  const TopkRow row = topk_row(p, false);
  if (row.k == 0 || row.k >= row.n) return;
  const int begin = blockIdx.x * p.chunk;
  if (begin >= row.n) return;
  const int end = min(row.n, begin + p.chunk);
  const uint32_t threshold = p.scratch.state[row.index * kTopkStateWords];
  int gt = 0, eq = 0;
  for (int base = begin; base < end; base += kCompactStep) {
    uint32_t keys[kCompactItems];
    load_keys(row.scores, end, base, keys);
    const int i0 = base + threadIdx.x * kCompactItems;
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) {
      if (i0 + e < end) {
        gt += keys[e] > threshold;
        eq += keys[e] == threshold;
      }
    }
  }
  int total_gt = 0, total_eq = 0;
  (void)block_exclusive_scan<kThreads>(gt, scratch, total_gt);
  (void)block_exclusive_scan<kThreads>(eq, scratch, total_eq);
  if (threadIdx.x == 0) {
    int32_t* out = p.scratch.chunk_counts + (row.index * p.max_chunks + blockIdx.x) * 2;
    out[0] = total_gt;
    out[1] = total_eq;
  }
}

// Launch 5: row length, padding, and the chunk's selected indices in index order.
__global__ void __launch_bounds__(kThreads) topk_write_kernel(const TopkParams p) {
  __shared__ int scratch[kWarps + 1];
  __shared__ int before[2];
  const int tid = threadIdx.x;
  const TopkRow row = topk_row(p, blockIdx.x == 0 && tid == 0);
  int32_t* out = p.indices + row.index * p.k_max;
  const int k = row.k;
  if (blockIdx.x == 0) {
    if (tid == 0) p.row_lens[row.index] = k;
    for (int i = k + tid; i < p.k_max; i += kThreads) out[i] = -1;
  }
  const int begin = blockIdx.x * p.chunk;
  if (k == 0 || begin >= row.n) return;
  const int end = min(row.n, begin + p.chunk);
  if (k >= row.n) {  // every key is selected (k == n)
    for (int i = begin + tid; i < end; i += kThreads) out[i] = i;
    return;
  }
  const uint32_t* state = p.scratch.state + row.index * kTopkStateWords;
  const uint32_t threshold = state[0];
  const int take_eq = static_cast<int>(state[2]);  // elements equal to the threshold that are selected
  const int take_gt = k - take_eq;                 // elements above it (all selected)
  if (tid < 32) {  // selected elements of the earlier chunks
    int gt = 0, eq = 0;
    const int32_t* counts = p.scratch.chunk_counts + row.index * p.max_chunks * 2;
    for (int c = tid; c < static_cast<int>(blockIdx.x); c += 32) {
      gt += __ldcg(counts + 2 * c);
      eq += __ldcg(counts + 2 * c + 1);
    }
    gt = __reduce_add_sync(0xffffffffu, gt);
    eq = __reduce_add_sync(0xffffffffu, eq);
    if (tid == 0) {
      before[0] = gt;
      before[1] = eq;
    }
  }
  __syncthreads();
  int run_gt = before[0], run_eq = before[1];
  if (run_gt >= take_gt && run_eq >= take_eq) return;  // the earlier chunks hold the whole Top-k

  // Compaction, the next step's loads in flight during this step's scan.
  uint32_t keys[kCompactItems], next[kCompactItems];
  load_keys(row.scores, end, begin, next);
  for (int base = begin; base < end; base += kCompactStep) {
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) keys[e] = next[e];
    if (base + kCompactStep < end) load_keys(row.scores, end, base + kCompactStep, next);
    const int i0 = base + tid * kCompactItems;
    int count_gt = 0, count_eq = 0;
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) {
      if (i0 + e < end) {
        count_gt += keys[e] > threshold;
        count_eq += keys[e] == threshold;
      }
    }
    int total = 0;
    const int packed_before = block_exclusive_scan<kThreads>((count_gt << 16) | count_eq, scratch, total);
    int gt_before = run_gt + (packed_before >> 16), eq_before = run_eq + (packed_before & 0xffff);
#pragma unroll
    for (int e = 0; e < kCompactItems; ++e) {
      if (i0 + e < end) {
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
  if (params.by_rows) return launch_row_topk(params, batch, stream);
  if (batch < 1 || params.num_rows < 1 || params.stride % 4 != 0 || params.k_max < 1 || params.max_chunks < 1 ||
      params.chunk < 1 || params.chunk % kTopkChunkQuantum != 0 ||
      static_cast<int64_t>(params.chunk) * params.max_chunks < params.max_seq_len ||
      params.scratch.histograms == nullptr || params.scratch.tickets == nullptr || params.scratch.state == nullptr ||
      (params.max_chunks > 1 && params.scratch.chunk_counts == nullptr))
    return cudaErrorInvalidValue;
  const dim3 row_grid(1, params.num_rows, batch);
  const dim3 chunk_grid(params.max_chunks, params.num_rows, batch);
  for (int pass = 0; pass < 3; ++pass) {
    const bool counted = pass == 0 && params.first_digit_counted;
    topk_digit_kernel<<<counted ? row_grid : chunk_grid, kThreads, 0, stream>>>(params, pass);
  }
  if (params.max_chunks > 1) topk_count_kernel<<<chunk_grid, kThreads, 0, stream>>>(params);
  topk_write_kernel<<<chunk_grid, kThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace kascade::cuda::detail
