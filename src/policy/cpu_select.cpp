// src/policy/cpu_select.cpp — CPU selection over src/ref (see cpu_select.h).
// Tested by tests/unit/policy/test_cpu_backend.cpp.
#include "policy/cpu_select.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "policy/sequence_view.h"
#include "ref/index_rows.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "ref/views.h"

namespace kascade::policy {
namespace {

ref::PoolingSpec to_ref(const ScorePooling& pooling) {
  ref::PoolingSpec spec;
  spec.num_rows = pooling.num_rows;
  spec.reduce = pooling.reduce == ScoreReduce::kMax ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
  return spec;
}

void fill_iota(int32_t* out, int64_t n) { std::iota(out, out + n, 0); }

}  // namespace

Status check_decode_inputs(const QueryBatch& q, const PagedKv& kv, const char* op) {
  KC_RETURN_IF_ERROR(ref::validate_queries(q));
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(ref::q_len(q, b) == 1, op, ": sequence ", b, " has ", ref::q_len(q, b),
                 " queries; decode selection takes exactly one query per sequence");
  }
  return ok_status();
}

Status check_decode_rows(const DecodeIndexRows& rows, int32_t batch, int32_t num_rows, const char* op) {
  KC_CHECK_ARG(rows.indices != nullptr && rows.row_lens != nullptr, op,
               ": rows.indices and rows.row_lens must be non-null");
  KC_CHECK_ARG(rows.batch == batch, op, ": rows.batch is ", rows.batch, "; the call has ", batch, " sequences");
  KC_CHECK_ARG(rows.num_rows == num_rows, op, ": rows.num_rows is ", rows.num_rows, "; expected ", num_rows);
  KC_CHECK_ARG(rows.k_max >= 0, op, ": rows.k_max is ", rows.k_max, "; expected >= 0");
  return ok_status();
}

Status check_pooling(const ScorePooling& pooling, int32_t num_heads, const char* op) {
  KC_CHECK_ARG(pooling.num_rows >= 1 && num_heads % pooling.num_rows == 0, op, ": pooling.num_rows is ",
               pooling.num_rows, "; it must divide the ", num_heads, " query heads");
  return ok_status();
}

// (cpu_select.h) Checks the CSR layout of prefill rows against the call: pointers, batch, the tile slots of every
// sequence (t_first..t_last), monotone offsets.
Status check_prefill_rows(const QueryBatch& q, const PagedKv& kv, const PrefillIndexRows& rows, int32_t num_rows,
                          const char* op) {
  KC_CHECK_ARG(rows.indices != nullptr && rows.row_offsets != nullptr && rows.tile_base != nullptr, op,
               ": rows.indices, rows.row_offsets and rows.tile_base must be non-null");
  KC_CHECK_ARG(rows.batch == q.batch, op, ": rows.batch is ", rows.batch, "; the call has ", q.batch, " sequences");
  KC_CHECK_ARG(rows.num_rows == num_rows, op, ": rows.num_rows is ", rows.num_rows, "; expected ", num_rows);
  KC_CHECK_ARG(rows.tile_size >= 1, op, ": rows.tile_size is ", rows.tile_size, "; expected >= 1");
  KC_CHECK_ARG(rows.tile_base[0] == 0, op, ": rows.tile_base[0] is ", rows.tile_base[0], "; expected 0");
  for (int32_t b = 0; b < q.batch; ++b) {
    const ref::CallTiles tiles = ref::call_tiles(ref::q_len(q, b), kv.kv_lens[b], rows.tile_size);
    const int64_t slots = rows.tile_base[b + 1] - rows.tile_base[b];
    KC_CHECK_ARG(slots == tiles.count, op, ": sequence ", b, " has ", slots, " tile slots in rows.tile_base; its ",
                 ref::q_len(q, b), " queries touch ", tiles.count, " tiles");
  }
  const int64_t total_rows = static_cast<int64_t>(rows.tile_base[q.batch]) * num_rows;
  KC_CHECK_ARG(rows.row_offsets[0] == 0, op, ": rows.row_offsets[0] is ", rows.row_offsets[0], "; expected 0");
  for (int64_t r = 0; r < total_rows; ++r) {
    KC_CHECK_ARG(rows.row_offsets[r + 1] >= rows.row_offsets[r], op, ": rows.row_offsets decreases at row ", r);
  }
  return ok_status();
}

