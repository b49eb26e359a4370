// src/cuda/ops/small_m_linear_kernels.cu — the decode-step linear layer of small_m_linear.h.
//
// The outputs are cut into tiles of 16 consecutive weight rows (outputs n0 .. n0 + 15); a block of
// 8 warps computes a tile against every x row, and the grid is persistent: as many blocks as fit on
// the device at once, block b taking tiles b, b + gridDim.x, ... . In a tile, k is cut into units of
// 32 and warp w takes units w, w + 8, w + 16, ... (the block reads 512 contiguous bytes of each of its
// rows per step), four units per stage, the next stage's loads issued before the current stage's
// MMAs (up to eight units, 256 bytes of weights per lane, in flight) — also across tiles: the first
// stage of the block's next tile is in flight while the current tile's last MMAs and its reduction
// run, so a block never restarts its stream (a block per tile, as before, lost ~1 µs of loads at
// every start: gate_up ran at 85 % of the read roof against cuBLAS's 89 %, docs/perf.md). Per unit
// a lane loads 16 bytes of weight row n0 + gid, 16 of row n0 + gid + 8 and 16 of x row gid (lane =
// 4·gid + tig, k = 32·unit + 8·tig .. + 7), and the warp issues two mma.sync m16n8k16: the 16 k of
// an MMA are not consecutive, but A and B take the same k for the same logical index (lane tig's
// pairs 0 and 1 are the MMA's pairs tig and tig + 4, pairs 2 and 3 the next MMA's), and a dot
// product does not care which k is summed when. D = [16 weight rows] × [8 x rows, m of them real]
// in fp32; at the end of a tile the 8 warps' D are summed in shared memory in warp order (two
// buffers, alternating by tile, so one block barrier a tile suffices) and written (added) to y. The
// order of every sum depends on the shape alone, never on the grid or on timing.
// Rows past n and x rows past m read zeros (their loads are not issued) and are not written.
// Launched programmatically (small_m_linear's `programmatic`), a block first asks for the start of its
// first weight tile (rows n0 .. n0 + 15 are one contiguous [16, k] piece) to be brought into L2 —
// weights are never written, so this may overlap the previous kernel — and only then waits for the
// previous kernel and reads x (cuda/common/programmatic_launch.cuh).
// Tested by tests/cuda/test_ops_gemm.cpp (shapes with more tiles than the grid has blocks, and units
// fewer than the warps).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/common/cuda_status.h"
#include "cuda/common/device_primitives.cuh"
#include "cuda/common/plan_support.h"
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
constexpr int64_t kPrefetchChunk = 4096;    // bytes each: the first 64 KB of the first tile (k = 4096: half of it)

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
  __shared__ float partial[2][kWarps][kTileRows * 8];  // per tile parity, each warp's D: [weight row][x row]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane >> 2, tig = lane & 3;
  const int tiles = (n + kTileRows - 1) / kTileRows;
  const int units = (k + kUnitK - 1) / kUnitK;
  constexpr int kStep = kWarps * kUnroll;  // units between a warp's iterations
  const bool has_x = gid < m;
  const T* x_row = x + static_cast<int64_t>(has_x ? gid : 0) * k + 8 * tig;
  if (warp == 0 && lane < kPrefetchLanes) {  // before the wait: weights only (the block's first tile)
    const int n0 = blockIdx.x * kTileRows;
    const int64_t tile_bytes = static_cast<int64_t>(min(kTileRows, n - n0)) * k * static_cast<int64_t>(sizeof(T));
    const int64_t begin = lane * kPrefetchChunk;  // tile_bytes and begin are multiples of 16 (k % 8 == 0)
    if (begin < tile_bytes)
      detail::prefetch_l2_bulk(reinterpret_cast<const char*>(w + static_cast<int64_t>(n0) * k) + begin,
                               static_cast<uint32_t>(min(kPrefetchChunk, tile_bytes - begin)));
  }
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();

  // Loads units u0, u0 + 8, ... of this warp in tile `tile` (zeros past k and past n).
  auto load = [&](Stage& st, int tile, int u0) {
    const int row_lo = tile * kTileRows + gid, row_hi = row_lo + 8;
    const bool has_lo = row_lo < n, has_hi = row_hi < n;
    const T* w_lo = w + static_cast<int64_t>(has_lo ? row_lo : 0) * k + 8 * tig;
    const T* w_hi = w + static_cast<int64_t>(has_hi ? row_hi : 0) * k + 8 * tig;
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
  // The block's i-th tile: the warps' D summed in warp order and written (added) to y; d restarts at 0.
  int finished = 0;
  auto finish_tile = [&](int tile) {
    float (*part)[kTileRows * 8] = partial[finished & 1];
    // d[0], d[1]: weight row gid, x rows 2·tig, 2·tig + 1; d[2], d[3]: weight row gid + 8.
    part[warp][gid * 8 + 2 * tig] = d[0];
    part[warp][gid * 8 + 2 * tig + 1] = d[1];
    part[warp][(gid + 8) * 8 + 2 * tig] = d[2];
    part[warp][(gid + 8) * 8 + 2 * tig + 1] = d[3];
    d[0] = d[1] = d[2] = d[3] = 0.0f;
    // One barrier a tile: this tile's buffer is rewritten two tiles later, after the next tile's barrier,
    // which every thread reaches only after its sums below.
    __syncthreads();
    ++finished;
    if (threadIdx.x < kTileRows * 8) {
      const int n0 = tile * kTileRows;
      const int r = threadIdx.x % kTileRows, c = threadIdx.x / kTileRows;  // consecutive threads: consecutive outputs
      if (n0 + r < n && c < m) {
        float sum = 0.0f;
#pragma unroll
        for (int v = 0; v < kWarps; ++v) sum += part[v][r * 8 + c];
        TOut* out = y + static_cast<int64_t>(c) * n + n0 + r;
        if constexpr (std::is_same_v<TOut, float>) {
          *out = accumulate ? *out + sum : sum;
        } else {
          *out = Mma::from_float(accumulate ? static_cast<float>(*out) + sum : sum);
        }
      }
    }
  };
  if (warp >= units) {  // warp-uniform: no unit of any tile is this warp's; it still takes part in the sums
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) finish_tile(tile);
    return;
  }
  // The warp's (tile, first unit) sequence, flattened over the block's tiles; two stages in turn, the
  // next item's loads issued before this one's MMAs, across tile boundaries.
  auto advance = [&](int& tile, int& u0) {
    u0 += kStep;
    if (u0 >= units) {
      u0 = warp;
      tile += gridDim.x;
    }
  };
  int tile = blockIdx.x, u0 = warp;
  if (tile >= tiles) return;  // the host never launches more blocks than tiles
  // One item: the next item's loads into `next`, this item's MMAs from `cur`, the tile's sums at its
  // end. False once the block's last tile is done.
  auto step = [&](const Stage& cur, Stage& next) {
    int next_tile = tile, next_u0 = u0;
    advance(next_tile, next_u0);
    if (next_tile < tiles) load(next, next_tile, next_u0);
    multiply(cur);
    if (next_tile != tile) finish_tile(tile);
    tile = next_tile;
    u0 = next_u0;
    return tile < tiles;
  };
  Stage a, b;  // two stages in turn
  load(a, tile, u0);
  while (step(a, b) && step(b, a)) {
  }
}

// Blocks of one instantiation that fit on a multiprocessor (registers and threads; no dynamic shared memory).
template <typename Kernel>
int resident_blocks_per_sm(Kernel kernel) {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return blocks > 0 ? blocks : 1;
}

template <typename T>
Status launch_for_input(const void* x, const void* w, void* y, int m, int n, int k, DType out_dtype, bool accumulate,
                        cudaStream_t stream, bool programmatic) {
  // Persistent grid: every block resident at once, never more blocks than tiles. The occupancy of an
  // instantiation is the same on every device of the build's architecture (asked once); the number of
  // multiprocessors is the current device's.
  static const int per_sm_f32 = resident_blocks_per_sm(small_m_linear_kernel<T, float>);
  static const int per_sm_t = resident_blocks_per_sm(small_m_linear_kernel<T, T>);
  KC_ASSIGN_OR_RETURN(const int32_t sms, detail::current_multiprocessor_count());
  const int tiles = (n + kTileRows - 1) / kTileRows;
  const int per_sm = out_dtype == DType::kF32 ? per_sm_f32 : per_sm_t;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, static_cast<int64_t>(per_sm) * sms)));
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
