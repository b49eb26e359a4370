// src/cuda/backend/backend_checks.h — what the CUDA backend accepts, checked on the host before
// anything is planned or launched: its options, the static shapes and ops it supports (no GPU
// needed; declared in cuda_backend.h), and each decode call's views against the backend's limits
// (one query per sequence, batch <= max_batch, block table covering max_seq_len, f16/bf16, q and
// KV agreeing). Device data (lengths, page ids, rows) is checked by the kernels.
// Tested by tests/cuda/test_backend_ops.cpp (the refusals run without a GPU too).
#pragma once

#include <cstdint>

#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/decode_plan_cache.h"
#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

// kUnsupported for a prefill op: "<op> on CUDA: prefill on CUDA: use --device cpu or wait for
// the prefill kernels".
Status prefill_unsupported(const char* op);

// The plan key of a decode call whose views pass the checks; the Status names the field and the
// option it exceeds otherwise. Several queries per sequence (total_q != batch) are the prefill
// refusal of `op`.
Result<DecodeKey> check_decode_call(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options,
                                    const char* op);

// Host-side checks of decode index rows an op writes or reads: non-null, batch, num_rows.
Status check_rows(const DecodeIndexRows& rows, int32_t batch, int32_t num_rows, const char* op);

// k_per_seq (host [batch]): non-null, 0 <= k <= rows.k_max (kv_len is checked on the device).
Status check_k_per_seq(const int32_t* k_per_seq, int32_t batch, int32_t k_max, const char* op);

}  // namespace kascade::cuda
