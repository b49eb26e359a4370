// kascade/dtype.h — element types on the host: fp32, fp16 and bf16.
//
// fp16 and bf16 values are stored as raw 16-bit patterns (Half, BFloat16) and converted with
// round-to-nearest-even, exactly as the GPU's cvt instructions do, so a tensor rounded on the
// host equals the same tensor rounded on the device. Tested by tests/unit/core/test_core.cpp
// (exhaustive over all 65536 patterns against an independent bit-level reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kascade/status.h"

namespace kascade {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Bytes per element: 4, 2, 2.
size_t dtype_size(DType dtype);
// "f32", "f16", "bf16".
const char* dtype_name(DType dtype);
// Parses "f32|fp32|float32", "f16|fp16|float16|half", "bf16|bfloat16".
Result<DType> parse_dtype(std::string_view name);

struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

float half_to_float(Half h);
Half float_to_half(float f);  // round to nearest even; overflow → ±inf; NaN stays NaN
float bf16_to_float(BFloat16 b);
BFloat16 float_to_bf16(float f);  // round to nearest even; NaN stays NaN

// Reads element `index` of a buffer of `dtype` as float.
inline float load_as_float(const void* base, DType dtype, int64_t index);
// Writes `value` rounded to `dtype` into element `index`.
inline void store_from_float(void* base, DType dtype, int64_t index, float value);
// Rounds `value` through `dtype` and back (identity for f32).
float round_to_dtype(float value, DType dtype);
// Unit roundoff of the dtype: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16).
double dtype_epsilon(DType dtype);

// Converts n elements between buffers of any two dtypes.
void convert_buffer(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

// ---- inline definitions ----
inline float load_as_float(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[index];
    case DType::kF16:
      return half_to_float(static_cast<const Half*>(base)[index]);
    case DType::kBF16:
      return bf16_to_float(static_cast<const BFloat16*>(base)[index]);
  }
  return 0.0f;
}

inline void store_from_float(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[index] = value;
      return;
    case DType::kF16:
      static_cast<Half*>(base)[index] = float_to_half(value);
      return;
    case DType::kBF16:
      static_cast<BFloat16*>(base)[index] = float_to_bf16(value);
      return;
  }
}

}  // namespace kascade