Status check_select_decode_call(const QueryBatch& q, const PagedKv& kv, const ScorePooling& pooling,
                                const int32_t* k_per_seq, const DecodeIndexRows& rows, const char* op) {
  KC_RETURN_IF_ERROR(check_decode_inputs(q, kv, op));
  KC_RETURN_IF_ERROR(check_pooling(pooling, q.num_heads, op));
  KC_RETURN_IF_ERROR(check_decode_rows(rows, q.batch, pooling.num_rows, op));
  KC_CHECK_ARG(k_per_seq != nullptr, op, ": k_per_seq must be non-null");
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    KC_CHECK_ARG(k >= 0 && k <= n, op, ": sequence ", b, " asks for ", k, " indices out of ", n, " candidates");
    KC_CHECK_ARG(k <= rows.k_max, op, ": sequence ", b, " asks for ", k, " indices; rows hold k_max = ", rows.k_max);
  }
  return ok_status();
}

Status write_decode_rows(const DecodeIndexRows& rows, int32_t b, int32_t num_rows, int64_t k, int64_t n,
                         const RowTopK& top_k) {
  for (int32_t r = 0; r < num_rows; ++r) {
    const int64_t row = static_cast<int64_t>(b) * num_rows + r;
    int32_t* out = rows.indices + row * rows.k_max;
    if (k == n) {
      fill_iota(out, k);
    } else if (k > 0) {
      KC_RETURN_IF_ERROR(top_k(r, k, out));
    }
    std::fill(out + k, out + rows.k_max, -1);
    rows.row_lens[row] = static_cast<int32_t>(k);
  }
  return ok_status();
}

Result<bool> check_tile_rows_saturated(const PrefillIndexRows& rows, int32_t b, int64_t t, int64_t slot,
                                       int32_t num_rows, int64_t s_t, const char* op) {
  bool saturated = true;
  for (int32_t r = 0; r < num_rows; ++r) {
    const int64_t row = slot * num_rows + r;
    const int64_t len = rows.row_offsets[row + 1] - rows.row_offsets[row];
    KC_CHECK_ARG(len <= s_t, op, ": sequence ", b, " tile ", t, " row ", r, " holds ", len,
                 " indices, more than its ", s_t, " candidates");
    saturated = saturated && len == s_t;
  }
  return saturated;
}

Status write_tile_rows(const PrefillIndexRows& rows, int64_t slot, int32_t num_rows, int64_t s_t,
                       const RowTopK& top_k) {
  for (int32_t r = 0; r < num_rows; ++r) {
    const int64_t row = slot * num_rows + r;
    const int64_t len = rows.row_offsets[row + 1] - rows.row_offsets[row];
    int32_t* out = rows.indices + rows.row_offsets[row];
    if (len == s_t) {
      fill_iota(out, len);
    } else if (len > 0) {
      KC_RETURN_IF_ERROR(top_k(r, len, out));
    }
  }
  return ok_status();
}

Status cpu_select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_decode";
  KC_RETURN_IF_ERROR(check_select_decode_call(q, kv, pooling, k_per_seq, rows, kOp));
  const int32_t num_rows = pooling.num_rows;
  std::vector<float> scores;  // [num_rows, n] of one sequence
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    const bool saturated = k == n;  // every key: no scores needed
    if (!saturated && k > 0) {
      scores.assign(static_cast<size_t>(num_rows * n), 0.0f);
      SequenceView seq(q, kv, b);
      KC_RETURN_IF_ERROR(ref::pooled_scores_decode_ref(seq.q(), seq.kv(), params, to_ref(pooling), scores.data(), n));
    }
    KC_RETURN_IF_ERROR(write_decode_rows(rows, b, num_rows, k, n, [&](int32_t r, int64_t kr, int32_t* out) {
      return ref::topk_select_ref(scores.data() + r * n, n, kr, out);
    }));
  }
  return ok_status();
}

