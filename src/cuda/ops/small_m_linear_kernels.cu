// src/cuda/ops/small_m_linear_kernels.cu — the decode-step linear layer of small_m_linear.h.
//
// A block of 8 warps owns 16 consecutive weight rows (outputs n0 .. n0 + 15) and every x row; k is
// cut into units of 32 and warp w takes units w, w + 8, w + 16, ... (the block reads 512 contiguous
// bytes of each of its rows per step), four units per stage, the next stage's loads issued before the
// current stage's MMAs (up to eight units, 256 bytes of weights per lane, in flight). Per unit
// a lane loads 16 bytes of weight row n0 + gid, 16 of row n0 + gid + 8 and 16 of x row gid (lane =
// 4·gid + tig, k = 32·unit + 8·tig .. + 7), and the warp issues two mma.sync m16n8k16: the 16 k of
// an MMA are not consecutive, but A and B take the same k for the same logical index (lane tig's
// pairs 0 and 1 are the MMA's pairs tig and tig + 4, pairs 2 and 3 the next MMA's), and a dot
// product does not care which k is summed when. D = [16 weight rows] × [8 x rows, m of them real]
// in fp32; the 8 warps' D are summed in shared memory in warp order and written (added) to y.
// Rows past n and x rows past m read zeros (their loads are not issued) and are not written.
// Launched programmatically (small_m_linear's `programmatic`), a block first asks for the start of its
// weight tile (rows n0 .. n0 + 15 are one contiguous [16, k] piece) to be brought into L2 — weights are
// never written, so this may overlap the previous kernel — and only then waits for the previous kernel
// and reads x (cuda/common/programmatic_launch.cuh).
// Tested by tests/cuda/test_ops_gemm.cpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/common/cuda_status.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/common/programmatic_launch.cuh"
#include "cuda/ops/small_m_linear.h"

namespace kascade::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows (outputs) of a block
constexpr int kUnitK = 32;     // k per warp step: 4 lanes × 8 elements
constexpr int kUnroll = 4;     // units per warp and stage, their loads in flight together (two stages)
constexpr int kPrefetchLanes = 16;          // lanes of warp 0 that prefetch the block's weight tile
constexpr int64_t kPrefetchChunk = 4096;    // bytes each: the first 64 KB of the tile (k = 4096: half of it)

// 16 bytes from global memory, or zeros when !pred. Volatile asm, like the MMAs: the compiler keeps
// every load of a stage before the MMAs that follow it in program order (plain loads it interleaved
// with the MMAs, leaving one unit in flight). kStreaming: weights, read once (ld.global.cs);
// otherwise x, read by every block (ld.global.nc).
template <bool kStreaming>
__device__ __forceinline__ uint4 load16(const void* p, bool pred) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kStreaming) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
        : "l"(p), "r"(static_cast<int>(pred)));
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
        : "l"(p), "r"(static_cast<int>(pred)));
  }
  return v;
}

// A lane's pieces of kUnroll units: weight rows gid and gid + 8, x row gid.
struct Stage {
  uint4 w_lo[kUnroll], w_hi[kUnroll], x[kUnroll];
};

