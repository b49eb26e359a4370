// src/policy/cpu_fast_attention.cpp — fast dense / sparse attention of the CPU backend
// (cpu_fast_attention.h): validation through src/ref, blocks of (queries × heads of one KV group)
// run in parallel, each through fast::attend_rows_fast. The keys of an index row are attended in
// ascending position order, so results do not depend on the order of a row's entries.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp.
#include "policy/cpu_fast_attention.h"

#include <algorithm>
#include <vector>

#include "policy/cpu_fast_core.h"
#include "ref/convert_rows.h"
#include "ref/index_rows.h"
#include "ref/views.h"

namespace kascade::policy {
namespace {

// Queries per dense block: 64 queries × g heads share every gathered key tile.
constexpr int32_t kDenseQueryBlock = 64;

// One work block: queries [i0, i0 + nq) of sequence b (indices within the call) × query heads
// [h0, h0 + nh), all reading KV head kv_group.
struct Block {
  int32_t b = 0;
  int32_t i0 = 0;
  int32_t nq = 0;
  int32_t h0 = 0;
  int32_t nh = 0;
  int32_t kv_group = 0;
  int64_t source = 0;  // sparse: flat row index (decode: b·num_rows + r; prefill: slot·num_rows + r)
  int64_t tile = 0;    // sparse prefill: absolute tile index
  int64_t work = 0;    // multiply-adds of q·k (upper bound), for scheduling and the parallel decision
};

// Per-thread state of a block: fp32 queries, per-row limits, outputs and the core's scratch.
struct BlockScratch {
  std::vector<float> q_rows;    // [nq, nh, d]
  std::vector<int64_t> limits;  // [nq, nh]
  std::vector<float> o_rows;    // [nq, nh, d]
  std::vector<float> lse_rows;  // [nq, nh]
  std::vector<int32_t> positions;
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
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    ref::load_row_f32(q.q, q.dtype, ref::q_offset(q, blk.b, blk.i0 + qi, blk.h0), blk.nh * d,
                      s.q_rows.data() + static_cast<size_t>(qi) * blk.nh * d);
    std::fill_n(s.limits.data() + static_cast<size_t>(qi) * blk.nh, blk.nh, query_limits[qi]);
  }
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
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    if (out_o != nullptr) {
      ref::store_row_f32(s.o_rows.data() + static_cast<size_t>(qi) * blk.nh * d, blk.nh * d, out_o, out_dtype,
                         ref::q_offset(q, blk.b, blk.i0 + qi, blk.h0));
    }
    if (lse != nullptr) {
      const int64_t base = static_cast<int64_t>(q.cu_q_lens[blk.b] + blk.i0 + qi) * q.num_heads + blk.h0;
      std::copy_n(s.lse_rows.data() + static_cast<size_t>(qi) * blk.nh, blk.nh, lse + base);
    }
  }
}

// Runs body(block, scratch) over the blocks, largest first, in parallel when the call is big
// enough. Each block writes its own outputs only, so the schedule does not change any result.
template <typename Body>
void run_blocks(std::vector<Block>& blocks, Body&& body) {
  int64_t work = 0;
  for (const Block& blk : blocks) work += blk.work;
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

// The dense blocks of a call: (sequence, KV group, 64 queries).
std::vector<Block> dense_blocks(const QueryBatch& q, const PagedKv& kv) {
  const int32_t group = q.num_heads / kv.num_kv_heads;
  std::vector<Block> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      for (int32_t i0 = 0; i0 < ref::q_len(q, b); i0 += kDenseQueryBlock) {
        Block blk;
        blk.b = b;
        blk.i0 = i0;
        blk.nq = std::min(kDenseQueryBlock, ref::q_len(q, b) - i0);
        blk.h0 = g * group;
        blk.nh = group;
        blk.kv_group = g;
        blk.work = int64_t{blk.nq} * group * q.head_dim * (ref::query_position(q, kv, b, i0 + blk.nq - 1) + 1);
        blocks.push_back(blk);
      }
    }
  }
  return blocks;
}

void run_dense(const QueryBatch& q, const PagedKv& kv, float scale, void* out_o, DType out_dtype, float* lse) {
  std::vector<Block> blocks = dense_blocks(q, kv);
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    int64_t limits[kDenseQueryBlock];
    for (int32_t qi = 0; qi < blk.nq; ++qi) limits[qi] = ref::query_position(q, kv, blk.b, blk.i0 + qi) + 1;
    attend_block(q, kv, scale, out_o, out_dtype, lse, blk, nullptr, limits[blk.nq - 1], limits, s);
  });
}

