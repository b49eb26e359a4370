// src/cuda/kascade/row_topk_kernel.cu — the decode Top-k for rows of at most kRowTopkMaxKeys
// scores: one thread-block cluster of C CTAs (C = 1, 2, 4 or 8: TopkPlan::row_cluster) per
// (sequence, row), CTA rank c owning the c-th of C slices of whole 32-key words, and, in the common
// case, one read of the row; the rest runs in shared memory, the CTAs of a cluster summing their
// histograms and counts through distributed shared memory. Same result as the chunked radix select
// (radix_topk_kernels.cu): the k largest scores, ties to the lower index, ascending index order,
// −1 after k, row_lens = k. Few rows (B = 4, 8 at G = 8) take clusters so that the GPU fills.
// With the fused pooling (anchor decode, TopkParams::fused_pooling) the slice's scores are not read:
// each CTA first pools them from the logits into shared memory (pool_device.cuh, the same bits as
// the pooling kernel), counting their first digit as it goes, and every later pass reads that copy.
//   1. The first radix digit (bits 31..21 of the order-preserving key): its histogram comes from
//      the pooling kernel (anchor decode; the CTA clears it for the next run), from the fused
//      pooling, or from a pass over the row; the digit d1 holding the k-th largest key is chosen
//      (choose_digit).
//   2. One pass over the CTA's slice, 32 consecutive scores per warp load, the next step's loads in flight
//      while a step is processed: a ballot of "first digit > d1" is the word of an n-bit mask of
//      selected keys (written by the warp that loaded it, no atomics); keys whose first digit is
//      d1 — the candidates, hist1[d1] of them — are appended (key, index) to a shared list when
//      they fit (kRowTopkCandidates in the row; with the fused pooling kFusedPoolCandidates in the
//      CTA's slice), one shared atomic per warp and step reserving the slots.
//   3. The last two digits are chosen on the candidate lists (shared histograms, summed over the
//      cluster), giving the k-th
//      largest key T and take_eq = how many keys equal to T are selected; candidates > T set their
//      bit, candidates == T set a bit of a second mask. When the candidates did not fit, the same
//      is done by passes over the row instead (digit 2, digit 3, marking: three more reads; with
//      the fused pooling, passes over the shared-memory slice).
//   4. The first take_eq bits of the "== T" mask (lowest indices) join the selection; a block scan
//      of the mask's popcounts, offset by the counts of the cluster's lower ranks, gives every
//      thread its output position, and the set bits come out in ascending index order.
// Tested by tests/cuda/test_radix_topk.cpp (exact equality with ref::topk_select_ref, ties
// included, both the candidate list and the passes, clusters of 1, 2 and the plan's) and
// test_anchor_decode.cpp (the fused pooling: pooled scores and rows equal to the separate kernels').
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_errors.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/kascade/pool_device.cuh"
#include "cuda/kascade/selection_kernels.h"
#include "cuda/kascade/topk_device.cuh"

