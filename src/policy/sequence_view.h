// src/policy/sequence_view.h — host views of one sequence of a call (batch 1), so CPU selection can
// score one sequence at a time with scratch O(rows · n) instead of O(batch · rows · n).
// Used by cpu_select.cpp and cpu_baselines.cpp; exercised by their tests.
#pragma once

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/dtype.h"

namespace kascade::policy {

// Host memory only. Non-copyable: the views point at cu_q_lens_ inside this object.
class SequenceView {
 public:
  SequenceView(const QueryBatch& q, const PagedKv& kv, int32_t b) : q_(q), kv_(kv) {
    const int32_t begin = q.cu_q_lens[b];
    cu_q_lens_[0] = 0;
    cu_q_lens_[1] = q.cu_q_lens[b + 1] - begin;
    q_.q = static_cast<const uint8_t*>(q.q) +
           static_cast<int64_t>(begin) * q.num_heads * q.head_dim * static_cast<int64_t>(dtype_size(q.dtype));
    q_.batch = 1;
    q_.total_q = cu_q_lens_[1];
    q_.cu_q_lens = cu_q_lens_;
    kv_.block_table = kv.block_table + static_cast<int64_t>(b) * kv.max_pages_per_seq;
    kv_.kv_lens = kv.kv_lens + b;
  }
  SequenceView(const SequenceView&) = delete;
  SequenceView& operator=(const SequenceView&) = delete;

  const QueryBatch& q() const { return q_; }
  const PagedKv& kv() const { return kv_; }

 private:
  QueryBatch q_;
  PagedKv kv_;
  int32_t cu_q_lens_[2] = {0, 0};
};

}  // namespace kascade::policy
