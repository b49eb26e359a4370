// src/ref/attention_core.cpp — online-softmax attention of a block of query-head rows over a list
// of keys (attention_core.h). Keys are gathered from the paged cache into fp32 blocks of
// kKeyBlock rows, each converted once and consumed by every row of the task.
// Tested through the ops that use it (tests/unit/ref/test_dense_attention.cpp and friends).
#include "ref/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ref/convert_rows.h"
#include "ref/views.h"

namespace kascade::ref::detail {
namespace {

// logits[jj] = scale · q·k_jj for the first `count` rows of k_block, four keys per pass so that
// each loaded element of q serves four products.
// q: [d]; k_block: [count, d]; logits: [count].
void logits_of_block(const float* q, const float* k_block, int32_t count, int32_t d, float scale, float* logits) {
  int32_t jj = 0;
  for (; jj + 4 <= count; jj += 4) {
    const float* k0 = k_block + static_cast<size_t>(jj) * d;
    const float* k1 = k0 + d;
    const float* k2 = k1 + d;
    const float* k3 = k2 + d;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int32_t c = 0; c < d; ++c) {
      s0 += q[c] * k0[c];
      s1 += q[c] * k1[c];
      s2 += q[c] * k2[c];
      s3 += q[c] * k3[c];
    }
    logits[jj] = scale * s0;
    logits[jj + 1] = scale * s1;
    logits[jj + 2] = scale * s2;
    logits[jj + 3] = scale * s3;
  }
  for (; jj < count; ++jj) logits[jj] = scale * dot_f32(q, k_block + static_cast<size_t>(jj) * d, d);
}

// acc += sum_jj p[jj] · v_jj over the first `count` rows of v_block, four rows per pass so that
// each element of acc is loaded and stored once per four keys.
// p: [count]; v_block: [count, d]; acc: [d].
void accumulate_values(const float* p, const float* v_block, int32_t count, int32_t d, float* acc) {
  int32_t jj = 0;
  for (; jj + 4 <= count; jj += 4) {
    const float* v0 = v_block + static_cast<size_t>(jj) * d;
    const float* v1 = v0 + d;
    const float* v2 = v1 + d;
    const float* v3 = v2 + d;
    const float p0 = p[jj], p1 = p[jj + 1], p2 = p[jj + 2], p3 = p[jj + 3];
    for (int32_t c = 0; c < d; ++c) acc[c] += (p0 * v0[c] + p1 * v1[c]) + (p2 * v2[c] + p3 * v3[c]);
  }
  for (; jj < count; ++jj) {
    const float* v = v_block + static_cast<size_t>(jj) * d;
    for (int32_t c = 0; c < d; ++c) acc[c] += p[jj] * v[c];
  }
}

}  // namespace

void attend_rows(const PagedKv& kv, const AttendTask& task, float scale, float* o, float* lse) {
  const int32_t d = kv.head_dim;
  const int32_t rows = task.num_rows;
  const bool want_o = o != nullptr;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  int64_t max_limit = 0;
  for (int32_t r = 0; r < rows; ++r) max_limit = std::max(max_limit, task.limits[r]);

  std::vector<float> k_block(static_cast<size_t>(kKeyBlock) * d);           // [kKeyBlock, d]
  std::vector<float> v_block(want_o ? static_cast<size_t>(kKeyBlock) * d : 0);  // [kKeyBlock, d]
  std::vector<float> acc(want_o ? static_cast<size_t>(rows) * d : 0, 0.0f);     // [rows, d]
  std::vector<float> run_max(static_cast<size_t>(rows), kNegInf);             // [rows]
  std::vector<float> run_sum(static_cast<size_t>(rows), 0.0f);                // [rows]
  float logits[kKeyBlock];

  for (int64_t j0 = 0; j0 < max_limit; j0 += kKeyBlock) {
    const int32_t block = static_cast<int32_t>(std::min<int64_t>(kKeyBlock, max_limit - j0));
    for (int32_t jj = 0; jj < block; ++jj) {
      const int64_t pos = task.positions ? task.positions[j0 + jj] : j0 + jj;
      const int64_t off = kv_offset(kv, task.b, pos, task.kv_group);
      load_row_f32(kv.k, kv.dtype, off, d, k_block.data() + static_cast<size_t>(jj) * d);
      if (want_o) load_row_f32(kv.v, kv.dtype, off, d, v_block.data() + static_cast<size_t>(jj) * d);
    }
    for (int32_t r = 0; r < rows; ++r) {
      const int32_t count = static_cast<int32_t>(std::min<int64_t>(block, task.limits[r] - j0));
      if (count <= 0) continue;
      logits_of_block(task.q + static_cast<size_t>(r) * d, k_block.data(), count, d, scale, logits);
      float block_max = kNegInf;
      for (int32_t jj = 0; jj < count; ++jj) block_max = std::max(block_max, logits[jj]);
      const float new_max = std::max(run_max[r], block_max);
      const float correction = run_max[r] == kNegInf ? 0.0f : std::exp(run_max[r] - new_max);
      float* acc_row = want_o ? acc.data() + static_cast<size_t>(r) * d : nullptr;
      if (correction != 1.0f) {
        run_sum[r] *= correction;
        if (want_o) {
          for (int32_t c = 0; c < d; ++c) acc_row[c] *= correction;
        }
      }
      float block_sum = 0.0f;
      for (int32_t jj = 0; jj < count; ++jj) {
        logits[jj] = std::exp(logits[jj] - new_max);  // now the unnormalised weight p_j
        block_sum += logits[jj];
      }
      if (want_o) accumulate_values(logits, v_block.data(), count, d, acc_row);
      run_sum[r] += block_sum;
      run_max[r] = new_max;
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
      const float denominator = run_sum[r];
      const float* acc_row = acc.data() + static_cast<size_t>(r) * d;
      float* o_row = o + static_cast<size_t>(r) * d;
      for (int32_t c = 0; c < d; ++c) o_row[c] = acc_row[c] / denominator;
    }
  }
}

}  // namespace kascade::ref::detail
