// src/ref/attention_blocks.cpp — the work blocks of the CPU attention ops (attention_blocks.h).
// Tested through the ops (tests/unit/ref/test_dense_attention.cpp, test_sparse_attention.cpp,
// tests/unit/policy/test_cpu_fast_kernels.cpp).
#include "ref/attention_blocks.h"

#include <algorithm>

#include "ref/convert_rows.h"
#include "ref/index_rows.h"
#include "ref/views.h"

namespace kascade::ref {
namespace {

// Calls emit(block) for each row consumer of one sequence or tile slot: a KV group (all its query
// heads, reading row row_of_group(g)) or a single query head (reading row h). blk holds b, i0, nq
// and tile; row_base is the flat index of the slot's row 0.
template <typename Emit>
void for_each_consumer(const QueryBatch& q, const PagedKv& kv, IndexGranularity granularity, const int32_t* head_map,
                       AttentionBlock blk, int64_t row_base, Emit&& emit) {
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

TileQueries tile_queries(const QueryBatch& q, const PagedKv& kv, int32_t b, int64_t tile, int32_t tile_size) {
  const int64_t first_pos = query_position(q, kv, b, 0);
  const int64_t last_pos = static_cast<int64_t>(kv.kv_lens[b]) - 1;
  const int64_t lo = std::max(tile * tile_size, first_pos);
  const int64_t hi = std::min(tile * tile_size + tile_size - 1, last_pos);
  TileQueries t;
  t.i0 = static_cast<int32_t>(lo - first_pos);
  t.nq = static_cast<int32_t>(hi - lo + 1);
  return t;
}

Status validate_attention_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_kv(kv, q));
  KC_RETURN_IF_ERROR(validate_params(params));
  return validate_output(out);
}

Status validate_sparse_decode_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_attention_call(q, kv, params, out));
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(q_len(q, b) == 1, "sparse decode needs one query per sequence; sequence ", b, " has q_len ",
                 q_len(q, b));
  }
  return validate_decode_rows(rows, head_map, q, kv);
}

Status validate_sparse_prefill_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                    const PrefillIndexRows& rows, const int32_t* head_map,
                                    const AttentionOutput& out) {
  KC_RETURN_IF_ERROR(validate_attention_call(q, kv, params, out));
  return validate_prefill_rows(rows, head_map, q, kv);
}

std::vector<AttentionBlock> dense_blocks(const QueryBatch& q, const PagedKv& kv, int32_t query_block) {
  const int32_t group = q.num_heads / kv.num_kv_heads;
  std::vector<AttentionBlock> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      for (int32_t i0 = 0; i0 < q_len(q, b); i0 += query_block) {
        AttentionBlock blk;
        blk.b = b;
        blk.i0 = i0;
        blk.nq = std::min(query_block, q_len(q, b) - i0);
        blk.h0 = g * group;
        blk.nh = group;
        blk.kv_group = g;
        blk.work = int64_t{blk.nq} * group * q.head_dim * (query_position(q, kv, b, i0 + blk.nq - 1) + 1);
        blocks.push_back(blk);
      }
    }
  }
  return blocks;
}

std::vector<AttentionBlock> sparse_decode_blocks(const QueryBatch& q, const PagedKv& kv, const DecodeIndexRows& rows,
                                                 const int32_t* head_map) {
  std::vector<AttentionBlock> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    AttentionBlock blk;
    blk.b = b;
    blk.nq = 1;
    for_each_consumer(q, kv, rows.granularity, head_map, blk, static_cast<int64_t>(b) * rows.num_rows,
                      [&](AttentionBlock x) {
                        x.work = int64_t{rows.row_lens[x.source]} * x.nh * q.head_dim;
                        blocks.push_back(x);
                      });
  }
  return blocks;
}

