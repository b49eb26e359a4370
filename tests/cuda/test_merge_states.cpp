// tests/cuda/test_merge_states.cpp — the GPU merge of partial attention states
// (src/cuda/attention/merge_states.h) against ref::merge_states_ref, including empty states
// (lse = −inf on one or both sides) and outputs aliasing input a.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda/attention/merge_states.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DeviceBuffer;

TEST(MergeStates, MatchesReferenceWithEmptyStatesAndAliasing) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  for (int32_t d : {64, 128, 40}) {
    const int64_t rows = 37;
    auto o_a = testing::random_floats(rng, rows * d, -1.0f, 1.0f);
    auto o_b = testing::random_floats(rng, rows * d, -1.0f, 1.0f);
    auto lse_a = testing::random_floats(rng, rows, -5.0f, 20.0f);
    auto lse_b = testing::random_floats(rng, rows, -5.0f, 20.0f);
    const float inf = std::numeric_limits<float>::infinity();
    lse_a[0] = -inf;                 // only b
    lse_b[1] = -inf;                 // only a
    lse_a[2] = lse_b[2] = -inf;      // both empty
    lse_a[3] = 80.0f, lse_b[3] = -80.0f;  // one side negligible
    std::vector<float> want_o(rows * d), want_lse(rows);
    KC_ASSERT_OK(ref::merge_states_ref(o_a.data(), lse_a.data(), o_b.data(), lse_b.data(), rows, d, want_o.data(),
                                       want_lse.data()));
    DeviceBuffer oa = testing::upload_vector(o_a), ob = testing::upload_vector(o_b);
    DeviceBuffer la = testing::upload_vector(lse_a), lb = testing::upload_vector(lse_b);
    DeviceBuffer o(rows * d * sizeof(float)), lse(rows * sizeof(float));
    KC_ASSERT_OK(merge_states(oa.as<float>(), la.as<float>(), ob.as<float>(), lb.as<float>(), rows, d, o.as<float>(),
                              lse.as<float>(), nullptr));
    EXPECT_TRUE(testing::all_close(o.download_as<float>(), want_o, {rows, d}, {1e-6, 1e-5}));
    EXPECT_TRUE(testing::all_close(lse.download_as<float>(), want_lse, {rows}, {1e-6, 1e-6}));
    EXPECT_TRUE(o.guards_intact() && lse.guards_intact());
    // In place into a.
    KC_ASSERT_OK(merge_states(oa.as<float>(), la.as<float>(), ob.as<float>(), lb.as<float>(), rows, d, oa.as<float>(),
                              la.as<float>(), nullptr));
    EXPECT_TRUE(testing::all_close(oa.download_as<float>(), want_o, {rows, d}, {1e-6, 1e-5}));
    EXPECT_TRUE(testing::all_close(la.download_as<float>(), want_lse, {rows}, {1e-6, 1e-6}));
  }
}

TEST(MergeStates, RefusesNullPointersAndEmptyShapes) {
  KC_SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1024);
  float* f = buf.as<float>();
  EXPECT_EQ(merge_states(nullptr, f, f, f, 1, 4, f, f, nullptr).code(), StatusCode::kInvalidArgument);
  const Status st = merge_states(f, f, f, f, 0, 4, f, f, nullptr);
  EXPECT_NE(st.message().find("rows is 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kascade::cuda
