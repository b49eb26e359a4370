// test_convert_rows.cpp — the row conversions of src/ref/convert_rows.h: every one of the 65536
// fp16 and bf16 patterns widens to the same bits as half_to_float / bf16_to_float (the library's
// conversions, themselves tested exhaustively against an fp64 model in tests/unit/core); stores
// round exactly as store_from_float, on random values and the special ones (±0, ±inf, NaN,
// subnormals, ties).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "ref/convert_rows.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

TEST(ConvertRows, WidensEveryHalfPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(65536);
  ref::load_row_f32(all.data(), DType::kF16, 0, 65536, got.data());
  for (uint32_t i = 0; i < 65536; ++i) {
    const float expected = half_to_float(Half{static_cast<uint16_t>(i)});
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected)) << "pattern " << i;
  }
}

TEST(ConvertRows, WidensEveryBFloat16Pattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(65536);
  ref::load_row_f32(all.data(), DType::kBF16, 0, 65536, got.data());
  for (uint32_t i = 0; i < 65536; ++i) {
    const float expected = bf16_to_float(BFloat16{static_cast<uint16_t>(i)});
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected)) << "pattern " << i;
  }
}

TEST(ConvertRows, LoadsFromAnOffset) {
  const std::vector<float> values = {1.0f, -2.5f, 3.25f, 4.0f, 5.5f};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::vector<uint8_t> packed = pack_as(values, dtype);
    float got[3] = {};
    ref::load_row_f32(packed.data(), dtype, 2, 3, got);
    EXPECT_EQ(got[0], 3.25f);
    EXPECT_EQ(got[1], 4.0f);
    EXPECT_EQ(got[2], 5.5f);
  }
}

TEST(ConvertRows, StoresRoundLikeStoreFromFloat) {
  auto rng = rng_for_test();
  std::vector<float> values = random_floats(rng, 4096, -70000.0f, 70000.0f);
  const std::vector<float> more = random_floats(rng, 4096, -1e-6f, 1e-6f);  // fp16 subnormal range
  values.insert(values.end(), more.begin(), more.end());
  for (float special : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), 65520.0f, 1.0f + std::ldexp(1.0f, -11),
                        1.0f + 3 * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25), 1.0f + std::ldexp(1.0f, -8)}) {
    values.push_back(special);
  }
  const int32_t n = static_cast<int32_t>(values.size());
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint8_t> got(static_cast<size_t>(n + 3) * dtype_size(dtype), 0xAB);
    std::vector<uint8_t> expected = got;
    ref::store_row_f32(values.data(), n, got.data(), dtype, 3);
    for (int32_t i = 0; i < n; ++i) store_from_float(expected.data(), dtype, 3 + i, values[i]);
    EXPECT_EQ(got, expected) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace kascade::testing
