// src/cuda/common/device_primitives.cuh — the few PTX building blocks the decode kernels share:
// cp.async copies with zero fill (LDGSTS; 16-byte .cg, 4/8/16-byte .ca), ldmatrix (plain and transposed), the
// m16n8k16 tensor-core MMA for fp16 and bf16 with fp32 accumulation, packing of fp32 pairs,
// the order-preserving map from float to uint32 used by the radix select, a register-cached
// histogram update for skewed data, a block-wide exclusive scan (the radix selects' compactions) and
// 2^x on the MUFU unit (ex2.approx), a bulk L2 prefetch (cp.async.bulk.prefetch.L2) and the bulk
// shared → global store of sm_90 (cp.async.bulk.global.shared::cta with its proxy fence and bulk groups).
// Fragment layouts follow the PTX ISA ("Matrix Fragments for mma.m16n8k16"). Device-only; tested
// through the kernels that use them (tests/cuda/).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kascade::cuda::detail {

__device__ __forceinline__ uint32_t smem_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Copies 16 bytes global → shared, bypassing L1. src_bytes = 0 writes 16 zero bytes and reads
// nothing (the source pointer must still be a valid global address).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
// The same copy gated by an index: index < 0 writes 16 zero bytes and reads nothing (cp.async's
// ignore-src predicate, set from the index inside the asm; src must still be a valid global
// address). Cheaper than a src_bytes select for gathers that hold a row index with -1 = none.
__device__ __forceinline__ void cp_async_16_or_zeros(uint32_t dst, const void* src, int32_t index) {
  asm volatile(
      "{\n.reg .pred ignore;\nsetp.lt.s32 ignore, %2, 0;\n"
      "cp.async.cg.shared.global.L2::128B [%0], [%1], 16, ignore;\n}\n" ::"r"(dst),
      "l"(src), "r"(index)
      : "memory");
}
// Copies kBytes (4, 8 or 16) global → shared through L1; src_bytes = 0 writes zeros and reads nothing.
// For rows narrower than the 16-byte .cg copy (the key-major logits of small GQA groups).
template <int kBytes>
__device__ __forceinline__ void cp_async_ca(uint32_t dst, const void* src, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Element traits: the MMA instruction and the fp32-pair packing of one 16-bit type.
template <typename T>
struct Mma16;

template <>
struct Mma16<__half> {
  // d = a (16x16, row) * b (16x8, col) + d, fp32 accumulators.
  static __device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  // Lower 16 bits hold `lo` (the element with the lower k index).
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

template <>
struct Mma16<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

// Exclusive prefix sum of `value` over a block of kThreads threads (in thread order); `total` gets
// the block sum. scratch: [kThreads / 32 + 1] shared ints, free again when the call returns.
// Contains barriers (one at the end, so back-to-back calls may reuse scratch): call from every thread.
template <int kThreads>
__device__ __forceinline__ int block_exclusive_scan(int value, int* scratch, int& total) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "a block of whole warps");
  constexpr int kWarps = kThreads / 32;
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
    const int w = lane < kWarps ? scratch[lane] : 0;
    int w_inclusive = w;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w_inclusive, offset);
      if (lane >= offset) w_inclusive += y;
    }
    if (lane < kWarps) scratch[lane] = w_inclusive - w;
    if (lane == kWarps - 1) scratch[kWarps] = w_inclusive;
  }
  __syncthreads();
  const int result = scratch[warp] + inclusive - value;
  total = scratch[kWarps];
  __syncthreads();
  return result;
}

// Maps a float to a uint32 whose unsigned order is the float order (−0 and +0 map to the same
// key, so they tie as they do in a float comparison). NaN maps above +inf.
__device__ __forceinline__ uint32_t float_order_key(float x) {
  uint32_t bits = __float_as_uint(x);
  if (bits == 0x80000000u) bits = 0u;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Histogram counting for skewed data (post-softmax scores crowd into a few radix bins, and
// same-address shared atomics serialise): each thread keeps one (bin, count) pair in registers,
// counts repeats of it there and sends other bins straight to `hist`; a bin seen only once is
// replaced by the next new one, so the cache settles on the thread's frequent bin. flush() adds the
// cached counts with one atomic per warp when every lane holds the same bin.
struct BinCache {
  int bin = -1;
  int count = 0;
  __device__ __forceinline__ void add(int* hist, int b) {
    if (b < 0) return;
    if (b == bin) {
      ++count;
    } else if (count <= 1) {
      if (bin >= 0) atomicAdd(&hist[bin], count);
      bin = b;
      count = 1;
    } else {
      atomicAdd(&hist[b], 1);
    }
  }
  // Every lane of the warp must call it.
  __device__ __forceinline__ void flush(int* hist) {
    const int first = __shfl_sync(0xffffffffu, bin, 0);
    if (__all_sync(0xffffffffu, bin == first)) {
      const int total = __reduce_add_sync(0xffffffffu, count);
      if ((threadIdx.x & 31) == 0 && first >= 0 && total > 0) atomicAdd(&hist[first], total);
    } else if (bin >= 0 && count > 0) {
      atomicAdd(&hist[bin], count);
    }
    bin = -1;
    count = 0;
  }
};

__device__ __forceinline__ int ceil_div_device(int a, int b) { return (a + b - 1) / b; }

// 2^x with the MUFU unit alone (|rel. error| ~ 2^-22, subnormal results flushed to 0); ex2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Asks the copy engine to bring `bytes` of global memory at `p` into L2 (cp.async.bulk.prefetch.L2;
// sm_90+, nothing below). p 16-byte aligned, bytes a multiple of 16. No data comes back, nothing waits.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// True where the bulk copy engine's shared → global store exists (sm_90+; the device pass of this arch).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kHasBulkStore = true;
#else
constexpr bool kHasBulkStore = false;
#endif

// Makes this thread's generic-proxy writes to shared memory visible to the async proxy (the bulk copy
// engine). Every thread that wrote the data executes it, then the threads synchronise, then one issues
// the bulk store. sm_90+; nothing below (kHasBulkStore guards the callers).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Copies `bytes` of shared memory at `src` to global memory at `dst` on the copy engine
// (cp.async.bulk.global.shared::cta.bulk_group; UBLKCP in SASS), in the calling thread's current bulk
// group. dst and src 16-byte aligned, bytes a multiple of 16. sm_90+; nothing below.
__device__ __forceinline__ void bulk_store_shared_to_global(void* dst, uint32_t src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most kPending of this thread's bulk groups still read their shared-memory source
// (the source may then be overwritten; the global writes may still be in flight).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Waits until every bulk group of this thread has completed, its global writes included.
__device__ __forceinline__ void bulk_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// k(n) of DESIGN.md §2.1 in the same int64 arithmetic as kascade::budget_k (src/core/budget.cpp).
__device__ __forceinline__ int64_t budget_k_device(int64_t n, int64_t rho_ppm, int64_t k_min, int64_t k_round) {
  if (n <= 0) return 0;
  const int64_t ceil_rho_n = (n * rho_ppm + 999999) / 1000000;
  int64_t k = ceil_rho_n > k_min ? ceil_rho_n : k_min;
  k = (k + k_round - 1) / k_round * k_round;
  return k < n ? k : n;
}

}  // namespace kascade::cuda::detail
