// src/policy/cpu_fast_core.cpp — tiles, sgemm logits, vectorised exp and the blocked online-softmax
// attention of the CPU backend's fast kernels (cpu_fast_core.h).
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp (through the ops, against src/ref).
#include "policy/cpu_fast_core.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "ref/convert_rows.h"
#include "ref/views.h"

// OpenBLAS's thread control; weak so that another CBLAS (without it) still links.
#pragma weak openblas_set_num_threads

namespace kascade::policy::fast {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(v) as Cephes' expf: v = n·ln2 + r with |r| <= ln2/2 (n by round-to-nearest through the
// 1.5·2^23 shift), a degree-6 polynomial for exp(r), then the exponent bits of 2^n. Branch-free so
// that the loop in exp_inplace vectorises.
inline float exp_poly(float v) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 · 2^23
  constexpr float kLow = -87.33654f;     // below: exp underflows to subnormals, returned as 0
  const float x = std::min(std::max(v, kLow), 88.0f);
  const float shifted = x * kLog2e + kShift;
  const float n = shifted - kShift;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const float pow2 = std::bit_cast<float>((ni + 127) << 23);
  const float result = y * pow2;
  return v < kLow ? 0.0f : result;
}

}  // namespace

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
  });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void exp_inplace(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = exp_poly(x[i]);
}

void gather_rows(const void* base, const PagedKv& kv, int32_t b, int32_t g, const int32_t* positions, int64_t j0,
                 int32_t count, float* dst) {
  const int32_t d = kv.head_dim;
  for (int32_t jj = 0; jj < count; ++jj) {
    const int64_t pos = positions ? positions[j0 + jj] : j0 + jj;
    const int64_t off = ref::kv_offset(kv, b, pos, g);
    float* out = dst + static_cast<size_t>(jj) * d;
    if (kv.dtype == DType::kF32) {
      std::memcpy(out, static_cast<const float*>(base) + off, sizeof(float) * static_cast<size_t>(d));
    } else {
      ref::load_row_f32(base, kv.dtype, off, d, out);
    }
  }
}

void block_logits(const float* q, int32_t rows, const float* k, int32_t count, int32_t d, float scale, float* logits,
                  int32_t ld) {
  if (rows <= 0 || count <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, count, d, scale, q, d, k, d, 0.0f, logits, ld);
}

void attend_rows_fast(const PagedKv& kv, const FastAttendTask& task, float scale, FastScratch& scratch, float* o,
                      float* lse) {
  const int32_t d = kv.head_dim;
  const int32_t rows = task.num_rows;
  const bool want_o = o != nullptr;
  constexpr int32_t kBlock = kFastKeyBlock;

  int64_t max_limit = 0;
  for (int32_t r = 0; r < rows; ++r) max_limit = std::max(max_limit, task.limits[r]);

  scratch.k_tile.resize(static_cast<size_t>(kBlock) * d);
  if (want_o) scratch.v_tile.resize(static_cast<size_t>(kBlock) * d);
  scratch.logits.resize(static_cast<size_t>(rows) * kBlock);
  if (want_o) scratch.acc.assign(static_cast<size_t>(rows) * d, 0.0f);
  scratch.run_max.assign(static_cast<size_t>(rows), kNegInf);
  scratch.run_sum.assign(static_cast<size_t>(rows), 0.0f);
  float* acc = scratch.acc.data();
  float* run_max = scratch.run_max.data();
  float* run_sum = scratch.run_sum.data();

  for (int64_t j0 = 0; j0 < max_limit; j0 += kBlock) {
    const int32_t count = static_cast<int32_t>(std::min<int64_t>(kBlock, max_limit - j0));
    // Rows before r_lo attend no key of this tile (limits are non-decreasing in every caller; a
    // row after r_lo with a shorter limit is masked below).
    int32_t r_lo = 0;
    while (r_lo < rows && task.limits[r_lo] <= j0) ++r_lo;
    gather_rows(kv.k, kv, task.b, task.kv_group, task.positions, j0, count, scratch.k_tile.data());
    if (want_o) gather_rows(kv.v, kv, task.b, task.kv_group, task.positions, j0, count, scratch.v_tile.data());
    block_logits(task.q + static_cast<size_t>(r_lo) * d, rows - r_lo, scratch.k_tile.data(), count, d, scale,
                 scratch.logits.data() + static_cast<size_t>(r_lo) * kBlock, kBlock);
    for (int32_t r = r_lo; r < rows; ++r) {
      float* row = scratch.logits.data() + static_cast<size_t>(r) * kBlock;
      const int32_t valid = static_cast<int32_t>(std::clamp<int64_t>(task.limits[r] - j0, 0, count));
      std::fill(row + valid, row + count, 0.0f);  // masked keys weigh 0 in the PV product
      if (valid == 0) continue;
      float block_max = kNegInf;
#pragma omp simd reduction(max : block_max)
      for (int32_t jj = 0; jj < valid; ++jj) block_max = std::max(block_max, row[jj]);
      const float new_max = std::max(run_max[r], block_max);
      const float correction = run_max[r] == kNegInf ? 0.0f : std::exp(run_max[r] - new_max);
      for (int32_t jj = 0; jj < valid; ++jj) row[jj] -= new_max;
      exp_inplace(row, valid);  // now the unnormalised weights p_j
      float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
      for (int32_t jj = 0; jj < valid; ++jj) block_sum += row[jj];
      if (correction != 1.0f) {
        run_sum[r] *= correction;
        if (want_o) {
          float* acc_row = acc + static_cast<size_t>(r) * d;
          for (int32_t c = 0; c < d; ++c) acc_row[c] *= correction;
        }
      }
      run_sum[r] += block_sum;
      run_max[r] = new_max;
    }
    if (want_o && r_lo < rows) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows - r_lo, d, count, 1.0f,
                  scratch.logits.data() + static_cast<size_t>(r_lo) * kBlock, kBlock, scratch.v_tile.data(), d, 1.0f,
                  acc + static_cast<size_t>(r_lo) * d, d);
    }
  }

  for (int32_t r = 0; r < rows; ++r) {
    if (task.limits[r] <= 0) {
      lse[r] = kNegInf;
      if (want_o) std::fill_n(o + static_cast<size_t>(r) * d, d, 0.0f);
      continue;
    }
    lse[r] = run_max[r] + std::log(run_sum[r]);
    if (want_o) {
      const float inv = 1.0f / run_sum[r];
      const float* acc_row = acc + static_cast<size_t>(r) * d;
      float* o_row = o + static_cast<size_t>(r) * d;
      for (int32_t c = 0; c < d; ++c) o_row[c] = acc_row[c] * inv;
    }
  }
}

}  // namespace kascade::policy::fast
