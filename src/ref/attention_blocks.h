// src/ref/attention_blocks.h — how a CPU attention call is cut into independent work blocks, shared
// by the reference ops (attention_ref.cpp) and the CPU backend's fast kernels
// (src/policy/cpu_fast_attention.cpp): the validation of a call's views, the blocks of (queries ×
// heads of one KV group) of the dense and sparse ops, the loading / storing of a block's query and
// output rows, and the sorted key list (plus per-query prefix
// lengths) each sparse block attends. The arithmetic of a block is the caller's.
// Tested through those ops (tests/unit/ref/test_dense_attention.cpp, test_sparse_attention.cpp,
// tests/unit/policy/test_cpu_fast_kernels.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::ref {

// One work block: queries [i0, i0 + nq) of sequence b (indices within the call) × query heads
// [h0, h0 + nh), all reading KV head kv_group; `source` says where a sparse block's keys come from.
struct AttentionBlock {
  int32_t b = 0;
  int32_t i0 = 0;
  int32_t nq = 0;
  int32_t h0 = 0;
  int32_t nh = 0;
  int32_t kv_group = 0;
  int64_t source = 0;  // sparse: flat row index (decode: b·num_rows + r; prefill: slot·num_rows + r)
  int64_t tile = 0;    // sparse prefill: absolute tile index
  int64_t work = 0;    // multiply-adds of q·k (an upper bound), for scheduling and the parallel decision
};

// The queries of a prefill tile within sequence b's call: [i0, i0 + nq), the positions of the tile
// (tile·tile_size .. tile·tile_size + tile_size - 1) that the call's queries cover.
struct TileQueries {
  int32_t i0 = 0;
  int32_t nq = 0;
};
TileQueries tile_queries(const QueryBatch& q, const PagedKv& kv, int32_t b, int64_t tile, int32_t tile_size);

// The checks of every attention op: validate_kv (which checks the queries), validate_params,
// validate_output (views.h).
Status validate_attention_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const AttentionOutput& out);
// validate_attention_call, one query per sequence, then the rows (validate_decode_rows).
Status validate_sparse_decode_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const DecodeIndexRows& rows, const int32_t* head_map /* [G] or null */,
                                   const AttentionOutput& out);
// validate_attention_call, then the rows (validate_prefill_rows).
Status validate_sparse_prefill_call(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                    const PrefillIndexRows& rows, const int32_t* head_map /* [G] or null */,
                                    const AttentionOutput& out);

// Dense: one block per (sequence, KV group, query_block queries). The views are validated.
std::vector<AttentionBlock> dense_blocks(const QueryBatch& q, const PagedKv& kv, int32_t query_block);
// Sparse decode: one block per (sequence, row consumer); a consumer is a KV group (all its heads,
// reading row row_of_group(head_map, g)) or, per query head, a single head h (reading row h).
std::vector<AttentionBlock> sparse_decode_blocks(const QueryBatch& q, const PagedKv& kv, const DecodeIndexRows& rows,
                                                 const int32_t* head_map);
// Sparse prefill: one block per (sequence, tile of the call, row consumer), its queries those of
// the tile (tile_queries).
std::vector<AttentionBlock> sparse_prefill_blocks(const QueryBatch& q, const PagedKv& kv,
                                                  const PrefillIndexRows& rows, const int32_t* head_map);
// Sum of the blocks' work.
int64_t total_work(const std::vector<AttentionBlock>& blocks);

// The keys of a sparse decode block: its row's entries, ascending. positions: [row_len].
void decode_block_keys(const DecodeIndexRows& rows, const AttentionBlock& blk, std::vector<int32_t>& positions);
// The keys of a sparse prefill block: its row's entries ascending, then (include_local) the local
// keys s_t .. the block's last query; query_limits[qi] = how many of them query qi attends (causal).
// positions: [row_len (+ local)]; query_limits: [blk.nq].
void prefill_block_keys(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows,
                        const AttentionBlock& blk, std::vector<int32_t>& positions,
                        std::vector<int64_t>& query_limits);

// Loads the block's queries as fp32 rows and gives every head of query qi the limit
// query_limits[qi]. query_limits: [blk.nq]; q_rows: [nq, nh, head_dim] fp32; limits: [nq, nh].
void load_block_queries(const QueryBatch& q, const AttentionBlock& blk, const int64_t* query_limits, float* q_rows,
                        int64_t* limits);
// Stores the block's results: o_rows into o (in o_dtype) when o is non-null, lse_rows into lse when
// lse is non-null. o_rows: [nq, nh, head_dim] fp32; lse_rows: [nq, nh]; o: [total_q, H, head_dim];
// lse: [total_q, H] fp32.
void store_block_outputs(const QueryBatch& q, const AttentionBlock& blk, const float* o_rows, const float* lse_rows,
                         void* o, DType o_dtype, float* lse);

}  // namespace kascade::ref