namespace kascade::cuda::detail {
namespace {

constexpr int kThreads = kTopkThreads;
constexpr int kLoads = 8;                   // scalar loads per thread per step (two steps in flight)
constexpr int kStep = kThreads * kLoads;    // scores per step of a pass
constexpr uint32_t kFirstShift = kTopkFirstShift;

namespace cg = cooperative_groups;

// Shared memory of one CTA (dynamic): the two masks of its slice, the candidate list, its
// histogram, (clusters) the cluster's summed histogram and (fused pooling) the slice's scores.
// row_topk_smem_bytes sizes the same layout.
struct RowSmem {
  uint32_t* selected;   // [words] bit i: key i of the slice is in the Top-k
  uint32_t* equal;      // [words] bit i: key i of the slice equals the k-th largest key T
  uint32_t* cand_key;   // [candidates]
  int32_t* cand_index;  // [candidates] row index of the key
  int* hist;            // [kTopkBins] this CTA's counts
  int* hist_sum;        // [kTopkBins] the cluster's counts (clusters of more than one CTA)
  float* scores;        // [words · 32] the slice's pooled scores (fused pooling), else null
};

__device__ __forceinline__ RowSmem row_smem(uint32_t* base, int words, int candidates, int ranks, bool pooled_slice) {
  RowSmem s;
  s.selected = base;
  s.equal = base + words;
  s.cand_key = base + 2 * words;
  s.cand_index = reinterpret_cast<int32_t*>(s.cand_key + candidates);
  s.hist = s.cand_index + candidates;
  s.hist_sum = s.hist + kTopkBins;
  s.scores = pooled_slice ? reinterpret_cast<float*>(s.hist + (ranks > 1 ? 2 : 1) * kTopkBins) : nullptr;
  return s;
}

// Where a CTA reads the scores of its slice (index i in the slice): the pooled rows in global memory
// (read once, so through L2 only) or the copy the fused pooling left in shared memory.
struct GlobalScores {
  const float* slice;
  __device__ __forceinline__ float operator()(int i) const { return __ldcg(slice + i); }
};
struct SharedScores {
  const float* slice;
  __device__ __forceinline__ float operator()(int i) const { return slice[i]; }
};

// Clusters exist from sm_90 on; an older build never gets ranks > 1 (the plan and the launcher refuse).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define KASCADE_ROW_TOPK_CLUSTERS 1
#else
#define KASCADE_ROW_TOPK_CLUSTERS 0
#endif

// The histogram of the whole row: this CTA's own with one CTA a row; with a cluster, the sum of
// every rank's `hist` into `hist_sum` through distributed shared memory. Call from every thread of
// every CTA of the cluster after the CTA's counts are complete (a cluster barrier orders them); on
// return `hist` may be counted into again.
__device__ __forceinline__ const int* row_histogram(const RowSmem& sm, int bins, int ranks) {
  if (ranks == 1) return sm.hist;
#if KASCADE_ROW_TOPK_CLUSTERS
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's counts are complete
  for (int i = threadIdx.x; i < bins; i += kThreads) {
    int sum = 0;
    for (int r = 0; r < ranks; ++r) sum += cluster.map_shared_rank(sm.hist, r)[i];
    sm.hist_sum[i] = sum;
  }
  cluster.sync();  // every rank has read every `hist`; hist_sum is complete in this CTA
  return sm.hist_sum;
#else
  __trap();
  return sm.hist;
#endif
}

// The sum of `value` (the same in every thread of a CTA) over the cluster's ranks below this one
// (.x) and over all of them (.y), through `slot` (a shared int). Call from every thread.
__device__ __forceinline__ int2 cluster_prefix(int value, int* slot, int ranks, int rank) {
  if (ranks == 1) return make_int2(0, value);
#if KASCADE_ROW_TOPK_CLUSTERS
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) *slot = value;
  cluster.sync();
  int before = 0, total = 0;
  for (int r = 0; r < ranks; ++r) {
    const int v = *cluster.map_shared_rank(slot, r);
    before += r < rank ? v : 0;
    total += v;
  }
  cluster.sync();  // every rank has read every slot: they may be written again, or the CTAs exit
  return make_int2(before, total);
#else
  __trap();
  return make_int2(0, value);
#endif
}

// One pass over the slice's scores [0, n) in steps of kStep scores: f(base, x) with x[u] the score
// at i = base + u·kThreads + threadIdx.x (0 past n), so every warp holds 32 consecutive i per u and
// ballots inside f see whole words. The next step's loads are issued before f runs on the current
// one, so a CTA keeps a step of loads in flight while it works. Src: GlobalScores or SharedScores.
template <typename Src>
__device__ __forceinline__ void load_step(const Src& scores, int n, int base, float (&x)[kLoads]) {
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
    x[u] = i < n ? scores(i) : 0.0f;
  }
}

template <typename Src, typename F>
__device__ __forceinline__ void for_each_step(const Src& scores, int n, F&& f) {
  float x[kLoads], next[kLoads];
  load_step(scores, n, 0, x);
  for (int base = 0; base < n; base += kStep) {  // block-uniform trip count
    if (base + kStep < n) load_step(scores, n, base + kStep, next);
    f(base, x);
#pragma unroll
    for (int u = 0; u < kLoads; ++u) x[u] = next[u];
  }
}

// f(i, key, valid) for every i in [0, n) and for the padding of the last step (valid = false).
template <typename Src, typename F>
__device__ __forceinline__ void for_each_score(const Src& scores, int n, F&& f) {
  for_each_step(scores, n, [&](int base, const float (&x)[kLoads]) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
      f(i, float_order_key(x[u]), i < n);
    }
  });
}

