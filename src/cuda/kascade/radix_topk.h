// src/cuda/kascade/radix_topk.h — exact decode Top-k on the GPU (DESIGN.md §2.1, §2.2): for each
// sequence b and score row r, the k = k(kv_len[b]) largest of scores[b][r][0..kv_len[b]), ties to
// the lower index (exactly ref::topk_select_ref, NaN excepted: NaN ranks above +inf here), written
// as a −1-padded int32 row in ascending index order with its length. A radix select (three
// histogram passes, then a compaction pass), no sort, no host round trip; graph-capturable.
// Tested by tests/cuda/test_radix_topk.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kascade/attention.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade::cuda {

// scores: device [batch, out.num_rows, scores_stride] fp32, scores_stride >= max_seq_len and a
// multiple of 4; kv_lens: device [batch]; out: device rows with out.k_max >= k(max_seq_len);
// k_per_seq: device [batch] selection sizes, or null for k(kv_len) from `budget`;
// error_flags: device uint32 that gets kErrorKvLen when a kv_len lies outside [0, max_seq_len]
// and kErrorRowLen when a k lies outside [0, min(kv_len, out.k_max)].
Status radix_topk_decode(const float* scores, int64_t scores_stride, const int32_t* kv_lens, int32_t batch,
                         int32_t max_seq_len, const Budget& budget, const int32_t* k_per_seq,
                         const DecodeIndexRows& out, uint32_t* error_flags, cudaStream_t stream);

}  // namespace kascade::cuda