template <typename T, typename TOut>
__global__ void __launch_bounds__(kThreads) small_m_linear_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                  TOut* __restrict__ y, int m, int n, int k,
                                                                  bool accumulate) {
  using Mma = detail::Mma16<T>;
  __shared__ float partial[kWarps][kTileRows * 8];  // each warp's D: [weight row][x row]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane >> 2, tig = lane & 3;
  const int n0 = blockIdx.x * kTileRows;
  const int row_lo = n0 + gid, row_hi = n0 + gid + 8;
  const bool has_lo = row_lo < n, has_hi = row_hi < n, has_x = gid < m;
  const T* w_lo = w + static_cast<int64_t>(has_lo ? row_lo : 0) * k + 8 * tig;
  const T* w_hi = w + static_cast<int64_t>(has_hi ? row_hi : 0) * k + 8 * tig;
  const T* x_row = x + static_cast<int64_t>(has_x ? gid : 0) * k + 8 * tig;
  const int units = (k + kUnitK - 1) / kUnitK;
  if (warp == 0 && lane < kPrefetchLanes) {  // before the wait: weights only
    const int64_t tile_bytes = static_cast<int64_t>(min(kTileRows, n - n0)) * k * static_cast<int64_t>(sizeof(T));
    const int64_t begin = lane * kPrefetchChunk;  // tile_bytes and begin are multiples of 16 (k % 8 == 0)
    if (begin < tile_bytes)
      detail::prefetch_l2_bulk(reinterpret_cast<const char*>(w + static_cast<int64_t>(n0) * k) + begin,
                               static_cast<uint32_t>(min(kPrefetchChunk, tile_bytes - begin)));
  }
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();
  constexpr int kStep = kWarps * kUnroll;  // units between a warp's iterations

  // Loads units u0, u0 + 8, ... of this warp (zeros past k).
  auto load = [&](Stage& st, int u0) {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int k0 = (u0 + j * kWarps) * kUnitK;  // the lane's 8 elements: k0 + 8·tig .. (k % 8 == 0: all or none)
      const bool in_k = k0 + 8 * tig < k;
      st.w_lo[j] = load16<true>(w_lo + k0, in_k && has_lo);
      st.w_hi[j] = load16<true>(w_hi + k0, in_k && has_hi);
      st.x[j] = load16<false>(x_row + k0, in_k && has_x);
    }
  };
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Pairs 0, 1 of the lane's 8 elements are the MMA's logical k-pairs tig, tig + 4; then pairs 2, 3.
  auto multiply = [&](const Stage& st) {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      Mma::mma(d, st.w_lo[j].x, st.w_hi[j].x, st.w_lo[j].y, st.w_hi[j].y, st.x[j].x, st.x[j].y);
      Mma::mma(d, st.w_lo[j].z, st.w_hi[j].z, st.w_lo[j].w, st.w_hi[j].w, st.x[j].z, st.x[j].w);
    }
  };
  // Two stages in turn: the next iteration's loads are issued before this one's MMAs.
  Stage a, b;
  if (warp < units) {  // warp-uniform
    load(a, warp);
    for (int u0 = warp;;) {
      load(b, u0 + kStep);
      multiply(a);
      if (u0 + kStep >= units) break;
      load(a, u0 + 2 * kStep);
      multiply(b);
      if (u0 + 2 * kStep >= units) break;
      u0 += 2 * kStep;
    }
  }
  // d[0], d[1]: weight row gid, x rows 2·tig, 2·tig + 1; d[2], d[3]: weight row gid + 8.
  partial[warp][gid * 8 + 2 * tig] = d[0];
  partial[warp][gid * 8 + 2 * tig + 1] = d[1];
  partial[warp][(gid + 8) * 8 + 2 * tig] = d[2];
  partial[warp][(gid + 8) * 8 + 2 * tig + 1] = d[3];
  __syncthreads();
  if (threadIdx.x < kTileRows * 8) {
    const int r = threadIdx.x % kTileRows, c = threadIdx.x / kTileRows;  // consecutive threads: consecutive outputs
    if (n0 + r < n && c < m) {
      float sum = 0.0f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) sum += partial[v][r * 8 + c];
      TOut* out = y + static_cast<int64_t>(c) * n + n0 + r;
      if constexpr (std::is_same_v<TOut, float>) {
        *out = accumulate ? *out + sum : sum;
      } else {
        *out = Mma::from_float(accumulate ? static_cast<float>(*out) + sum : sum);
      }
    }
  }
}

template <typename T>
Status launch_for_input(const void* x, const void* w, void* y, int m, int n, int k, DType out_dtype, bool accumulate,
                        cudaStream_t stream, bool programmatic) {
  const dim3 grid(static_cast<unsigned>((n + kTileRows - 1) / kTileRows));
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  const cudaError_t error =
      out_dtype == DType::kF32
          ? detail::launch_kernel(programmatic, small_m_linear_kernel<T, float>, grid, dim3(kThreads), 0, stream, xt, wt,
                                  static_cast<float*>(y), m, n, k, accumulate)
          : detail::launch_kernel(programmatic, small_m_linear_kernel<T, T>, grid, dim3(kThreads), 0, stream, xt, wt,
                                  static_cast<T*>(y), m, n, k, accumulate);
  return cuda_status(error, "launch of small_m_linear_kernel");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool small_m_linear_supports(const void* x, const void* w, int64_t m, int64_t n, int64_t k, DType in_dtype,
                             DType out_dtype) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  return m >= 1 && m <= kSmallMLinearMaxRows && n >= 1 && n <= kMax && k >= 8 && k <= kMax && k % 8 == 0 &&
         x != nullptr && w != nullptr && aligned16(x) && aligned16(w) &&
         (in_dtype == DType::kBF16 || in_dtype == DType::kF16) && (out_dtype == in_dtype || out_dtype == DType::kF32);
}

Status small_m_linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                      DType out_dtype, bool accumulate, cudaStream_t stream, bool programmatic) {
  KC_CHECK_ARG(y != nullptr, "small_m_linear: y is null");
  KC_CHECK_ARG(small_m_linear_supports(x, w, m, n, k, in_dtype, out_dtype), "small_m_linear: m = ", m, " (1..",
               kSmallMLinearMaxRows, "), n = ", n, ", k = ", k, " (a multiple of 8, >= 8), ", dtype_name(in_dtype),
               " -> ", dtype_name(out_dtype), " (bf16 / f16 in, the input dtype or f32 out), x and w 16-byte aligned: ",
               "not taken");
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (in_dtype == DType::kBF16)
    return launch_for_input<__nv_bfloat16>(x, w, y, mi, ni, ki, out_dtype, accumulate, stream, programmatic);
  return launch_for_input<__half>(x, w, y, mi, ni, ki, out_dtype, accumulate, stream, programmatic);
}

}  // namespace kascade::cuda