// This CTA's histogram of one digit over the keys of its slice whose higher digits equal `prefix`
// (under `mask`).
template <typename Src>
__device__ __forceinline__ void count_digit(const Src& scores, int n, int* hist, int bins, uint32_t shift,
                                            uint32_t prefix, uint32_t mask) {
  for (int i = threadIdx.x; i < bins; i += kThreads) hist[i] = 0;
  __syncthreads();
  BinCache cache;
  for_each_score(scores, n, [&](int, uint32_t key, bool valid) {
    cache.add(hist, valid && (key & mask) == prefix ? static_cast<int>((key >> shift) & (bins - 1)) : -1);
  });
  cache.flush(hist);
  __syncthreads();
}

// The fused pooling: the pooled scores of the slice's keys [key0, key0 + n_slice) of row (b, r) =
// (blockIdx.z, blockIdx.y) into sm.scores[0, n_slice) (and pool.pooled_out when set), their first
// radix digit counted into sm.hist (zeroed here). kKeys keys per thread and step (64 bytes of
// logits, their loads in flight together); consecutive threads on consecutive keys.
template <int GP, bool kMax>
__device__ __forceinline__ void pool_slice(const TopkParams& p, int64_t row_index, int key0, int n_slice,
                                           const RowSmem& sm) {
  constexpr int kKeys = GP <= 4 ? 4 : 2;
  for (int i = threadIdx.x; i < kTopkBins; i += kThreads) sm.hist[i] = 0;
  __syncthreads();
  const FusedPooling& f = p.pool;
  const int b = blockIdx.z;
  const PoolRowHeads rh = pool_row_heads(f.num_heads, f.num_kv_heads, p.num_rows, static_cast<int>(blockIdx.y));
  const float* lse_b = f.lse + static_cast<int64_t>(b) * f.num_heads;
  float* out = f.pooled_out != nullptr ? f.pooled_out + row_index * p.stride + key0 : nullptr;
  BinCache cache;
  for (int base = 0; base < n_slice; base += kThreads * kKeys) {  // block-uniform trip count
    int keys[kKeys];
#pragma unroll
    for (int e = 0; e < kKeys; ++e) {
      const int i = base + e * kThreads + static_cast<int>(threadIdx.x);
      keys[e] = i < n_slice ? key0 + i : -1;
    }
    float acc[kKeys] = {};
    for (int kv = rh.kv_first; kv <= rh.kv_last; ++kv) {
      const float* group_logits = f.logits + (static_cast<int64_t>(b) * f.num_kv_heads + kv) * p.stride * GP;
      pool_group_keys<kMax, GP>(group_logits, lse_b, rh, kv, keys, acc);
    }
#pragma unroll
    for (int e = 0; e < kKeys; ++e) {
      const int i = base + e * kThreads + static_cast<int>(threadIdx.x);
      if (i < n_slice) {
        sm.scores[i] = acc[e];
        if (out != nullptr) out[i] = acc[e];
      }
      cache.add(sm.hist, i < n_slice ? static_cast<int>(float_order_key(acc[e]) >> kFirstShift) : -1);
    }
  }
  cache.flush(sm.hist);
  __syncthreads();
}

