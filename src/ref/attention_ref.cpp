// src/ref/attention_ref.cpp — CPU reference attention (attention_ref.h): dense causal, sparse decode,
// sparse prefill and the merge of partial states. Each op validates its views, cuts the call into
// independent blocks of (queries × heads of one KV group) that share one list of keys
// (attention_blocks.h, shared with the CPU backend's fast kernels), and runs the
// blocks in parallel (OpenMP) through detail::attend_rows. The keys of an index row are processed
// in ascending position order, so the result does not depend on the order of a row's entries.
// Tested by tests/unit/ref/test_dense_attention.cpp, test_sparse_attention.cpp and
// test_merge_states.cpp (against fp64 implementations written in the tests).
#include "ref/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ref/attention_blocks.h"
#include "ref/attention_core.h"
#include "ref/views.h"

namespace kascade::ref {
namespace {

// Queries per dense work block: 32 queries × g heads share every converted key block.
constexpr int32_t kDenseQueryBlock = 32;

// Loads the block's queries, attends `positions` (null: 0 .. num_keys-1) with per-query prefix
// lengths `query_limits`, and writes o and lse.
// positions: [num_keys]; query_limits: [blk.nq].
void attend_block(const QueryBatch& q, const PagedKv& kv, float scale, const AttentionOutput& out,
                  const AttentionBlock& blk, const int32_t* positions, int64_t num_keys, const int64_t* query_limits) {
  const int32_t d = q.head_dim;
  const int32_t rows = blk.nq * blk.nh;
  std::vector<float> q_rows(static_cast<size_t>(rows) * d);  // [nq, nh, d]
  std::vector<int64_t> limits(static_cast<size_t>(rows));    // [nq, nh]
  load_block_queries(q, blk, query_limits, q_rows.data(), limits.data());
  detail::AttendTask task;
  task.b = blk.b;
  task.kv_group = blk.kv_group;
  task.positions = positions;
  task.num_keys = num_keys;
  task.num_rows = rows;
  task.q = q_rows.data();
  task.limits = limits.data();
  std::vector<float> o_rows(static_cast<size_t>(rows) * d);  // [nq, nh, d]
  std::vector<float> lse_rows(static_cast<size_t>(rows));    // [nq, nh]
  detail::attend_rows(kv, task, scale, o_rows.data(), lse_rows.data());
  store_block_outputs(q, blk, o_rows.data(), lse_rows.data(), out.o, out.dtype, out.lse);
}

}  // namespace

Status dense_attention_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_attention_call(q, kv, params, out));
  const std::vector<AttentionBlock> blocks = dense_blocks(q, kv, kDenseQueryBlock);
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(total_work(blocks)))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const AttentionBlock& blk = blocks[n];
    int64_t limits[kDenseQueryBlock];
    for (int32_t qi = 0; qi < blk.nq; ++qi) limits[qi] = query_position(q, kv, blk.b, blk.i0 + qi) + 1;
    attend_block(q, kv, params.scale, out, blk, nullptr, limits[blk.nq - 1], limits);
  }
  return ok_status();
}

Status sparse_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_sparse_decode_call(q, kv, params, rows, head_map, out));
  const std::vector<AttentionBlock> blocks = sparse_decode_blocks(q, kv, rows, head_map);
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(total_work(blocks)))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const AttentionBlock& blk = blocks[n];
    std::vector<int32_t> positions;  // [row_len]
    decode_block_keys(rows, blk, positions);
    const int64_t limit = static_cast<int64_t>(positions.size());
    attend_block(q, kv, params.scale, out, blk, positions.data(), limit, &limit);
  }
  return ok_status();
}

Status sparse_prefill_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_sparse_prefill_call(q, kv, params, rows, head_map, out));
  const std::vector<AttentionBlock> blocks = sparse_prefill_blocks(q, kv, rows, head_map);
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(total_work(blocks)))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const AttentionBlock& blk = blocks[n];
    std::vector<int32_t> positions;  // the row's keys ascending, then (include_local) s_t .. last query
    std::vector<int64_t> limits;     // [nq]
    prefill_block_keys(q, kv, rows, blk, positions, limits);
    attend_block(q, kv, params.scale, out, blk, positions.data(), static_cast<int64_t>(positions.size()),
                 limits.data());
  }
  return ok_status();
}

Status merge_states_ref(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int64_t rows,
                        int32_t head_dim, float* o, float* lse) {
  KC_CHECK_ARG(rows >= 0, "rows is ", rows, "; expected >= 0");
  KC_CHECK_ARG(head_dim >= 1, "head_dim is ", head_dim, "; expected >= 1");
  if (rows == 0) return ok_status();
  KC_CHECK_ARG(o_a != nullptr, "o_a is null");
  KC_CHECK_ARG(lse_a != nullptr, "lse_a is null");
  KC_CHECK_ARG(o_b != nullptr, "o_b is null");
  KC_CHECK_ARG(lse_b != nullptr, "lse_b is null");
  KC_CHECK_ARG(o != nullptr, "o is null");
  KC_CHECK_ARG(lse != nullptr, "lse is null");
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static) if (detail::worth_parallel(rows * head_dim))
  for (int64_t r = 0; r < rows; ++r) {
    const float la = lse_a[r];
    const float lb = lse_b[r];
    const size_t base = static_cast<size_t>(r) * head_dim;
    if (la == kNegInf && lb == kNegInf) {
      std::fill_n(o + base, head_dim, 0.0f);
      lse[r] = kNegInf;
      continue;
    }
    if (la == kNegInf || lb == kNegInf) {  // one empty state: the other one, exactly
      const float* src = la == kNegInf ? o_b + base : o_a + base;
      for (int32_t c = 0; c < head_dim; ++c) o[base + c] = src[c];
      lse[r] = la == kNegInf ? lb : la;
      continue;
    }
    const float m = std::max(la, lb);
    const float wa = std::exp(la - m);
    const float wb = std::exp(lb - m);
    const float total = wa + wb;
    for (int32_t c = 0; c < head_dim; ++c) o[base + c] = (o_a[base + c] * wa + o_b[base + c] * wb) / total;
    lse[r] = m + std::log(total);
  }
  return ok_status();
}

}  // namespace kascade::ref
