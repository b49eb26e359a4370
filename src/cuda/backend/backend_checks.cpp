// src/cuda/backend/backend_checks.cpp — host-side acceptance checks of the CUDA backend
// (backend_checks.h, and the no-GPU supports functions of cuda_backend.h).
// Tested by tests/cuda/test_backend_ops.cpp.
#include "cuda/backend/backend_checks.h"

#include <string>

#include "cuda/attention/decode_plan.h"
#include "cuda/prefill/prefill_plan.h"

namespace kascade {
namespace {

// The heads of a model's attention shape in bf16: the dtype the support checks plan for.
cuda::CallHeads smallest_call_heads(const AttentionShape& shape) {
  return cuda::CallHeads{DType::kBF16, shape.num_heads, shape.num_kv_heads, shape.head_dim};
}

// The decode kernels' limits that depend on the model alone.
Status decode_kernels_support(const AttentionShape& shape) {
  cuda::DecodeShape decode;
  cuda::set_plan_heads(smallest_call_heads(shape), 1, decode);
  decode.page_size = 16;
  decode.max_seq_len = 1;
  return cuda::supports_decode(decode);
}

// The prefill kernels' limits that depend on the model alone (the smallest call; the tile-size
// limit of selection, T · g <= 256, depends on the rows and is checked per call).
Status prefill_kernels_support(const AttentionShape& shape) {
  cuda::PrefillShape prefill;
  cuda::set_plan_heads(smallest_call_heads(shape), 1, prefill);
  prefill.max_total_q = 1;
  prefill.max_q_len = 1;
  prefill.max_kv_len = 1;
  prefill.tile_size = 1;
  return cuda::supports_prefill(prefill);
}

}  // namespace

Status validate_cuda_backend_options(const CudaBackendOptions& options) {
  KC_CHECK_ARG(options.device >= 0, "cuda backend: device is ", options.device, "; expected a device ordinal >= 0");
  KC_CHECK_ARG(options.max_batch >= 1 && options.max_batch <= 65535, "cuda backend: max_batch is ",
               options.max_batch, "; expected 1..65535");
  KC_CHECK_ARG(options.max_seq_len >= 1 && options.max_seq_len <= (1 << 30), "cuda backend: max_seq_len is ",
               options.max_seq_len, "; expected 1..2^30 (the longest kv_len any call may see)");
  Status budget = validate_budget(options.budget);
  if (!budget.ok()) return budget.with_context("cuda backend: options.budget");
  return ok_status();
}

Status cuda_backend_supports_dtype(DType dtype) {
  if (dtype == DType::kF16 || dtype == DType::kBF16) return ok_status();
  return unsupported("cuda backend: dtype is ", dtype_name(dtype), "; the CUDA kernels take f16 and bf16");
}

Status cuda_backend_supports(BackendOp op, const AttentionShape& shape) {
  const char* name = backend_op_name(op);
  bool decode_kernels = false, prefill_kernels = false;
  switch (op) {
    case BackendOp::kDense:  // q_len 1: the decode kernels; several queries: the prefill kernels
      decode_kernels = prefill_kernels = true;
      break;
    case BackendOp::kSelectPrefill:
    case BackendOp::kSparsePrefill:
      prefill_kernels = true;
      break;
    case BackendOp::kSelectDecode:
    case BackendOp::kSparseDecode:
    case BackendOp::kSelectQuestDecode:
    case BackendOp::kSelectLessIsMoreDecode:
    case BackendOp::kSelectPrefillOracle:  // composed from select_decode (oracle_prefill_select.h)
      decode_kernels = true;
      break;
  }
  KC_CHECK_ARG(shape.num_kv_heads >= 1 && shape.num_heads >= 1 && shape.num_heads % shape.num_kv_heads == 0,
               "cuda backend, ", name, ": ", shape.num_heads, " query heads over ", shape.num_kv_heads,
               " KV heads is not a grouped-query layout");
  if (decode_kernels) {
    Status status = decode_kernels_support(shape);
    if (!status.ok()) return status.with_context(std::string("cuda backend, ") + name);
  }
  if (prefill_kernels) {
    Status status = prefill_kernels_support(shape);
    if (!status.ok()) return status.with_context(std::string("cuda backend, ") + name);
  }
  return ok_status();
}

}  // namespace kascade

