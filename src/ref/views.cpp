// src/ref/views.cpp — validation of the attention views (views.h): each check names the field, the
// value it holds and what was expected. Tested by tests/unit/ref/test_views.cpp (every path).
#include "ref/views.h"

#include <cmath>

#include "ref/convert_rows.h"

namespace kascade::ref {

Status validate_queries(const QueryBatch& q) {
  KC_CHECK_ARG(q.q != nullptr, "q.q is null");
  KC_CHECK_ARG(is_known_dtype(q.dtype), "q.dtype holds unknown value ", static_cast<int>(q.dtype));
  KC_CHECK_ARG(q.batch >= 1, "q.batch is ", q.batch, "; expected >= 1");
  KC_CHECK_ARG(q.num_heads >= 1, "q.num_heads is ", q.num_heads, "; expected >= 1");
  KC_CHECK_ARG(q.head_dim >= 1, "q.head_dim is ", q.head_dim, "; expected >= 1");
  KC_CHECK_ARG(q.cu_q_lens != nullptr, "q.cu_q_lens is null");
  KC_CHECK_ARG(q.cu_q_lens[0] == 0, "q.cu_q_lens[0] is ", q.cu_q_lens[0], "; expected 0");
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(q.cu_q_lens[b + 1] >= q.cu_q_lens[b], "q.cu_q_lens is not monotone: cu_q_lens[", b + 1,
                 "] = ", q.cu_q_lens[b + 1], " < cu_q_lens[", b, "] = ", q.cu_q_lens[b]);
  }
  KC_CHECK_ARG(q.cu_q_lens[q.batch] == q.total_q, "q.cu_q_lens[", q.batch, "] = ", q.cu_q_lens[q.batch],
               " differs from q.total_q = ", q.total_q);
  return ok_status();
}

Status validate_kv(const PagedKv& kv, const QueryBatch& q) {
  KC_RETURN_IF_ERROR(validate_queries(q));
  KC_CHECK_ARG(kv.k != nullptr, "kv.k is null");
  KC_CHECK_ARG(kv.v != nullptr, "kv.v is null");
  KC_CHECK_ARG(is_known_dtype(kv.dtype), "kv.dtype holds unknown value ", static_cast<int>(kv.dtype));
  KC_CHECK_ARG(kv.num_pages >= 1, "kv.num_pages is ", kv.num_pages, "; expected >= 1");
  KC_CHECK_ARG(kv.page_size >= 1, "kv.page_size is ", kv.page_size, "; expected >= 1");
  KC_CHECK_ARG(kv.num_kv_heads >= 1, "kv.num_kv_heads is ", kv.num_kv_heads, "; expected >= 1");
  KC_CHECK_ARG(kv.head_dim == q.head_dim, "kv.head_dim is ", kv.head_dim, " but q.head_dim is ", q.head_dim);
  KC_CHECK_ARG(q.num_heads % kv.num_kv_heads == 0, "q.num_heads ", q.num_heads,
               " is not a multiple of kv.num_kv_heads ", kv.num_kv_heads);
  KC_CHECK_ARG(kv.block_table != nullptr, "kv.block_table is null");
  KC_CHECK_ARG(kv.max_pages_per_seq >= 1, "kv.max_pages_per_seq is ", kv.max_pages_per_seq, "; expected >= 1");
  KC_CHECK_ARG(kv.kv_lens != nullptr, "kv.kv_lens is null");
  for (int32_t b = 0; b < q.batch; ++b) {
    const int32_t kv_len = kv.kv_lens[b];
    KC_CHECK_ARG(kv_len >= q_len(q, b), "kv.kv_lens[", b, "] = ", kv_len, " is smaller than q_len ", q_len(q, b),
                 " of sequence ", b);
    const int64_t pages = (static_cast<int64_t>(kv_len) + kv.page_size - 1) / kv.page_size;
    KC_CHECK_ARG(pages <= kv.max_pages_per_seq, "kv.kv_lens[", b, "] = ", kv_len, " needs ", pages,
                 " pages of ", kv.page_size, " keys but kv.max_pages_per_seq is ", kv.max_pages_per_seq);
  }
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t pages = (static_cast<int64_t>(kv.kv_lens[b]) + kv.page_size - 1) / kv.page_size;
    const int32_t* row = kv.block_table + static_cast<int64_t>(b) * kv.max_pages_per_seq;
    for (int64_t p = 0; p < pages; ++p) {
      if (row[p] < 0 || row[p] >= kv.num_pages) {
        return out_of_range("kv.block_table[", b, "][", p, "] = ", row[p], " is outside [0, kv.num_pages = ",
                            kv.num_pages, ")");
      }
    }
  }
  return ok_status();
}

Status validate_output(const AttentionOutput& out) {
  KC_CHECK_ARG(out.o != nullptr, "out.o is null");
  KC_CHECK_ARG(is_known_dtype(out.dtype), "out.dtype holds unknown value ", static_cast<int>(out.dtype));
  return ok_status();
}

Status validate_params(const AttentionParams& params) {
  KC_CHECK_ARG(std::isfinite(params.scale) && params.scale > 0.0f, "params.scale is ", params.scale,
               "; expected a positive finite softmax scale (1/sqrt(head_dim) for Llama / Qwen3)");
  return ok_status();
}

}  // namespace kascade::ref