// grid (C, R, B), clusters of (C, 1, 1); words: the mask words of one slice (smem sizing).
// kGP = 0: the slice's scores come from p.scores; kGP = 1, 2, 4, 8: the fused pooling from logits
// blocks of kGP floats, summed (kMax = false) or maxed over a row's heads. Two CTAs per SM
// (<= 64 registers): the fused slices of up to kFusedPoolSliceKeys keys are sized for it.
template <int kGP, bool kMax>
__global__ void __launch_bounds__(kThreads, 2) row_topk_kernel(const TopkParams p, int words) {
  constexpr bool kFused = kGP > 0;
  constexpr int kCandidates = kFused ? kFusedPoolCandidates : kRowTopkCandidates;
  extern __shared__ uint4 smem_raw[];
  const int ranks = static_cast<int>(gridDim.x), rank = static_cast<int>(blockIdx.x);
  const RowSmem sm = row_smem(reinterpret_cast<uint32_t*>(smem_raw), words, kCandidates, ranks, kFused);
  __shared__ int scratch[kThreads / 32 + 1];
  __shared__ int chosen[2];
  __shared__ int cand_count;
  __shared__ int exchange;
  const int tid = threadIdx.x, lane = tid & 31;
  const TopkRow row = topk_row(p, tid == 0 && rank == 0);
  int* global_hist = p.scratch.histograms + row.index * kTopkBins;
  int32_t* out = p.indices + row.index * p.k_max;
  const int n = row.n, k = row.k;
  // This CTA's slice: keys [key0, key0 + n_slice), whole words but for the row's last.
  const int row_words = (n + 31) / 32;
  const int slice_words = (row_words + ranks - 1) / ranks;
  const int key0 = min(n, rank * slice_words * 32);
  const int n_slice = min(n, key0 + slice_words * 32) - key0;
  const int n_words = (n_slice + 31) / 32;
  // The fused pooling runs first: its scores are also an output (pooled_out) when nothing is selected.
  if constexpr (kFused) pool_slice<kGP, kMax>(p, row.index, key0, n_slice, sm);
  if (tid == 0 && rank == 0) p.row_lens[row.index] = k;
  if (k == 0 || k >= n) {  // nothing to select (k == n: every index); a histogram the pooling filled is cleared
    if (rank == 0) {
      if (p.first_digit_counted)
        for (int i = tid; i < kTopkBins; i += kThreads) global_hist[i] = 0;
      for (int i = tid; i < p.k_max; i += kThreads) out[i] = i < k ? i : -1;
    }
    return;  // the same for every rank: no cluster barrier is left waiting
  }
  const auto slice = [&] {
    if constexpr (kFused) {
      return SharedScores{sm.scores};
    } else {
      return GlobalScores{row.scores + key0};
    }
  }();
  for (int i = tid; i < n_words; i += kThreads) sm.selected[i] = sm.equal[i] = 0u;
  if (tid == 0) cand_count = 0;

  // ---- 1. the first digit
  const int* hist = sm.hist;
  if (kFused) {
    hist = row_histogram(sm, kTopkBins, ranks);  // the fused pooling counted this CTA's
  } else if (p.first_digit_counted) {
    for (int i = tid; i < kTopkBins; i += kThreads) {
      sm.hist[i] = __ldcg(global_hist + i);
      if (ranks == 1) global_hist[i] = 0;  // ready for the next run (clusters: at the end)
    }
    __syncthreads();
  } else {
    count_digit(slice, n_slice, sm.hist, kTopkBins, kFirstShift, 0u, 0u);
    hist = row_histogram(sm, kTopkBins, ranks);
  }
  int k_rem = k;
  const DigitChoice c1 = choose_digit(hist, kTopkBins, k_rem, scratch, chosen);
  k_rem -= c1.above;
  const uint32_t d1 = static_cast<uint32_t>(c1.digit);
  // Listed when the candidates fit: with the fused pooling, this CTA's own (sm.hist keeps its counts;
  // the ranks may choose differently: both ways count and mark the same keys, through the same
  // cluster barriers); otherwise the row's (only the row's histogram is known), so every slice's fit.
  const bool listed = (kFused ? sm.hist[d1] : hist[d1]) <= kCandidates;
  __syncthreads();  // the histograms are reused below

  // ---- 2. one pass: first digit > d1 selected (mask words by ballot), first digit == d1 listed
  //         (one shared atomic per warp and step reserves the slots of the step's candidates)
  for_each_step(slice, n_slice, [&](int base, const float (&x)[kLoads]) {
    uint32_t keys[kLoads], cands[kLoads];
    int warp_cands = 0;
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = base + u * kThreads + tid;
      const bool valid = i < n_slice;
      keys[u] = float_order_key(x[u]);
      const uint32_t digit = keys[u] >> kFirstShift;
      const uint32_t word = __ballot_sync(0xffffffffu, valid && digit > d1);
      if (lane == 0 && valid) sm.selected[i >> 5] = word;
      cands[u] = listed ? __ballot_sync(0xffffffffu, valid && digit == d1) : 0u;
      warp_cands += __popc(cands[u]);
    }
    if (warp_cands == 0) return;  // warp-uniform
    int slot = 0;
    if (lane == 0) slot = atomicAdd(&cand_count, warp_cands);
    slot = __shfl_sync(0xffffffffu, slot, 0);
    const uint32_t lanes_below = (1u << lane) - 1u;
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int mine = slot + __popc(cands[u] & lanes_below);
      if ((cands[u] >> lane) & 1u && mine < kCandidates) {  // always fits, unless the pooled histogram disagrees with the scores
        sm.cand_key[mine] = keys[u];
        sm.cand_index[mine] = base + u * kThreads + tid;  // in the slice
      }
      slot += __popc(cands[u]);
    }
  });
  __syncthreads();

  // ---- 3. digits 2 and 3: T and take_eq; candidates > T and == T marked
  constexpr uint32_t kMask1 = 0xFFE00000u, kMask2 = 0xFFFFFC00u;
  const uint32_t prefix1 = d1 << kFirstShift;
  uint32_t threshold = 0;
  if (listed) {
    const int candidates = min(cand_count, kCandidates);  // this slice's
    for (int i = tid; i < kTopkBins; i += kThreads) sm.hist[i] = 0;
    __syncthreads();
    for (int c = tid; c < candidates; c += kThreads) atomicAdd(&sm.hist[(sm.cand_key[c] >> 10) & 2047u], 1);
    __syncthreads();
    hist = row_histogram(sm, kTopkBins, ranks);
    const DigitChoice c2 = choose_digit(hist, kTopkBins, k_rem, scratch, chosen);
    k_rem -= c2.above;
    const uint32_t prefix2 = prefix1 | (static_cast<uint32_t>(c2.digit) << 10);
    for (int i = tid; i < 1024; i += kThreads) sm.hist[i] = 0;
    __syncthreads();
    for (int c = tid; c < candidates; c += kThreads) {
      const uint32_t key = sm.cand_key[c];
      if ((key & kMask2) == prefix2) atomicAdd(&sm.hist[key & 1023u], 1);
    }
    __syncthreads();
    hist = row_histogram(sm, 1024, ranks);
    const DigitChoice c3 = choose_digit(hist, 1024, k_rem, scratch, chosen);
    k_rem -= c3.above;
    threshold = prefix2 | static_cast<uint32_t>(c3.digit);
    for (int c = tid; c < candidates; c += kThreads) {
      const uint32_t key = sm.cand_key[c];
      const int i = sm.cand_index[c];
      if (key > threshold) atomicOr(&sm.selected[i >> 5], 1u << (i & 31));
      if (key == threshold) atomicOr(&sm.equal[i >> 5], 1u << (i & 31));
    }
  } else {
    count_digit(slice, n_slice, sm.hist, kTopkBins, 10, prefix1, kMask1);
    hist = row_histogram(sm, kTopkBins, ranks);
    const DigitChoice c2 = choose_digit(hist, kTopkBins, k_rem, scratch, chosen);
    k_rem -= c2.above;
    const uint32_t prefix2 = prefix1 | (static_cast<uint32_t>(c2.digit) << 10);
    count_digit(slice, n_slice, sm.hist, 1024, 0, prefix2, kMask2);
    hist = row_histogram(sm, 1024, ranks);
    const DigitChoice c3 = choose_digit(hist, 1024, k_rem, scratch, chosen);
    k_rem -= c3.above;
    threshold = prefix2 | static_cast<uint32_t>(c3.digit);
    for_each_score(slice, n_slice, [&](int i, uint32_t key, bool valid) {  // the words' own warps: no atomics
      const bool in_d1 = valid && (key & kMask1) == prefix1;
      const uint32_t above = __ballot_sync(0xffffffffu, in_d1 && key > threshold);
      const uint32_t equal = __ballot_sync(0xffffffffu, in_d1 && key == threshold);
      if (lane == 0 && i < n_slice) {
        sm.selected[i >> 5] |= above;
        sm.equal[i >> 5] = equal;
      }
    });
  }
  __syncthreads();
  const int take_eq = k_rem;  // keys equal to T that belong to the Top-k: the lowest-index ones

  // ---- 4. the first take_eq "== T" bits join; the selected bits written in index order
  const int per = (n_words + kThreads - 1) / kThreads;
  const int w0 = min(n_words, tid * per), w1 = min(n_words, w0 + per);
  int eq_count = 0;
  for (int w = w0; w < w1; ++w) eq_count += __popc(sm.equal[w]);
  int eq_total = 0;
  int eq_before = block_exclusive_scan<kThreads>(eq_count, scratch, eq_total);
  eq_before += cluster_prefix(eq_total, &exchange, ranks, rank).x;  // "== T" keys of the lower slices
  int count = 0;
  for (int w = w0; w < w1; ++w) {
    uint32_t eq = sm.equal[w];
    const int bits = __popc(eq);
    if (eq_before >= take_eq) {
      eq = 0u;
    } else {
      for (int drop = eq_before + bits - take_eq; drop > 0; --drop) eq &= ~(1u << (31 - __clz(eq)));  // highest
    }
    eq_before += bits;
    const uint32_t sel = sm.selected[w] | eq;
    sm.selected[w] = sel;
    count += __popc(sel);
  }
  int total = 0;
  int pos = block_exclusive_scan<kThreads>(count, scratch, total);
  pos += cluster_prefix(total, &exchange, ranks, rank).x;  // selected keys of the lower slices
  for (int w = w0; w < w1; ++w) {
    for (uint32_t sel = sm.selected[w]; sel != 0u; sel &= sel - 1u) out[pos++] = key0 + w * 32 + __ffs(sel) - 1;
  }
  for (int i = k + rank * kThreads + tid; i < p.k_max; i += ranks * kThreads) out[i] = -1;
  if (ranks > 1 && p.first_digit_counted) {  // every rank read it before the cluster barriers above
    const int per_rank = kTopkBins / ranks;
    for (int i = rank * per_rank + tid; i < (rank + 1) * per_rank; i += kThreads) global_hist[i] = 0;
  }
}

}  // namespace