namespace kascade::cuda {
namespace {

// The checks decode and prefill calls share: batch, dtypes, head dims, block-table coverage.
Status check_call_views(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options, const char* op) {
  KC_CHECK_ARG(q.batch >= 1, op, ": q.batch is ", q.batch, "; expected >= 1");
  Status dtype = cuda_backend_supports_dtype(q.dtype);
  if (!dtype.ok()) return dtype.with_context(op);
  KC_CHECK_ARG(kv.dtype == q.dtype, op, ": kv.dtype is ", dtype_name(kv.dtype), " but q.dtype is ",
               dtype_name(q.dtype));
  KC_CHECK_ARG(kv.head_dim == q.head_dim, op, ": kv.head_dim is ", kv.head_dim, " but q.head_dim is ", q.head_dim);
  KC_CHECK_ARG(q.batch <= options.max_batch, op, ": the call has ", q.batch,
               " sequences; the cuda backend was created for max_batch ", options.max_batch);
  KC_CHECK_ARG(kv.page_size >= 1, op, ": kv.page_size is ", kv.page_size, "; expected >= 1");
  const int64_t covered = static_cast<int64_t>(kv.max_pages_per_seq) * kv.page_size;
  KC_CHECK_ARG(covered >= options.max_seq_len, op, ": the block table covers ", covered, " keys (",
               kv.max_pages_per_seq, " pages of ", kv.page_size, "); the cuda backend was created for max_seq_len ",
               options.max_seq_len);
  return ok_status();
}

// The heads supported by the kernels of `kind` (kDense: decode and prefill; kSparsePrefill: prefill).
Status check_heads_supported(const CallHeads& heads, BackendOp kind, const char* op) {
  Status supported = cuda_backend_supports(kind, AttentionShape{heads.num_heads, heads.num_kv_heads, heads.head_dim});
  if (!supported.ok()) return supported.with_context(op);
  return ok_status();
}

}  // namespace

Result<DecodeKey> check_decode_call(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options,
                                    const char* op) {
  KC_RETURN_IF_ERROR(check_call_views(q, kv, options, op));
  KC_CHECK_ARG(is_decode_call(q), op, " takes one query per sequence (decode); the call has ", q.total_q,
               " queries for ", q.batch, " sequences (several queries per sequence are prefill: dense, "
               "select_prefill, sparse_prefill, anchor_prefill)");
  DecodeKey key;
  static_cast<CallHeads&>(key) = call_heads_of(q, kv);
  KC_RETURN_IF_ERROR(check_heads_supported(key, BackendOp::kDense, op));
  key.page_size = kv.page_size;
  key.plan_batch = decode_plan_batch(q.batch, options.max_batch);
  return key;
}

Result<PrefillKey> check_prefill_call(const QueryBatch& q, const PagedKv& kv, const CudaBackendOptions& options,
                                      const char* op) {
  KC_RETURN_IF_ERROR(check_call_views(q, kv, options, op));
  KC_CHECK_ARG(q.cu_q_lens != nullptr, op, ": q.cu_q_lens is null; a prefill call needs the device prefix sums");
  const int64_t most = int64_t{options.max_batch} * options.max_seq_len;
  KC_CHECK_ARG(q.total_q >= 0 && q.total_q <= most, op, ": q.total_q is ", q.total_q, "; the cuda backend was "
               "created for max_batch ", options.max_batch, " sequences of max_seq_len ", options.max_seq_len);
  PrefillKey key;
  static_cast<CallHeads&>(key) = call_heads_of(q, kv);
  KC_RETURN_IF_ERROR(check_heads_supported(key, BackendOp::kSparsePrefill, op));
  key.total_q = q.total_q;
  return key;
}

Status check_rows(const DecodeIndexRows& rows, int32_t batch, int32_t num_rows, const char* op) {
  KC_CHECK_ARG(rows.indices != nullptr && rows.row_lens != nullptr, op,
               ": rows.indices and rows.row_lens must be non-null");
  KC_CHECK_ARG(rows.batch == batch, op, ": rows.batch is ", rows.batch, "; the call has ", batch, " sequences");
  KC_CHECK_ARG(rows.num_rows == num_rows, op, ": rows.num_rows is ", rows.num_rows, "; expected ", num_rows);
  KC_CHECK_ARG(rows.k_max >= 1, op, ": rows.k_max is ", rows.k_max, "; expected >= 1");
  return ok_status();
}

Status check_k_per_seq(const int32_t* k_per_seq, int32_t batch, int32_t k_max, const char* op) {
  KC_CHECK_ARG(k_per_seq != nullptr, op, ": k_per_seq must be non-null");
  for (int32_t b = 0; b < batch; ++b) {
    KC_CHECK_ARG(k_per_seq[b] >= 0, op, ": sequence ", b, " asks for ", k_per_seq[b], " indices");
    KC_CHECK_ARG(k_per_seq[b] <= k_max, op, ": sequence ", b, " asks for ", k_per_seq[b],
                 " indices; rows hold k_max = ", k_max);
  }
  return ok_status();
}

}  // namespace kascade::cuda
