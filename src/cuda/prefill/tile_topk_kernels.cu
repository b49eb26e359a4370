// src/cuda/prefill/tile_topk_kernels.cu — the anchor's selection (DESIGN.md §2.1, §2.3): for each
// tile slot of a wave and pooled row r, the k_t = row length largest pooled scores of candidates
// j < s_t, ties to the lower index (exactly ref::topk_select_ref on the same scores), written in
// ascending index order straight into the row's place in the compact (CSR) index rows.
// A row's score of j combines the per-group scores of groups [r·G/R, (r+1)·G/R) in a fixed order
// (sum or max). k_t = s_t writes 0..s_t-1; k_t = 0 writes nothing.
// Method: radix select over the order-preserving uint32 image of the scores (11 + 11 + 10 bit digits,
// one shared-memory histogram pass per digit, repeats counted in registers by detail::BinCache), which yields the k_t-th
// largest key K and how many elements equal to K to take; then one compaction pass in index order
// (a block-wide scan of (greater, equal) counts) keeps every key > K and the first ones == K.
// One CTA of 1024 threads per row; no sort, no host round trip.
// Tested by tests/cuda/test_prefill_select.cpp (exact sets against ref::topk_select_ref on ties,
// -0/+0, a single distinct value, and random rows; and through select_prefill).
#include <cuda_runtime.h>

#include "cuda/prefill/prefill_device.cuh"
#include "cuda/prefill/prefill_launch.h"

namespace kascade::cuda::prefill {
namespace {

constexpr int kTopkWarps = kTopkThreads / 32;

// Order key of a row's score of candidate j.
template <bool kMax>
__device__ __forceinline__ uint32_t score_key(const float* scores, int64_t stride, int groups, int j) {
  float v = scores[j];
  for (int u = 1; u < groups; ++u) {
    const float x = scores[u * stride + j];
    v = kMax ? fmaxf(v, x) : v + x;
  }
  return detail::float_order_key(v);
}

// Warp 0: the bin holding the k_rem-th largest of the histogram, and how many of that bin to take.
__device__ __forceinline__ void find_digit(const int* hist, int bins, int k_rem, int* digit_out, int* k_out) {
  const int lane = threadIdx.x & 31;
  const int per = bins / 32;
  int sum = 0;
  for (int i = 0; i < per; ++i) sum += hist[lane * per + (i + lane) % per];  // rotated: no bank conflicts
  int suffix = sum;  // bins of lanes >= lane
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_down_sync(0xffffffffu, suffix, offset);
    if (lane + offset < 32) suffix += other;
  }
  const int above = suffix - sum;  // bins of lanes > lane
  if (above < k_rem && k_rem <= suffix) {
    int acc = above;
    for (int d = (lane + 1) * per - 1; d >= lane * per; --d) {
      const int count = hist[d];
      if (acc + count >= k_rem) {
        *digit_out = d;
        *k_out = k_rem - acc;
        break;
      }
      acc += count;
    }
  }
}

template <bool kMax>
__global__ void __launch_bounds__(kTopkThreads) tile_topk_kernel(const TopkArgs args) {
  __shared__ int hist[kTopkBins];
  __shared__ int scan[kTopkWarps + 1];
  __shared__ int chosen_digit, chosen_k;

  const CallArgs& c = args.call;
  const RowArgs& r = args.rows;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wave_slot = blockIdx.x;
  const int pooled_row = blockIdx.y;

  if (args.wave_base == 0 && wave_slot == 0 && pooled_row == 0 && tid == 0 &&
      r.tile_base[c.batch] > args.slot_capacity) {
    report_error(c, kPrefillErrorTileBase);  // more tiles than the plan's waves cover
  }
  SlotTile st;
  if (!resolve_slot(c, r, args.wave_base + wave_slot, st)) return;
  const int n = st.tile * r.tile_size;  // candidates j < s_t
  const int64_t row = static_cast<int64_t>(args.wave_base + wave_slot) * r.num_rows + pooled_row;
  const int64_t begin = r.row_offsets[row];
  const int64_t length = r.row_offsets[row + 1] - begin;
  if (begin < 0 || length < 0 || length > n) {
    if (tid == 0) report_error(c, kErrorRowLen);
    return;
  }
  const int k = static_cast<int>(length);
  int32_t* const out = args.out_indices + begin;
  if (k == 0) return;
  if (k == n) {
    for (int j = tid; j < n; j += kTopkThreads) out[j] = j;
    return;
  }

  const int groups = c.num_kv_heads / args.pool_rows;
  const float* const scores =
      args.scores + (static_cast<int64_t>(wave_slot) * c.num_kv_heads + pooled_row * groups) * args.score_stride;

  // ---- radix select: prefix of the k-th largest key, digit by digit
  uint32_t prefix = 0, mask = 0;
  int k_rem = k;
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const int bins = pass == 2 ? 1024 : 2048;
    for (int i = tid; i < bins; i += kTopkThreads) hist[i] = 0;
    __syncthreads();
    detail::BinCache cache;  // pooled scores crowd into few bins: count repeats in registers
    for (int j = tid; j < n; j += kTopkThreads) {
      const uint32_t key = score_key<kMax>(scores, args.score_stride, groups, j);
      if ((key & mask) == prefix) cache.add(hist, static_cast<int>((key >> shift) & static_cast<uint32_t>(bins - 1)));
    }
    cache.flush(hist);
    __syncthreads();
    if (warp == 0) find_digit(hist, bins, k_rem, &chosen_digit, &chosen_k);
    __syncthreads();
    prefix |= static_cast<uint32_t>(chosen_digit) << shift;
    mask |= static_cast<uint32_t>(bins - 1) << shift;
    k_rem = chosen_k;
    __syncthreads();  // chosen_* are rewritten by the next pass
  }
  const uint32_t threshold = prefix;  // the k-th largest key; take k_rem of the keys equal to it
  const int take_equal = k_rem;

  // ---- compaction in index order: keys > threshold, then the first take_equal keys == threshold
  int written = 0, equal_seen = 0;
  for (int j0 = 0; j0 < n && written < k; j0 += kTopkThreads) {
    const int j = j0 + tid;
    int greater = 0, equal = 0;
    if (j < n) {
      const uint32_t key = score_key<kMax>(scores, args.score_stride, groups, j);
      greater = key > threshold;
      equal = key == threshold;
    }
    const int packed = greater | (equal << 16);  // counts per chunk <= 1024: no carry between halves
    int total = 0;
    const int exclusive = detail::block_exclusive_scan<kTopkThreads>(packed, scan, total);
    const int budget = max(0, take_equal - equal_seen);
    const int greater_before = exclusive & 0xffff, equal_before = exclusive >> 16;
    if (greater || (equal && equal_before < budget)) out[written + greater_before + min(equal_before, budget)] = j;
    written += (total & 0xffff) + min(total >> 16, budget);
    equal_seen += total >> 16;
  }
  if (tid == 0 && written != k) report_error(c, kPrefillErrorSelect);
}

}  // namespace

cudaError_t launch_tile_topk(const TopkArgs& args, dim3 grid, cudaStream_t stream) {
  if (args.reduce_max) {
    tile_topk_kernel<true><<<grid, kTopkThreads, 0, stream>>>(args);
  } else {
    tile_topk_kernel<false><<<grid, kTopkThreads, 0, stream>>>(args);
  }
  return cudaGetLastError();
}

}  // namespace kascade::cuda::prefill
