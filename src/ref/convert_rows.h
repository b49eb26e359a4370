// src/ref/convert_rows.h — row conversion between f32 / f16 / bf16 buffers and fp32 scratch, used by
// every CPU reference op to turn a query, key or value row into fp32 once per use (and to write o in
// the output dtype). Tight, branch-free loops the compiler can vectorise; bit-exact with
// load_as_float / store_from_float (include/kascade/dtype.h).
// Tested by tests/unit/ref/test_convert_rows.cpp (exhaustively over all 16-bit patterns against
// half_to_float / bf16_to_float, and against store_from_float for stores).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "kascade/dtype.h"

namespace kascade::ref {

// fp16 bits → fp32, branch-free (normals, subnormals, ±0, ±inf and NaN payloads exactly as
// half_to_float). Subnormal halves are rescaled by an exact power-of-two multiply.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp_mant = h & 0x7fffu;
  const float rescaled = std::bit_cast<float>(exp_mant << 13) * std::bit_cast<float>(uint32_t{(127 + 112) << 23});
  uint32_t bits = std::bit_cast<uint32_t>(rescaled);
  if (exp_mant >= 0x7c00u) bits = 0x7f800000u | ((exp_mant & 0x3ffu) << 13);  // inf / NaN
  return std::bit_cast<float>(bits | sign);
}

// dst[0..n) = elements offset .. offset + n of `base` (of `dtype`) as fp32.
// base: [>= offset + n] elements of `dtype`; dst: [n] fp32.
inline void load_row_f32(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, static_cast<const float*>(base) + offset, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int32_t c = 0; c < n; ++c) dst[c] = half_bits_to_float(src[c]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int32_t c = 0; c < n; ++c) dst[c] = std::bit_cast<float>(static_cast<uint32_t>(src[c]) << 16);
      return;
    }
  }
}

// Elements offset .. offset + n of `base` (of `dtype`) = src[0..n) rounded to nearest even.
// src: [n] fp32; base: [>= offset + n] elements of `dtype`.
inline void store_row_f32(const float* src, int32_t n, void* base, DType dtype, int64_t offset) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(base) + offset, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      Half* dst = static_cast<Half*>(base) + offset;
      for (int32_t c = 0; c < n; ++c) dst[c] = float_to_half(src[c]);
      return;
    }
    case DType::kBF16: {
      BFloat16* dst = static_cast<BFloat16*>(base) + offset;
      for (int32_t c = 0; c < n; ++c) dst[c] = float_to_bf16(src[c]);
      return;
    }
  }
}

// True for the three dtypes the library knows (a DType read from a corrupt view may hold anything).
inline bool is_known_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

}  // namespace kascade::ref