// The blocks of the sparse ops for one sequence or tile slot: one per row consumer, a KV group (all
// its query heads, reading row row_of_group(g)) or a single query head (reading row h).
template <typename Emit>
void for_each_consumer(const QueryBatch& q, const PagedKv& kv, IndexGranularity granularity, const int32_t* head_map,
                       Block blk, int64_t row_base, Emit&& emit) {
  const int32_t group = q.num_heads / kv.num_kv_heads;
  if (granularity == IndexGranularity::kPerKvGroup) {
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      blk.h0 = g * group;
      blk.nh = group;
      blk.kv_group = g;
      blk.source = row_base + ref::row_of_group(head_map, g);
      emit(blk);
    }
  } else {
    for (int32_t h = 0; h < q.num_heads; ++h) {
      blk.h0 = h;
      blk.nh = 1;
      blk.kv_group = h / group;
      blk.source = row_base + h;
      emit(blk);
    }
  }
}

Status validate_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  KC_RETURN_IF_ERROR(ref::validate_params(params));
  return ref::validate_output(out);
}

}  // namespace

Status fast_dense_attention(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                            const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
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
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(ref::q_len(q, b) == 1, "sparse decode needs one query per sequence; sequence ", b, " has q_len ",
                 ref::q_len(q, b));
  }
  KC_RETURN_IF_ERROR(ref::validate_decode_rows(rows, head_map, q, kv));
  std::vector<Block> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    Block blk;
    blk.b = b;
    blk.nq = 1;
    for_each_consumer(q, kv, rows.granularity, head_map, blk, static_cast<int64_t>(b) * rows.num_rows,
                      [&](Block x) {
                        x.work = int64_t{rows.row_lens[x.source]} * x.nh * q.head_dim;
                        blocks.push_back(x);
                      });
  }
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    const int32_t* entries = rows.indices + blk.source * rows.k_max;
    s.positions.assign(entries, entries + rows.row_lens[blk.source]);
    std::sort(s.positions.begin(), s.positions.end());
    const int64_t limit = static_cast<int64_t>(s.positions.size());
    attend_block(q, kv, params.scale, out.o, out.dtype, out.lse, blk, s.positions.data(), limit, &limit, s);
  });
  return ok_status();
}

Status fast_sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
  KC_RETURN_IF_ERROR(ref::validate_prefill_rows(rows, head_map, q, kv));
  const int32_t tile_size = rows.tile_size;
  std::vector<Block> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    const ref::CallTiles tiles = ref::call_tiles(ref::q_len(q, b), kv.kv_lens[b], tile_size);
    const int64_t first_pos = ref::query_position(q, kv, b, 0);
    const int64_t last_pos = static_cast<int64_t>(kv.kv_lens[b]) - 1;
    for (int64_t t = 0; t < tiles.count; ++t) {
      const int64_t tile = tiles.first + t;
      const int64_t lo = std::max(tile * tile_size, first_pos);
      const int64_t hi = std::min(tile * tile_size + tile_size - 1, last_pos);
      Block blk;
      blk.b = b;
      blk.i0 = static_cast<int32_t>(lo - first_pos);
      blk.nq = static_cast<int32_t>(hi - lo + 1);
      blk.tile = tile;
      const int64_t slot = rows.tile_base[b] + t;
      for_each_consumer(q, kv, rows.granularity, head_map, blk, slot * rows.num_rows, [&](Block x) {
        const int64_t row_len = rows.row_offsets[x.source + 1] - rows.row_offsets[x.source];
        x.work = (row_len + tile_size) * x.nq * x.nh * q.head_dim;
        blocks.push_back(x);
      });
    }
  }
  run_blocks(blocks, [&](const Block& blk, BlockScratch& s) {
    const int64_t tile_start = blk.tile * tile_size;
    const int64_t first_query_pos = ref::query_position(q, kv, blk.b, blk.i0);
    const int64_t last_query_pos = first_query_pos + blk.nq - 1;
    // positions: the row's keys ascending, then (include_local) the local keys s_t .. last query.
    s.positions.assign(rows.indices + rows.row_offsets[blk.source], rows.indices + rows.row_offsets[blk.source + 1]);
    std::sort(s.positions.begin(), s.positions.end());
    const int64_t row_len = static_cast<int64_t>(s.positions.size());
    if (rows.include_local) {
      for (int64_t j = tile_start; j <= last_query_pos; ++j) s.positions.push_back(static_cast<int32_t>(j));
    }
    std::vector<int64_t> limits(static_cast<size_t>(blk.nq));  // [nq]
    for (int32_t qi = 0; qi < blk.nq; ++qi) {
      const int64_t pos = first_query_pos + qi;
      limits[static_cast<size_t>(qi)] =
          rows.include_local ? row_len + (pos - tile_start + 1)
                             : std::upper_bound(s.positions.begin(), s.positions.end(), pos) - s.positions.begin();
    }
    attend_block(q, kv, params.scale, out.o, out.dtype, out.lse, blk, s.positions.data(),
                 static_cast<int64_t>(s.positions.size()), limits.data(), s);
  });
  return ok_status();
}

}  // namespace kascade::policy
