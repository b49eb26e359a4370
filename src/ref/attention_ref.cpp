// src/ref/attention_ref.cpp — CPU reference attention (attention_ref.h): dense causal, sparse decode,
// sparse prefill and the merge of partial states. Each op validates its views, cuts the call into
// independent blocks of (queries × heads of one KV group) that share one list of keys, and runs the
// blocks in parallel (OpenMP) through detail::attend_rows. The keys of an index row are processed
// in ascending position order, so the result does not depend on the order of a row's entries.
// Tested by tests/unit/ref/test_dense_attention.cpp, test_sparse_attention.cpp and
// test_merge_states.cpp (against fp64 implementations written in the tests).
#include "ref/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ref/attention_core.h"
#include "ref/convert_rows.h"
#include "ref/index_rows.h"
#include "ref/views.h"

namespace kascade::ref {
namespace {

// Queries per dense work block: 32 queries × g heads share every converted key block.
constexpr int32_t kDenseQueryBlock = 32;

// One work block: queries [i0, i0 + nq) of sequence b (indices within the call) × query heads
// [h0, h0 + nh), all reading KV head kv_group; `source` says where the keys come from.
struct Block {
  int32_t b = 0;
  int32_t i0 = 0;
  int32_t nq = 0;
  int32_t h0 = 0;
  int32_t nh = 0;
  int32_t kv_group = 0;
  int64_t source = 0;  // sparse: flat index of the row (decode: b·num_rows + r; prefill: slot·num_rows + r)
  int64_t tile = 0;    // sparse prefill: absolute tile index
};

// Loads the block's queries, attends `positions` (null: 0 .. num_keys-1) with per-query prefix
// lengths `query_limits`, and writes o and lse.
// positions: [num_keys]; query_limits: [blk.nq].
void attend_block(const QueryBatch& q, const PagedKv& kv, float scale, const AttentionOutput& out, const Block& blk,
                  const int32_t* positions, int64_t num_keys, const int64_t* query_limits) {
  const int32_t d = q.head_dim;
  const int32_t rows = blk.nq * blk.nh;
  std::vector<float> q_rows(static_cast<size_t>(rows) * d);  // [nq, nh, d]
  std::vector<int64_t> limits(static_cast<size_t>(rows));    // [nq, nh]
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    load_row_f32(q.q, q.dtype, q_offset(q, blk.b, blk.i0 + qi, blk.h0), blk.nh * d,
                 q_rows.data() + static_cast<size_t>(qi) * blk.nh * d);
    std::fill_n(limits.data() + static_cast<size_t>(qi) * blk.nh, blk.nh, query_limits[qi]);
  }
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
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    store_row_f32(o_rows.data() + static_cast<size_t>(qi) * blk.nh * d, blk.nh * d, out.o, out.dtype,
                  q_offset(q, blk.b, blk.i0 + qi, blk.h0));
    if (out.lse != nullptr) {
      const int64_t base = static_cast<int64_t>(q.cu_q_lens[blk.b] + blk.i0 + qi) * q.num_heads + blk.h0;
      std::copy_n(lse_rows.data() + static_cast<size_t>(qi) * blk.nh, blk.nh, out.lse + base);
    }
  }
}

Status validate_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                     const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_kv(kv, q));
  KC_RETURN_IF_ERROR(validate_params(params));
  return validate_output(out);
}

// The blocks of the sparse ops: one per (sequence or tile slot, row consumer). A consumer is a KV
// group (all its query heads, reading row row_of_group(g)) or a single query head (reading row h).
template <typename Emit>
void for_each_consumer(const QueryBatch& q, const PagedKv& kv, IndexGranularity granularity, const int32_t* head_map,
                       Block blk, int64_t row_base, Emit&& emit) {
  const int32_t group = q.num_heads / kv.num_kv_heads;
  if (granularity == IndexGranularity::kPerKvGroup) {
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      blk.h0 = g * group;
      blk.nh = group;
      blk.kv_group = g;
      blk.source = row_base + row_of_group(head_map, g);
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

}  // namespace

Status dense_attention_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
  const int32_t group = q.num_heads / kv.num_kv_heads;
  std::vector<Block> blocks;
  int64_t work = 0;  // multiply-adds of q·k, an upper bound
  for (int32_t b = 0; b < q.batch; ++b) {
    work += int64_t{q_len(q, b)} * kv.kv_lens[b] * q.num_heads * q.head_dim;
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      for (int32_t i0 = 0; i0 < q_len(q, b); i0 += kDenseQueryBlock) {
        Block blk;
        blk.b = b;
        blk.i0 = i0;
        blk.nq = std::min(kDenseQueryBlock, q_len(q, b) - i0);
        blk.h0 = g * group;
        blk.nh = group;
        blk.kv_group = g;
        blocks.push_back(blk);
      }
    }
  }
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const Block& blk = blocks[n];
    int64_t limits[kDenseQueryBlock];
    for (int32_t qi = 0; qi < blk.nq; ++qi) limits[qi] = query_position(q, kv, blk.b, blk.i0 + qi) + 1;
    attend_block(q, kv, params.scale, out, blk, nullptr, limits[blk.nq - 1], limits);
  }
  return ok_status();
}

