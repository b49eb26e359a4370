// src/cuda/prefill/ws_tensor_map.cpp — K/V tensor maps of the warp-specialised TMA producer
// (ws_tensor_map.h). Tested through the TMA variant of tests/cuda/test_prefill_*.cpp.
#include "cuda/prefill/ws_tensor_map.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kascade::cuda::prefill {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

Result<EncodeTiled> encode_entry_point() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult query{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &query);
  if (e != cudaSuccess || query != cudaDriverEntryPointSuccess || fn == nullptr) {
    return unsupported("cuTensorMapEncodeTiled is not available from the CUDA driver (", cudaGetErrorString(e), ")");
  }
  return reinterpret_cast<EncodeTiled>(fn);
}

// cache: [rows][G][d] 16-bit elements; the map's dims (d, G, rows), box (64, 1, 128).
Status encode_one(EncodeTiled encode, const void* cache, const CallArgs& call, int head_dim, CUtensorMap& map) {
  const cuuint64_t rows = static_cast<cuuint64_t>(call.num_pages) * static_cast<cuuint64_t>(call.page_size);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(call.num_kv_heads), rows};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * 2,
                                 static_cast<cuuint64_t>(head_dim) * 2 * static_cast<cuuint64_t>(call.num_kv_heads)};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(kWsBlockKeys)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(cache), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return internal_error("cuTensorMapEncodeTiled failed with CUresult ", static_cast<int>(r));
  return ok_status();
}

}  // namespace

bool ws_tma_eligible(const CallArgs& call, int head_dim) {
  if (head_dim != 64 && head_dim != 128) return false;
  if (call.k == nullptr || call.v == nullptr || call.num_pages < 1 || call.page_size < 1) return false;
  if (reinterpret_cast<uintptr_t>(call.k) % 16 != 0 || reinterpret_cast<uintptr_t>(call.v) % 16 != 0) return false;
  const int64_t rows = static_cast<int64_t>(call.num_pages) * call.page_size;
  if (rows > (int64_t{1} << 31) - 1) return false;  // TMA coordinates are int32
  return call.page_size % kWsBlockKeys == 0 || call.max_pages_per_seq == 1;
}

Status encode_ws_kv_maps(const CallArgs& call, int head_dim, WsKvMaps& maps) {
  KC_CHECK_ARG(ws_tma_eligible(call, head_dim), "the call's K/V layout cannot be read by TMA (head dim ", head_dim,
               ", page size ", call.page_size, ", ", call.max_pages_per_seq, " pages per sequence)");
  KC_ASSIGN_OR_RETURN(const EncodeTiled encode, encode_entry_point());
  KC_RETURN_IF_ERROR(encode_one(encode, call.k, call, head_dim, maps.k));
  KC_RETURN_IF_ERROR(encode_one(encode, call.v, call, head_dim, maps.v));
  return ok_status();
}

}  // namespace kascade::cuda::prefill
