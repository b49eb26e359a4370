// tests/cuda/test_dense_decode.cpp — dense split-KV decode (src/cuda/attention/dense_decode.h)
// against ref::dense_attention_ref and an fp64 recomputation (FA3 rule), over dtypes, head dims,
// GQA group sizes 1..8, page sizes (shuffled pages, and contiguous single pages), the awkward
// lengths of DESIGN.md §4 alone and mixed in one batch; outputs NaN-poisoned with canary guards;
// the device error word must stay clear. Also: host-side refusals and the kv_len error bit.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "cuda/attention/dense_decode.h"
#include "cuda/common/device_errors.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DecodeCase;
using kascade::testing::DecodeProblem;
using kascade::testing::DeviceBuffer;

DecodeShape shape_of(const DecodeProblem& p) {
  DecodeShape s;
  s.dtype = p.spec().dtype;
  s.batch = p.batch();
  s.num_heads = p.spec().num_heads;
  s.num_kv_heads = p.spec().num_kv_heads;
  s.head_dim = p.spec().head_dim;
  s.page_size = p.page_size();
  s.max_seq_len = p.max_seq_len();
  return s;
}

void expect_dense_matches(const DecodeProblem& p) {
  const DecodeCase& c = p.spec();
  auto plan = plan_dense_decode(shape_of(p));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  DeviceBuffer workspace(plan->workspace.total_bytes);
  KC_ASSERT_OK(initialize_workspace(plan->workspace, workspace.data(), nullptr));
  const size_t rows = static_cast<size_t>(p.batch()) * c.num_heads;
  DeviceBuffer o(rows * c.head_dim * dtype_size(c.dtype)), lse(rows * sizeof(float));
  AttentionOutput out{o.data(), c.dtype, lse.as<float>()};
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(dense_decode(*plan, p.device_q(), p.device_kv(), params, out, workspace.data(), nullptr));
  const std::vector<float> got_o = testing::to_floats(o.download(), c.dtype);
  const std::vector<float> got_lse = lse.download_as<float>();
  EXPECT_TRUE(o.guards_intact());
  EXPECT_TRUE(lse.guards_intact());
  EXPECT_TRUE(testing::check_attention(p, testing::dense_key_lists(p), got_o, got_lse));

  std::vector<float> ref_o(rows * c.head_dim), ref_lse(rows);
  AttentionOutput ref_out{ref_o.data(), DType::kF32, ref_lse.data()};
  KC_ASSERT_OK(ref::dense_attention_ref(p.host_q(), p.host_kv(), params, ref_out));
  EXPECT_TRUE(testing::all_close(got_o, ref_o, {p.batch(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
  EXPECT_TRUE(testing::all_close(got_lse, ref_lse, {p.batch(), c.num_heads}, {1e-4, 1e-5}));
  auto errors = read_device_errors(plan->workspace, workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, 0u) << describe_device_errors(*errors);
}

// (dtype, H, G, head_dim, page_size; 0 = contiguous)
using Config = std::tuple<DType, int, int, int, int>;

class DenseDecodeTest : public ::testing::TestWithParam<Config> {
 protected:
  DecodeCase make_case(std::vector<int32_t> lens) const {
    const auto [dtype, h, g, d, page] = GetParam();
    DecodeCase c;
    c.dtype = dtype;
    c.num_heads = h;
    c.num_kv_heads = g;
    c.head_dim = d;
    c.page_size = page;
    c.kv_lens = std::move(lens);
    return c;
  }
};

TEST_P(DenseDecodeTest, AwkwardLengthsOneSequenceEach) {
  KC_SKIP_WITHOUT_GPU();
  uint64_t salt = 0;
  for (int n : testing::awkward_lengths()) {
    SCOPED_TRACE("kv_len " + std::to_string(n));
    auto rng = testing::rng_for_test(salt++);
    DecodeProblem p(make_case({n}), rng);
    expect_dense_matches(p);
  }
}

TEST_P(DenseDecodeTest, AwkwardLengthsMixedInOneBatch) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  std::vector<int32_t> lens(testing::awkward_lengths().begin(), testing::awkward_lengths().end());
  std::shuffle(lens.begin(), lens.end(), rng);
  DecodeProblem p(make_case(lens), rng);
  expect_dense_matches(p);
}

std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  const auto [dtype, h, g, d, page] = info.param;
  return std::string(dtype_name(dtype)) + "_H" + std::to_string(h) + "_G" + std::to_string(g) + "_d" +
         std::to_string(d) + (page ? "_page" + std::to_string(page) : "_contiguous");
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseDecodeTest,
                         ::testing::Values(Config{DType::kF16, 8, 2, 128, 16}, Config{DType::kBF16, 8, 1, 64, 32},
                                           Config{DType::kF16, 4, 4, 64, 0}, Config{DType::kBF16, 12, 4, 128, 128},
                                           Config{DType::kF16, 14, 2, 128, 64}, Config{DType::kBF16, 10, 2, 64, 16},
                                           Config{DType::kF16, 6, 3, 128, 0}),
                         config_name);

TEST(DenseDecode, LongSequenceManySplits) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeCase c;
  c.dtype = DType::kBF16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.page_size = 64;
  c.kv_lens = {20000};
  DecodeProblem p(c, rng);
  expect_dense_matches(p);
}

TEST(DenseDecode, RefusesViewsThatDoNotMatchThePlan) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeCase c;
  c.kv_lens = {40, 50};
  DecodeProblem p(c, rng);
  DecodeShape s = shape_of(p);
  auto plan = plan_dense_decode(s);
  ASSERT_TRUE(plan.ok());
  DeviceBuffer workspace(plan->workspace.total_bytes), o(2 * 8 * 128 * 2);
  AttentionOutput out{o.data(), DType::kF16, nullptr};
  AttentionParams params;
  params.scale = p.scale();
  QueryBatch q = p.device_q();
  q.head_dim = 64;
  Status st = dense_decode(*plan, q, p.device_kv(), params, out, workspace.data(), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("q.head_dim is 64"), std::string::npos) << st.message();
  out.dtype = DType::kF32;
  st = dense_decode(*plan, p.device_q(), p.device_kv(), params, out, workspace.data(), nullptr);
  EXPECT_NE(st.message().find("out.dtype is f32"), std::string::npos) << st.message();
  out.dtype = DType::kF16;
  params.scale = 0.0f;
  st = dense_decode(*plan, p.device_q(), p.device_kv(), params, out, workspace.data(), nullptr);
  EXPECT_NE(st.message().find("params.scale"), std::string::npos) << st.message();
  params.scale = p.scale();
  st = dense_decode(*plan, p.device_q(), p.device_kv(), params, out, nullptr, nullptr);
  EXPECT_NE(st.message().find("workspace is null"), std::string::npos) << st.message();
}

TEST(DenseDecode, FlagsLengthsAbovePlannedMaximum) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeCase c;
  c.kv_lens = {64, 64};
  DecodeProblem p(c, rng);
  DecodeShape s = shape_of(p);
  s.max_seq_len = 48;  // the run's kv_len 64 exceeds what the plan allows
  auto plan = plan_dense_decode(s);
  ASSERT_TRUE(plan.ok());
  DeviceBuffer workspace(plan->workspace.total_bytes), o(2 * 8 * 128 * 2), lse(2 * 8 * 4);
  KC_ASSERT_OK(initialize_workspace(plan->workspace, workspace.data(), nullptr));
  AttentionOutput out{o.data(), DType::kF16, lse.as<float>()};
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(dense_decode(*plan, p.device_q(), p.device_kv(), params, out, workspace.data(), nullptr));
  auto errors = read_device_errors(plan->workspace, workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, static_cast<uint32_t>(kErrorKvLen));
  auto cleared = read_device_errors(plan->workspace, workspace.data(), nullptr);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, 0u);
  EXPECT_TRUE(o.guards_intact());
}

}  // namespace
}  // namespace kascade::cuda
