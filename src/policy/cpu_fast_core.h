// src/policy/cpu_fast_core.h — the GEMM-shaped inner pieces of the CPU backend's fast attention
// kernels (cpu_fast_attention.h, cpu_fast_select.h): key/value tiles gathered from the paged
// cache into contiguous fp32 blocks, logits of a block of query rows against such a tile as one
// single-threaded sgemm (OpenBLAS), a vectorised exp, and the blocked online-softmax attention of a
// block of query rows over a list of keys (QKᵀ and PV as sgemm calls on tiles of kFastKeyBlock
// keys). Callers parallelise over independent blocks (OpenMP); nothing here starts threads, so
// every result depends only on its own block, never on the thread count.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp (through the ops, against src/ref).
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/attention.h"
#include "ref/attention_core.h"

namespace kascade::policy::fast {

// Keys per tile of the online softmax and of the score pass: a [rows, 256] logit tile and the
// [256, d] K and V tiles stay in L2 while the sgemm calls consume them.
inline constexpr int32_t kFastKeyBlock = 256;

// Whether `work` multiply-adds justify an OpenMP parallel region (one costs microseconds, more on
// a busy machine): small calls (a decode step at short context) run on the calling thread.
inline bool worth_parallel(int64_t work) { return work >= (int64_t{1} << 20); }

// Makes OpenBLAS single-threaded (once per process): the kernels call sgemm from inside OpenMP
// threads, and two thread pools spinning against each other slow a small machine down
// (docs/perf.md, CPU section). Same policy as src/ref/ops_ref.cpp.
void use_single_threaded_blas();

// x[i] = exp(x[i]) for i < n, vectorised (AVX-512 / AVX2 clones picked at run time); within 2 ulp
// of std::exp over the finite range, 0 below -87.3, +inf above 88.7.
void exp_inplace(float* x, int64_t n);

// dst[jj] = K (or V) row of key positions[j0 + jj] (positions null: j0 + jj) of KV head g of
// sequence b, for jj < count, as fp32. dst: [count, d].
void gather_rows(const void* base, const PagedKv& kv, int32_t b, int32_t g, const int32_t* positions, int64_t j0,
                 int32_t count, float* dst);

// logits[r][jj] = scale · q_r · k_jj for r < rows, jj < count. q: [rows, d]; k: [count, d];
// logits: [rows, ld] (ld >= count). One sgemm.
void block_logits(const float* q, int32_t rows, const float* k, int32_t count, int32_t d, float scale, float* logits,
                  int32_t ld);

// One unit of attention work: src/ref's AttendTask (`num_rows` query-head rows of sequence b
// reading KV head `kv_group`; row r attends the first limits[r] keys of the list).
using FastAttendTask = ref::detail::AttendTask;

// Reused scratch of one thread (grown on demand, never shrunk within a call).
struct FastScratch {
  std::vector<float> k_tile;  // [kFastKeyBlock, d]
  std::vector<float> v_tile;  // [kFastKeyBlock, d]
  std::vector<float> logits;  // [rows, kFastKeyBlock]
  std::vector<float> acc;     // [rows, d]
  std::vector<float> run_max; // [rows]
  std::vector<float> run_sum; // [rows]
};

// o[r] = sum_j softmax_j(scale · q_r·k_j) v_j and lse[r] = log sum_j exp(scale · q_r·k_j) over the
// row's keys, in tiles of kFastKeyBlock keys (online softmax). A row with limit 0 gets o = 0,
// lse = -inf. With o == null only lse is computed (V is never read).
// o: [num_rows, head_dim] fp32 or null; lse: [num_rows] fp32. The caller has validated the views.
void attend_rows_fast(const PagedKv& kv, const FastAttendTask& task, float scale, FastScratch& scratch, float* o,
                      float* lse);

}  // namespace kascade::policy::fast