int32_t row_topk_slice_keys(int32_t max_seq_len, int32_t cluster) {
  const int64_t row_words = (static_cast<int64_t>(max_seq_len) + 31) / 32;
  return static_cast<int32_t>((row_words + cluster - 1) / cluster * 32);
}

bool fused_pool_holds(int32_t max_seq_len, int32_t cluster) {
  return max_seq_len >= 1 && max_seq_len <= kRowTopkMaxKeys && cluster >= 1 &&
         row_topk_slice_keys(max_seq_len, cluster) <= kFusedPoolMaxSliceKeys;
}

size_t row_topk_smem_bytes(int32_t max_seq_len, int32_t cluster, bool fused_pooling) {
  const size_t slice_keys = static_cast<size_t>(row_topk_slice_keys(max_seq_len, cluster));
  const size_t words = slice_keys / 32;
  const size_t candidates = size_t(fused_pooling ? kFusedPoolCandidates : kRowTopkCandidates);
  return 2 * words * sizeof(uint32_t) + candidates * (sizeof(uint32_t) + sizeof(int32_t)) +
         size_t(cluster > 1 ? 2 : 1) * kTopkBins * sizeof(int) + (fused_pooling ? slice_keys * sizeof(float) : 0);
}

namespace {

using RowTopkKernel = void (*)(const TopkParams, int);

// The kernel for the params: scores from global memory, or the fused pooling for its block width.
RowTopkKernel row_topk_kernel_for(const TopkParams& params) {
  if (params.fused_pooling == 0) return row_topk_kernel<0, false>;
  const bool max = params.pool.reduce_max != 0;
  switch (params.pool.logits_heads) {
    case 1: return max ? row_topk_kernel<1, true> : row_topk_kernel<1, false>;
    case 2: return max ? row_topk_kernel<2, true> : row_topk_kernel<2, false>;
    case 4: return max ? row_topk_kernel<4, true> : row_topk_kernel<4, false>;
    case 8: return max ? row_topk_kernel<8, true> : row_topk_kernel<8, false>;
    default: return nullptr;
  }
}

bool fused_pooling_valid(const TopkParams& params) {
  const FusedPooling& f = params.pool;
  return f.logits != nullptr && f.lse != nullptr && f.num_kv_heads >= 1 && f.num_heads % f.num_kv_heads == 0 &&
         f.num_heads % params.num_rows == 0 && f.logits_heads >= f.num_heads / f.num_kv_heads &&
         params.first_digit_counted == 0 && params.stride % 4 == 0 &&
         fused_pool_holds(params.max_seq_len, params.row_cluster);
}

}  // namespace

cudaError_t launch_row_topk(const TopkParams& params, int batch, cudaStream_t stream) {
  const int cluster = params.row_cluster;
  const bool fused = params.fused_pooling != 0;
  if (batch < 1 || params.num_rows < 1 || params.k_max < 1 || params.max_seq_len < 1 ||
      params.max_seq_len > kRowTopkMaxKeys || (params.first_digit_counted && params.scratch.histograms == nullptr) ||
      (cluster != 1 && cluster != 2 && cluster != 4 && cluster != 8) || (fused && !fused_pooling_valid(params)))
    return cudaErrorInvalidValue;
  const RowTopkKernel kernel = row_topk_kernel_for(params);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const size_t smem = row_topk_smem_bytes(params.max_seq_len, cluster, fused);
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const int words = row_topk_slice_keys(params.max_seq_len, cluster) / 32;
  if (cluster == 1) {  // a plain launch (any GPU)
    kernel<<<dim3(1, params.num_rows, batch), kThreads, smem, stream>>>(params, words);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(cluster, params.num_rows, batch);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, params, words);
}

}  // namespace kascade::cuda::detail
