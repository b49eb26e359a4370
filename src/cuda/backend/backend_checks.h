// src/cuda/backend/backend_checks.h — what the CUDA backend accepts, checked on the host before
// anything is planned or launched: its options, the static shapes and ops it supports (no GPU
// needed; declared in cuda_backend.h), and each call's views against the backend's limits
// (decode: one query per sequence; prefill: any number; batch <= max_batch, block table covering
// max_seq_len, f16/bf16, q and KV agreeing). Device data (lengths, page ids, rows) is checked by
// the kernels.
// Tested by tests/cuda/test_backend_ops.cpp (the refusals run without a GPU too).
#pragma once

#include <cstdint>

#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/decode_plan_cache.h"
#include "cuda/backend/prefill_plan_cache.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// True when the call carries exactly one query per sequence (total_q == batch): the backend runs
// it on the decode kernels, which never read cu_q_lens (so a call whose cu_q_lens would give one
// sequence two queries and another none is not one the backend can tell apart; the policies never
// make one: every sequence of a call has q_len >= 1).
inline bool is_decode_call(const QueryBatch& q) { return q.total_q == q.batch; }

// The plan key of a decode call whose views pass the checks; the Status names the field and the
// option it exceeds otherwise. Several queries per sequence (total_q != batch) are refused: the
// decode-only ops (sparse_decode, select_decode, ...) take one query per sequence.
Result<DecodeKey> check_decode_call(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options,
                                    const char* op);

// The plan key of a prefill call (any q_len per sequence, the queries being the last q_len
// positions of each kv_len) whose views pass the checks: the shared view checks above, cu_q_lens
// non-null, total_q <= max_batch · max_seq_len, and the shape supported by the prefill kernels.
// key.selection is false and key.tile_size 1; the selecting ops set both.
Result<PrefillKey> check_prefill_call(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options,
                                      const char* op);

// Host-side checks of decode index rows an op writes or reads: non-null, batch, num_rows.
Status check_rows(const DecodeIndexRows& rows, int32_t batch, int32_t num_rows, const char* op);

// k_per_seq (host [batch]): non-null, 0 <= k <= rows.k_max (kv_len is checked on the device).
Status check_k_per_seq(const int32_t* k_per_seq, int32_t batch, int32_t k_max, const char* op);

}  // namespace kascade::cuda