Status sparse_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(q_len(q, b) == 1, "sparse decode needs one query per sequence; sequence ", b, " has q_len ",
                 q_len(q, b));
  }
  KC_RETURN_IF_ERROR(validate_decode_rows(rows, head_map, q, kv));

  std::vector<Block> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    Block blk;
    blk.b = b;
    blk.nq = 1;
    for_each_consumer(q, kv, rows.granularity, head_map, blk,
                      static_cast<int64_t>(b) * rows.num_rows, [&](const Block& x) { blocks.push_back(x); });
  }
  int64_t work = 0;  // multiply-adds of q·k
  for (const Block& blk : blocks) work += int64_t{rows.row_lens[blk.source]} * blk.nh * q.head_dim;
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const Block& blk = blocks[n];
    const int32_t* entries = rows.indices + blk.source * rows.k_max;
    std::vector<int32_t> positions(entries, entries + rows.row_lens[blk.source]);  // [row_len]
    std::sort(positions.begin(), positions.end());
    const int64_t limit = static_cast<int64_t>(positions.size());
    attend_block(q, kv, params.scale, out, blk, positions.data(), limit, &limit);
  }
  return ok_status();
}

Status sparse_prefill_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_call(q, kv, params, out));
  KC_RETURN_IF_ERROR(validate_prefill_rows(rows, head_map, q, kv));

  const int32_t tile_size = rows.tile_size;
  std::vector<Block> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    const CallTiles tiles = call_tiles(q_len(q, b), kv.kv_lens[b], tile_size);
    const int64_t first_pos = query_position(q, kv, b, 0);
    const int64_t last_pos = static_cast<int64_t>(kv.kv_lens[b]) - 1;
    for (int64_t s = 0; s < tiles.count; ++s) {
      const int64_t tile = tiles.first + s;
      const int64_t lo = std::max(tile * tile_size, first_pos);
      const int64_t hi = std::min(tile * tile_size + tile_size - 1, last_pos);
      Block blk;
      blk.b = b;
      blk.i0 = static_cast<int32_t>(lo - first_pos);
      blk.nq = static_cast<int32_t>(hi - lo + 1);
      blk.tile = tile;
      const int64_t slot = rows.tile_base[b] + s;
      for_each_consumer(q, kv, rows.granularity, head_map, blk, slot * rows.num_rows,
                        [&](const Block& x) { blocks.push_back(x); });
    }
  }
  int64_t work = 0;  // multiply-adds of q·k, an upper bound
  for (const Block& blk : blocks) {
    const int64_t row_len = rows.row_offsets[blk.source + 1] - rows.row_offsets[blk.source];
    work += (row_len + tile_size) * blk.nq * blk.nh * q.head_dim;
  }
  const int64_t num_blocks = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (int64_t n = 0; n < num_blocks; ++n) {
    const Block& blk = blocks[n];
    const int64_t tile_start = blk.tile * tile_size;
    const int64_t first_query_pos = query_position(q, kv, blk.b, blk.i0);
    const int64_t last_query_pos = first_query_pos + blk.nq - 1;
    // positions: the row's keys ascending, then (include_local) the local keys s_t .. last query.
    std::vector<int32_t> positions(rows.indices + rows.row_offsets[blk.source],
                                   rows.indices + rows.row_offsets[blk.source + 1]);
    std::sort(positions.begin(), positions.end());
    const int64_t row_len = static_cast<int64_t>(positions.size());
    if (rows.include_local) {
      for (int64_t j = tile_start; j <= last_query_pos; ++j) positions.push_back(static_cast<int32_t>(j));
    }
    std::vector<int64_t> limits(static_cast<size_t>(blk.nq));  // [nq]
    for (int32_t qi = 0; qi < blk.nq; ++qi) {
      const int64_t pos = first_query_pos + qi;
      limits[qi] = rows.include_local
                       ? row_len + (pos - tile_start + 1)
                       : std::upper_bound(positions.begin(), positions.end(), pos) - positions.begin();
    }
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
