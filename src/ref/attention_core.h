// src/ref/attention_core.h — the one inner loop of every CPU attention op: a block of query-head
// rows attending prefixes of one list of keys of one KV head, with an online softmax over blocks of
// keys (fp32 accumulation). Dense, sparse decode, sparse prefill and the lse pass of the pooled
// scores all reduce to this: they only differ in which keys they list and how long each row's
// prefix is. Internal to src/ref (not part of the public op interface); AttendTask is also the task
// of the CPU backend's fast core (src/policy/cpu_fast_core.h).
// Tested through the ops it serves (tests/unit/ref/test_dense_attention.cpp,
// test_sparse_attention.cpp, test_scores_ref.cpp) against fp64 implementations in the tests.
#pragma once

#include <cstdint>

#include "kascade/attention.h"

namespace kascade::ref::detail {

// Keys per block of the online softmax: K and V blocks of 64 rows stay in L1/L2 while every row of
// the task consumes them.
inline constexpr int32_t kKeyBlock = 64;

// Whether `work` multiply-adds justify an OpenMP parallel region: starting one costs microseconds,
// and far more on a machine whose cores are busy, so small calls (a decode step at short context,
// one prefill tile) run on the calling thread.
inline bool worth_parallel(int64_t work) { return work >= (int64_t{1} << 21); }

// fp32 dot product of two contiguous rows.
inline float dot_f32(const float* a, const float* b, int32_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int32_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// One unit of attention work: `num_rows` query-head rows of sequence b that read KV head
// `kv_group`. Row r attends the first limits[r] keys of the list (0 <= limits[r] <= num_keys).
struct AttendTask {
  int32_t b = 0;
  int32_t kv_group = 0;
  const int32_t* positions = nullptr;  // [num_keys] key positions, or null for 0 .. num_keys-1
  int64_t num_keys = 0;
  int32_t num_rows = 0;
  const float* q = nullptr;            // [num_rows, head_dim] fp32 query rows
  const int64_t* limits = nullptr;     // [num_rows]
};

// Writes, for each row, o = sum_j softmax_j(scale · q·k_j) v_j and lse = log sum_j exp(scale · q·k_j)
// over the row's keys. A row with limit 0 gets o = 0, lse = -inf. With o == null only lse is
// computed (V is never read).
// o: [num_rows, head_dim] fp32 or null; lse: [num_rows] fp32.
// The caller has validated the views: every position is < kv.kv_lens[b] and mapped by the block table.
void attend_rows(const PagedKv& kv, const AttendTask& task, float scale, float* o, float* lse);

}  // namespace kascade::ref::detail
