// dtype.cpp — fp16 / bf16 <-> fp32 conversion on the host (include/kascade/dtype.h).
// Round-to-nearest-even, bit-exact with the GPU's cvt.rn. Tested exhaustively by
// tests/unit/core/test_core.cpp.
#include "kascade/dtype.h"

#include <bit>
#include <cmath>
#include <string>

namespace kascade {

size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32" || name == "F32") return DType::kF32;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half" || name == "F16")
    return DType::kF16;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::kBF16;
  return invalid_argument("unknown dtype '", name, "'; expected f32, f16 or bf16");
}

float half_to_float(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

Half float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    const uint16_t nan_bit = abs > 0x7f800000u ? 0x200u : 0u;
    return Half{static_cast<uint16_t>(sign | 0x7c00u | nan_bit | ((abs & 0x7fffffu) >> 13))};
  }
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127 + 15;
  if (exp >= 0x1f) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow → inf
  if (exp <= 0) {
    // Result is subnormal (or zero). Shift the full mantissa (with implicit 1) right.
    if (exp < -10) return Half{static_cast<uint16_t>(sign)};
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return Half{static_cast<uint16_t>(sign | h)};
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | ((abs >> 13) & 0x3ffu);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into exp (→ inf): correct
  return Half{static_cast<uint16_t>(sign | h)};
}

float bf16_to_float(BFloat16 b) { return std::bit_cast<float>(static_cast<uint32_t>(b.bits) << 16); }

BFloat16 float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((x >> 16) | 0x40u)};
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>((x + rounding) >> 16)};
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kF32: return value;
    case DType::kF16: return half_to_float(float_to_half(value));
    case DType::kBF16: return bf16_to_float(float_to_bf16(value));
  }
  return value;
}

double dtype_epsilon(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::ldexp(1.0, -24);
    case DType::kF16: return std::ldexp(1.0, -11);
    case DType::kBF16: return std::ldexp(1.0, -8);
  }
  return 0.0;
}

void convert_buffer(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_from_float(dst, dst_dtype, i, load_as_float(src, src_dtype, i));
}

}  // namespace kascade
