// src/policy/cpu_backend.cpp — CpuBackend (see cpu_backend.h): memory, and delegation to the fast
// kernels (cpu_fast_attention.h, cpu_fast_select.h) or the reference ones (src/ref, cpu_select.h)
// as CpuBackendOptions says. Tested by tests/unit/policy/test_cpu_backend.cpp and
// test_cpu_fast_kernels.cpp.
#include "policy/cpu_backend.h"

#include <cstring>
#include <new>

#include "policy/cpu_baselines.h"
#include "policy/cpu_fast_attention.h"
#include "policy/cpu_fast_select.h"
#include "policy/cpu_select.h"
#include "ref/attention_ref.h"

namespace kascade {

Status CpuBackend::supports(BackendOp op, const AttentionShape& shape) const {
  KC_CHECK_ARG(shape.num_heads >= 1 && shape.num_kv_heads >= 1 && shape.num_heads % shape.num_kv_heads == 0,
               "cpu backend, ", backend_op_name(op), ": ", shape.num_heads, " query heads over ", shape.num_kv_heads,
               " KV heads is not a grouped-query layout");
  KC_CHECK_ARG(shape.head_dim >= 1, "cpu backend, ", backend_op_name(op), ": head_dim is ", shape.head_dim);
  return ok_status();
}

Result<BackendBuffer> CpuBackend::allocate(size_t bytes) {
  KC_CHECK_ARG(bytes >= 1, "cpu backend: allocate of 0 bytes");
  constexpr std::align_val_t kAlign{64};
  void* data = ::operator new(bytes, kAlign, std::nothrow);
  if (data == nullptr) return resource_exhausted("cpu backend: cannot allocate ", bytes, " bytes of host memory");
  return BackendBuffer(data, bytes, [](void* p) { ::operator delete(p, std::align_val_t{64}); });
}

Status CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return ok_status();
  KC_CHECK_ARG(dst != nullptr && src != nullptr, "cpu backend: copy_from_host of ", bytes, " bytes with a null pointer");
  std::memcpy(dst, src, bytes);
  return ok_status();
}

Status CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return ok_status();
  KC_CHECK_ARG(dst != nullptr && src != nullptr, "cpu backend: copy_to_host of ", bytes, " bytes with a null pointer");
  std::memcpy(dst, src, bytes);
  return ok_status();
}

Status CpuBackend::dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                         const AttentionOutput& out) {
  return fast() ? policy::fast_dense_attention(q, kv, params, out) : ref::dense_attention_ref(q, kv, params, out);
}

Status CpuBackend::sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                 const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  return fast() ? policy::fast_sparse_decode(q, kv, params, rows, head_map, out)
                : ref::sparse_decode_ref(q, kv, params, rows, head_map, out);
}

Status CpuBackend::sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  return fast() ? policy::fast_sparse_prefill(q, kv, params, rows, head_map, out)
                : ref::sparse_prefill_ref(q, kv, params, rows, head_map, out);
}

Status CpuBackend::select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                 const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  return fast() ? policy::fast_select_decode(q, kv, params, pooling, k_per_seq, rows)
                : policy::cpu_select_decode(q, kv, params, pooling, k_per_seq, rows);
}

Status CpuBackend::select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const ScorePooling& pooling, const PrefillIndexRows& rows) {
  return fast() ? policy::fast_select_prefill(q, kv, params, pooling, rows)
                : policy::cpu_select_prefill(q, kv, params, pooling, rows);
}

Status CpuBackend::select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                         const PrefillIndexRows& rows) {
  return policy::cpu_select_prefill_oracle(q, kv, params, rows);
}

Status CpuBackend::select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size,
                                       const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  return policy::cpu_select_quest_decode(q, kv, page_size, k_per_seq, rows);
}

Status CpuBackend::select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                            const int32_t* k_per_seq, int32_t num_sinks,
                                            const DecodeIndexRows& rows) {
  return policy::cpu_select_lessismore_decode(q, kv, params, k_per_seq, num_sinks, rows);
}

std::shared_ptr<AttentionBackend> make_cpu_backend(CpuBackendOptions options) {
  return std::make_shared<CpuBackend>(options);
}

}  // namespace kascade