Status cpu_select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const ScorePooling& pooling, const PrefillIndexRows& rows) {
  constexpr const char* kOp = "select_prefill";
  KC_RETURN_IF_ERROR(ref::validate_queries(q));
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  KC_RETURN_IF_ERROR(check_pooling(pooling, q.num_heads, kOp));
  KC_CHECK_ARG(rows.include_local, kOp, ": rows must have include_local (candidates j < s_t plus local keys)");
  KC_RETURN_IF_ERROR(check_prefill_rows(q, kv, rows, pooling.num_rows, kOp));
  const int32_t num_rows = pooling.num_rows;
  const int64_t tile_size = rows.tile_size;
  std::vector<float> scores;  // [num_rows, s_t] of one tile
  for (int32_t b = 0; b < q.batch; ++b) {
    const ref::CallTiles tiles = ref::call_tiles(ref::q_len(q, b), kv.kv_lens[b], rows.tile_size);
    for (int64_t t = tiles.first; t < tiles.first + tiles.count; ++t) {  // none when q_len is 0
      const int64_t slot = rows.tile_base[b] + (t - tiles.first);
      const int64_t s_t = t * tile_size;
      KC_ASSIGN_OR_RETURN(const bool saturated, check_tile_rows_saturated(rows, b, t, slot, num_rows, s_t, kOp));
      if (!saturated) {
        scores.assign(static_cast<size_t>(num_rows * s_t), 0.0f);
        KC_RETURN_IF_ERROR(ref::pooled_scores_prefill_tile_ref(q, kv, params, to_ref(pooling), b, t, rows.tile_size,
                                                               scores.data(), nullptr));
      }
      KC_RETURN_IF_ERROR(write_tile_rows(rows, slot, num_rows, s_t, [&](int32_t r, int64_t len, int32_t* out) {
        return ref::topk_select_ref(scores.data() + r * s_t, s_t, len, out);
      }));
    }
  }
  return ok_status();
}

Status cpu_select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                 const PrefillIndexRows& rows) {
  constexpr const char* kOp = "select_prefill_oracle";
  KC_RETURN_IF_ERROR(ref::validate_queries(q));
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  KC_CHECK_ARG(rows.tile_size == 1 && !rows.include_local && rows.granularity == IndexGranularity::kPerQueryHead,
               kOp, ": rows must have tile_size 1, no local keys and one row per query head");
  const int32_t num_heads = q.num_heads;
  KC_RETURN_IF_ERROR(check_prefill_rows(q, kv, rows, num_heads, kOp));
  ref::PoolingSpec per_head;
  per_head.num_rows = num_heads;
  per_head.reduce = ref::PoolReduce::kSum;
  std::vector<float> before;  // [H, p]: p_h[j] for j < p (the "candidates" of the one-query tile)
  std::vector<float> own(static_cast<size_t>(num_heads));  // [H]: p_h[p], the query's own key
  std::vector<float> full;    // [p + 1]: one head's p over j <= p
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t kv_len = kv.kv_lens[b];
    const int64_t first_pos = kv_len - ref::q_len(q, b);
    for (int64_t p = first_pos; p < kv_len; ++p) {
      const int64_t slot = rows.tile_base[b] + (p - first_pos);
      bool saturated = true;
      for (int32_t h = 0; h < num_heads; ++h) {
        const int64_t row = slot * num_heads + h;
        const int64_t len = rows.row_offsets[row + 1] - rows.row_offsets[row];
        KC_CHECK_ARG(len <= p + 1, kOp, ": sequence ", b, " position ", p, " head ", h, " holds ", len,
                     " indices, more than its ", p + 1, " keys");
        saturated = saturated && len == p + 1;
      }
      if (!saturated && p > 0) {  // at p = 0 the only key is the query's own: rows are {0} or empty
        before.assign(static_cast<size_t>(num_heads * p), 0.0f);
        KC_RETURN_IF_ERROR(
            ref::pooled_scores_prefill_tile_ref(q, kv, params, per_head, b, p, 1, before.data(), own.data()));
      }
      for (int32_t h = 0; h < num_heads; ++h) {
        const int64_t row = slot * num_heads + h;
        const int64_t len = rows.row_offsets[row + 1] - rows.row_offsets[row];
        int32_t* out = rows.indices + rows.row_offsets[row];
        if (len == p + 1) {
          fill_iota(out, len);
        } else if (len > 0) {
          full.assign(before.begin() + h * p, before.begin() + (h + 1) * p);
          full.push_back(own[static_cast<size_t>(h)]);
          KC_RETURN_IF_ERROR(ref::topk_select_ref(full.data(), p + 1, len, out));
        }
      }
    }
  }
  return ok_status();
}

}  // namespace kascade::policy