std::vector<AttentionBlock> sparse_prefill_blocks(const QueryBatch& q, const PagedKv& kv,
                                                  const PrefillIndexRows& rows, const int32_t* head_map) {
  const int32_t tile_size = rows.tile_size;
  std::vector<AttentionBlock> blocks;
  for (int32_t b = 0; b < q.batch; ++b) {
    const CallTiles tiles = call_tiles(q_len(q, b), kv.kv_lens[b], tile_size);
    for (int64_t s = 0; s < tiles.count; ++s) {
      const int64_t tile = tiles.first + s;
      const TileQueries queries = tile_queries(q, kv, b, tile, tile_size);
      AttentionBlock blk;
      blk.b = b;
      blk.i0 = queries.i0;
      blk.nq = queries.nq;
      blk.tile = tile;
      const int64_t slot = rows.tile_base[b] + s;
      for_each_consumer(q, kv, rows.granularity, head_map, blk, slot * rows.num_rows, [&](AttentionBlock x) {
        const int64_t row_len = rows.row_offsets[x.source + 1] - rows.row_offsets[x.source];
        x.work = (row_len + tile_size) * x.nq * x.nh * q.head_dim;
        blocks.push_back(x);
      });
    }
  }
  return blocks;
}

int64_t total_work(const std::vector<AttentionBlock>& blocks) {
  int64_t work = 0;
  for (const AttentionBlock& blk : blocks) work += blk.work;
  return work;
}

void decode_block_keys(const DecodeIndexRows& rows, const AttentionBlock& blk, std::vector<int32_t>& positions) {
  const int32_t* entries = rows.indices + blk.source * rows.k_max;
  positions.assign(entries, entries + rows.row_lens[blk.source]);
  std::sort(positions.begin(), positions.end());
}

void prefill_block_keys(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows,
                        const AttentionBlock& blk, std::vector<int32_t>& positions,
                        std::vector<int64_t>& query_limits) {
  const int64_t tile_start = blk.tile * rows.tile_size;
  const int64_t first_query_pos = query_position(q, kv, blk.b, blk.i0);
  const int64_t last_query_pos = first_query_pos + blk.nq - 1;
  positions.assign(rows.indices + rows.row_offsets[blk.source], rows.indices + rows.row_offsets[blk.source + 1]);
  std::sort(positions.begin(), positions.end());
  const int64_t row_len = static_cast<int64_t>(positions.size());
  if (rows.include_local) {
    for (int64_t j = tile_start; j <= last_query_pos; ++j) positions.push_back(static_cast<int32_t>(j));
  }
  query_limits.resize(static_cast<size_t>(blk.nq));
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    const int64_t pos = first_query_pos + qi;
    query_limits[static_cast<size_t>(qi)] =
        rows.include_local ? row_len + (pos - tile_start + 1)
                           : std::upper_bound(positions.begin(), positions.end(), pos) - positions.begin();
  }
}

void load_block_queries(const QueryBatch& q, const AttentionBlock& blk, const int64_t* query_limits, float* q_rows,
                        int64_t* limits) {
  const int32_t width = blk.nh * q.head_dim;
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    load_row_f32(q.q, q.dtype, q_offset(q, blk.b, blk.i0 + qi, blk.h0), width,
                 q_rows + static_cast<size_t>(qi) * width);
    std::fill_n(limits + static_cast<size_t>(qi) * blk.nh, blk.nh, query_limits[qi]);
  }
}

void store_block_outputs(const QueryBatch& q, const AttentionBlock& blk, const float* o_rows, const float* lse_rows,
                         void* o, DType o_dtype, float* lse) {
  const int32_t width = blk.nh * q.head_dim;
  for (int32_t qi = 0; qi < blk.nq; ++qi) {
    if (o != nullptr) {
      store_row_f32(o_rows + static_cast<size_t>(qi) * width, width, o, o_dtype, q_offset(q, blk.b, blk.i0 + qi, blk.h0));
    }
    if (lse != nullptr) {
      const int64_t base = static_cast<int64_t>(q.cu_q_lens[blk.b] + blk.i0 + qi) * q.num_heads + blk.h0;
      std::copy_n(lse_rows + static_cast<size_t>(qi) * blk.nh, blk.nh, lse + base);
    }
  }
}

}  // namespace kascade::ref
