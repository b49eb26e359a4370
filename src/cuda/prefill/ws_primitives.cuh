// src/cuda/prefill/ws_primitives.cuh — the sm_90a building blocks of the warp-specialised prefill
// mainloop (ws_attention_kernel.cuh): shared-memory mbarriers (init, arrive, parity wait, arrival on
// cp.async completion), TMA box loads, named barriers between warpgroups (the consumers' ping-pong), setmaxnreg (registers moved from the
// producer warpgroup to the consumers) and Q·Kᵀ of one warpgroup against a 128-key tile as
// wgmma.m64n128k16 with both operands read from shared memory through 128-byte-swizzle descriptors
// (prefill_device.cuh: sw128_descriptor, the swizzle<> layout, the m64n{64,128}k16 P·V wrappers).
// Every function is empty-bodied with __trap() outside sm_90a builds, and the host never launches a
// kernel using them there (ws_attention_kernels.cu checks the binary version).
// Device-only; tested through the kernels (tests/cuda/test_prefill_dense.cpp, test_prefill_select.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/prefill/prefill_device.cuh"

namespace kascade::cuda::prefill::ws {

// ---- mbarriers (64-bit objects in shared memory, addressed by their shared-window address)

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}

// One arrival (release semantics at CTA scope).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// Blocks until the phase of parity `parity` has completed (acquire semantics). A fresh barrier is
// in phase 0: waiting for parity 1 returns at once (the "previous" phase counts as complete).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#else
  __trap();
#endif
}

// One arrival that also raises the barrier's expected transaction count by `bytes` (the bytes a
// TMA copy completing on this barrier will deliver).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  __trap();
#endif
}

// Arrives on `bar` once every cp.async the calling thread issued before has completed, without
// raising the barrier's expected count (.noinc: the arrival counts toward the count it was
// initialised with). The producer never waits for its copies: the barrier completes when they land.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// TMA: the box at coordinates (c0, c1, c2) of the 3-D tensor map `map` (a __grid_constant__ kernel
// parameter) into shared memory at `dst`, completing `bytes` transactions on the mbarrier `bar`.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// ---- named barriers (ids 1..15; 0 is __syncthreads)

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- scheduling pin: work that must finish before a wgmma wait
//
// ptxas 13.0 sinks independent arithmetic (the softmax's MUFU.EX2) past `wgmma.wait_group`, so work
// meant to overlap an in-flight wgmma runs after it instead (docs/kernels/prefill.md, round 5).
// A shared-memory store does not move past the wait, and an instruction cannot issue before its
// operands exist: storing values that depend on that work, before the wait, keeps the work there.
// Lane 0 of each warp stores into the warp's own `slot` (nobody reads it; no two threads write the
// same bytes), kValues / 4 16-byte stores. The other lanes compute the same instructions (SIMT),
// so their work is pinned as well.
template <int kValues>
__device__ __forceinline__ void pin_before_wait(uint32_t slot, const float (&v)[kValues], bool lane0) {
  static_assert(kValues % 4 == 0, "whole 16-byte stores");
#pragma unroll
  for (int i = 0; i < kValues; i += 4) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.u32 p, %5, 0;\n@p st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n}\n" ::"r"(
            slot + 4u * i),
        "f"(v[i]), "f"(v[i + 1]), "f"(v[i + 2]), "f"(v[i + 3]), "r"(static_cast<uint32_t>(lane0))
        : "memory");
  }
}

// threadIdx.x / 128 through a shuffle from lane 0: ptxas then knows the value is the same in the
// whole warp and keeps what derives from it (the consumers' Q row offset, hence their wgmma
// descriptors) in uniform registers, instead of moving it over with R2UR before every wgmma.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// ---- register reallocation between warpgroups (all threads of the warpgroup execute it)

template <uint32_t kRegs>
__device__ __forceinline__ void release_registers() {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <uint32_t kRegs>
__device__ __forceinline__ void claim_registers() {
#ifdef KASCADE_PREFILL_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// ---- Q·Kᵀ: d (64 × 128, fp32) = A (64 × 16, descriptor) · B (16 × 128, descriptor) [+ d]

template <typename T>
struct WgmmaQk128;
#ifdef KASCADE_PREFILL_HAS_WGMMA
#define KASCADE_WS_QK128(TYPE, PTX_TYPE)                                                                  \
  template <>                                                                                            \
  struct WgmmaQk128<TYPE> {                                                                              \
    static __device__ __forceinline__ void mma(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,      \
                                               int accumulate) {                                         \
      asm volatile(                                                                                      \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                   \
          "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_TYPE "." PTX_TYPE " "                       \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"                                                        \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])                                                                                         \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate));                                                  \
    }                                                                                                    \
  };
KASCADE_WS_QK128(__half, "f16")
KASCADE_WS_QK128(__nv_bfloat16, "bf16")
#undef KASCADE_WS_QK128
#endif

}  // namespace kascade::cuda::prefill::ws
