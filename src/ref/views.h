// src/ref/views.h — validation of the attention views (include/kascade/attention.h) and the
// host-side address arithmetic every CPU op shares. Each validate_* returns a Status naming the
// offending field; ops call them before touching memory. Status codes: a missing pointer, a bad
// size or an inconsistent length is InvalidArgument; a page id outside the cache is OutOfRange.
// Tested by tests/unit/ref/test_views.cpp.
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade::ref {

// Checks pointers, dtype, positive sizes (batch, num_heads, head_dim), cu_q_lens monotone from 0 to
// total_q. A sequence may have q_len 0 (it takes no part in the call).
Status validate_queries(const QueryBatch& q);
// Checks the queries (validate_queries), then the cache against them: pointers, dtype, positive
// sizes, same head_dim, H % G == 0, kv_len[b] >= q_len[b], ceil(kv_len/page_size) <=
// max_pages_per_seq, and every page id of those first entries of each block-table row in
// [0, num_pages). q and kv may have different dtypes.
Status validate_kv(const PagedKv& kv, const QueryBatch& q);
// Checks the o pointer and dtype (lse may be null).
Status validate_output(const AttentionOutput& out);
// Checks that the softmax scale is positive and finite (a forgotten scale is 0 and refused).
Status validate_params(const AttentionParams& params);

inline int32_t q_len(const QueryBatch& q, int32_t b) { return q.cu_q_lens[b + 1] - q.cu_q_lens[b]; }
// Absolute position of query i (0-based within the call) of sequence b.
inline int64_t query_position(const QueryBatch& q, const PagedKv& kv, int32_t b, int32_t i) {
  return static_cast<int64_t>(kv.kv_lens[b]) - q_len(q, b) + i;
}
// Element offset of (key j, KV head g, channel 0) of sequence b in kv.k / kv.v.
inline int64_t kv_offset(const PagedKv& kv, int32_t b, int64_t j, int32_t g) {
  const int32_t page = kv.block_table[static_cast<int64_t>(b) * kv.max_pages_per_seq + j / kv.page_size];
  const int64_t row = static_cast<int64_t>(page) * kv.page_size + j % kv.page_size;
  return (row * kv.num_kv_heads + g) * kv.head_dim;
}
// Element offset of (query i within the call, head h, channel 0) of sequence b in q.q.
inline int64_t q_offset(const QueryBatch& q, int32_t b, int32_t i, int32_t h) {
  return (static_cast<int64_t>(q.cu_q_lens[b] + i) * q.num_heads + h) * q.head_dim;
}

}  // namespace kascade::ref
