// src/policy/cpu_fast_attention.cpp — fast dense / sparse attention of the CPU backend
// (cpu_fast_attention.h): validation and the blocks of (queries × heads of one KV group) shared
// with src/ref (ref/attention_blocks.h), run in parallel, each through fast::attend_rows_fast. The
// keys of an index row are attended in ascending position order, so results do not depend on the
// order of a row's entries.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp.
#include "policy/cpu_fast_attention.h"

#include <algorithm>
#include <vector>

#include "policy/cpu_fast_core.h"
#include "ref/attention_blocks.h"
#include "ref/views.h"

namespace kascade::policy {
namespace {

// Queries per dense block: 64 queries × g heads share every gathered key tile.
constexpr int32_t kDenseQueryBlock = 64;

using Block = ref::AttentionBlock;

// Per-thread state of a block: fp32 queries, per-row limits, outputs and the core's scratch.
struct BlockScratch {
  std::vector<float> q_rows;    // [nq, nh, d]
  std::vector<int64_t> limits;  // [nq, nh]
  std::vector<float> o_rows;    // [nq, nh, d]
  std::vector<float> lse_rows;  // [nq, nh]
  std::vector<int32_t> positions;
  std::vector<int64_t> query_limits;  // [nq] (sparse prefill)
  fast::FastScratch core;
};

// Loads the block's queries, attends `positions` (null: 0 .. num_keys-1) with per-query prefix
// lengths `query_limits`, and writes o (when out_o is non-null) and lse (when lse is non-null).
// positions: [num_keys]; query_limits: [blk.nq]; lse: [total_q, H].
void attend_block(const QueryBatch& q, const PagedKv& kv, float scale, void* out_o, DType out_dtype, float* lse,
                  const Block& blk, const int32_t* positions, int64_t num_keys, const int64_t* query_limits,
                  BlockScratch& s) {
  const int32_t d = q.head_dim;
  const int32_t rows = blk.nq * blk.nh;
  s.q_rows.resize(static_cast<size_t>(rows) * d);
  s.limits.resize(static_cast<size_t>(rows));
  ref::load_block_queries(q, blk, query_limits, s.q_rows.data(), s.limits.data());
  fast::FastAttendTask task;
  task.b = blk.b;
  task.kv_group = blk.kv_group;
  task.positions = positions;
  task.num_keys = num_keys;
  task.num_rows = rows;
  task.q = s.q_rows.data();
  task.limits = s.limits.data();
  s.o_rows.resize(out_o != nullptr ? static_cast<size_t>(rows) * d : 0);
  s.lse_rows.resize(static_cast<size_t>(rows));
  fast::attend_rows_fast(kv, task, scale, s.core, out_o != nullptr ? s.o_rows.data() : nullptr, s.lse_rows.data());
  ref::store_block_outputs(q, blk, s.o_rows.data(), s.lse_rows.data(), out_o, out_dtype, lse);
}

// Runs body(block, scratch) over the blocks, largest first, in parallel when the call is big
// enough. Each block writes its own outputs only, so the schedule does not change any result.
template <typename Body>
void run_blocks(std::vector<Block>& blocks, Body&& body) {
  const int64_t work = ref::total_work(blocks);
  std::stable_sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& c) { return a.work > c.work; });
  fast::use_single_threaded_blas();
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel if (fast::worth_parallel(work) && num_blocks > 1)
  {
    BlockScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t n = 0; n < num_blocks; ++n) body(blocks[static_cast<size_t>(n)], scratch);
  }
}

void run_dense(const QueryBatch& q, const PagedKv& kv, float scale, void* out_o, DType out_dtype, float* lse) {
  std::vector<Block> blocks = ref::dense_blocks(q, kv, kDenseQueryBlock);
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    int64_t limits[kDenseQueryBlock];
    for (int32_t qi = 0; qi < blk.nq; ++qi) limits[qi] = ref::query_position(q, kv, blk.b, blk.i0 + qi) + 1;
    attend_block(q, kv, scale, out_o, out_dtype, lse, blk, nullptr, limits[blk.nq - 1], limits, s);
  });
}

}  // namespace

Status fast_dense_attention(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                            const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(ref::validate_attention_call(q, kv, params, out));
  run_dense(q, kv, params.scale, out.o, out.dtype, out.lse);
  return ok_status();
}

Status fast_causal_lse(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params, float* lse) {
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  KC_RETURN_IF_ERROR(ref::validate_params(params));
  KC_CHECK_ARG(lse != nullptr || q.total_q == 0, "causal lse: lse is null");
  run_dense(q, kv, params.scale, nullptr, DType::kF32, lse);
  return ok_status();
}

Status fast_sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(ref::validate_sparse_decode_call(q, kv, params, rows, head_map, out));
  std::vector<Block> blocks = ref::sparse_decode_blocks(q, kv, rows, head_map);
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    ref::decode_block_keys(rows, blk, s.positions);
    const int64_t limit = static_cast<int64_t>(s.positions.size());
    attend_block(q, kv, params.scale, out.o, out.dtype, out.lse, blk, s.positions.data(), limit, &limit, s);
  });
  return ok_status();
}

Status fast_sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(ref::validate_sparse_prefill_call(q, kv, params, rows, head_map, out));
  std::vector<Block> blocks = ref::sparse_prefill_blocks(q, kv, rows, head_map);
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    // positions: the row's keys ascending, then (include_local) the local keys s_t .. last query.
    ref::prefill_block_keys(q, kv, rows, blk, s.positions, s.query_limits);
    attend_block(q, kv, params.scale, out.o, out.dtype, out.lse, blk, s.positions.data(),
                 static_cast<int64_t>(s.positions.size()), s.query_limits.data(), s);
  });
  return ok_status();
}

}  // namespace kascade::policy
