// tests/cuda/test_sparse_decode.cpp — sparse (reuse) decode over index rows
// (src/cuda/kascade/sparse_decode.h) against ref::sparse_decode_ref and an fp64 recomputation:
// per KV group through a random head map, identity, and per query head; rows in random order
// and ascending; empty rows, single keys, rows long enough to split across CTAs; awkward lengths
// in mixed batches; NaN-poisoned outputs with guards; the error word for a bad index.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/kascade/sparse_decode.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DecodeCase;
using kascade::testing::DecodeProblem;
using kascade::testing::DeviceBuffer;

struct HostRows {
  std::vector<int32_t> indices, row_lens;
  int32_t num_rows = 0, k_max = 0;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
};

// Row lengths cycle through 0, 1, the maximum, and random values.
HostRows make_rows(std::mt19937_64& rng, const DecodeProblem& p, int32_t num_rows, int32_t k_max,
                   IndexGranularity granularity, bool sorted) {
  HostRows r;
  r.num_rows = num_rows;
  r.k_max = k_max;
  r.granularity = granularity;
  r.indices.assign(static_cast<size_t>(p.batch()) * num_rows * k_max, -1);
  r.row_lens.assign(static_cast<size_t>(p.batch()) * num_rows, 0);
  int counter = 0;
  for (int32_t b = 0; b < p.batch(); ++b) {
    const int32_t n = p.kv_lens()[b];
    const int32_t most = std::min(n, k_max);
    for (int32_t row = 0; row < num_rows; ++row) {
      int32_t len = 0;
      switch (counter++ % 5) {
        case 0: len = most; break;
        case 1: len = std::min(most, 1); break;
        case 2: len = b == 0 ? 0 : most; break;
        default: len = std::uniform_int_distribution<int32_t>(0, most)(rng);
      }
      const std::vector<int32_t> keys = testing::random_subset(rng, n, len, sorted);
      std::copy(keys.begin(), keys.end(), r.indices.begin() + (static_cast<int64_t>(b) * num_rows + row) * k_max);
      r.row_lens[b * num_rows + row] = len;
    }
  }
  return r;
}

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

void expect_sparse_matches(const DecodeProblem& p, const HostRows& rows, const std::vector<int32_t>& head_map) {
  const DecodeCase& c = p.spec();
  auto plan = plan_sparse_decode(shape_of(p), rows.granularity, rows.k_max);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  DeviceBuffer workspace(plan->workspace.total_bytes);
  KC_ASSERT_OK(initialize_workspace(plan->workspace, workspace.data(), nullptr));
  DeviceBuffer indices = testing::upload_vector(rows.indices);
  DeviceBuffer row_lens = testing::upload_vector(rows.row_lens);
  DeviceBuffer map_d = testing::upload_vector(head_map);
  DecodeIndexRows view{indices.as<int32_t>(), row_lens.as<int32_t>(), p.batch(), rows.num_rows, rows.k_max,
                       rows.granularity};
  const size_t out_rows = static_cast<size_t>(p.batch()) * c.num_heads;
  DeviceBuffer o(out_rows * c.head_dim * dtype_size(c.dtype)), lse(out_rows * sizeof(float));
  AttentionOutput out{o.data(), c.dtype, lse.as<float>()};
  AttentionParams params;
  params.scale = p.scale();
  const int32_t* map_ptr = head_map.empty() ? nullptr : map_d.as<int32_t>();
  KC_ASSERT_OK(sparse_decode(*plan, p.device_q(), p.device_kv(), params, view, map_ptr, out, workspace.data(), nullptr));
  const std::vector<float> got_o = testing::to_floats(o.download(), c.dtype);
  const std::vector<float> got_lse = lse.download_as<float>();
  EXPECT_TRUE(o.guards_intact());
  EXPECT_TRUE(lse.guards_intact());
  const auto keys = testing::sparse_key_lists(p, rows.indices, rows.row_lens, rows.num_rows, rows.k_max,
                                              rows.granularity, head_map);
  EXPECT_TRUE(testing::check_attention(p, keys, got_o, got_lse));

  std::vector<int32_t> host_indices = rows.indices, host_lens = rows.row_lens;
  DecodeIndexRows host_view{host_indices.data(), host_lens.data(), p.batch(), rows.num_rows, rows.k_max,
                            rows.granularity};
  std::vector<float> ref_o(out_rows * c.head_dim), ref_lse(out_rows);
  AttentionOutput ref_out{ref_o.data(), DType::kF32, ref_lse.data()};
  KC_ASSERT_OK(ref::sparse_decode_ref(p.host_q(), p.host_kv(), params, host_view,
                                      head_map.empty() ? nullptr : head_map.data(), ref_out));
  EXPECT_TRUE(testing::all_close(got_o, ref_o, {p.batch(), c.num_heads, c.head_dim}, testing::tolerance_for(c.dtype)));
  EXPECT_TRUE(testing::all_close(got_lse, ref_lse, {p.batch(), c.num_heads}, {1e-4, 1e-5}));
  auto errors = read_device_errors(plan->workspace, workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, 0u) << describe_device_errors(*errors);
}

DecodeCase make_case(DType dtype, int h, int g, int d, int page, std::vector<int32_t> lens) {
  DecodeCase c;
  c.dtype = dtype;
  c.num_heads = h;
  c.num_kv_heads = g;
  c.head_dim = d;
  c.page_size = page;
  c.kv_lens = std::move(lens);
  return c;
}

std::vector<int32_t> mixed_lengths(std::mt19937_64& rng) {
  std::vector<int32_t> lens(testing::awkward_lengths().begin(), testing::awkward_lengths().end());
  std::shuffle(lens.begin(), lens.end(), rng);
  return lens;
}

TEST(SparseDecode, PerKvGroupThroughRandomHeadMap) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 16, 4, 128, 16, mixed_lengths(rng)), rng);
  const int32_t num_rows = 3;  // fewer rows than groups: several groups share an anchor row
  const HostRows rows = make_rows(rng, p, num_rows, 600, IndexGranularity::kPerKvGroup, /*sorted=*/false);
  std::vector<int32_t> head_map(4);
  for (auto& m : head_map) m = std::uniform_int_distribution<int32_t>(0, num_rows - 1)(rng);
  expect_sparse_matches(p, rows, head_map);
}

TEST(SparseDecode, IdentityMapAscendingRowsBf16HeadDim64) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kBF16, 8, 1, 64, 32, mixed_lengths(rng)), rng);
  const HostRows rows = make_rows(rng, p, 1, 4097, IndexGranularity::kPerKvGroup, /*sorted=*/true);
  expect_sparse_matches(p, rows, {});
}

TEST(SparseDecode, PerQueryHeadRows) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kBF16, 6, 2, 128, 0, mixed_lengths(rng)), rng);
  const HostRows rows = make_rows(rng, p, 6, 300, IndexGranularity::kPerQueryHead, /*sorted=*/false);
  expect_sparse_matches(p, rows, {});
}

TEST(SparseDecode, GroupSizesOneToEight) {
  KC_SKIP_WITHOUT_GPU();
  for (int g = 1; g <= 8; ++g) {
    SCOPED_TRACE("group size " + std::to_string(g));
    auto rng = testing::rng_for_test(g);
    DecodeProblem p(make_case(g % 2 ? DType::kF16 : DType::kBF16, 2 * g, 2, g % 3 ? 128 : 64, 64, {129, 1000}), rng);
    const HostRows rows = make_rows(rng, p, 2, 900, IndexGranularity::kPerKvGroup, /*sorted=*/g % 2 == 0);
    expect_sparse_matches(p, rows, {1, 0});
  }
}

TEST(SparseDecode, LongRowSplitAcrossCtasForOneSequence) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 32, 8, 128, 16, {40000}), rng);
  HostRows rows;
  rows.num_rows = 8;
  rows.k_max = 4000;
  rows.indices.assign(8 * 4000, -1);
  rows.row_lens.assign(8, 4000);
  for (int r = 0; r < 8; ++r) {
    const auto keys = testing::random_subset(rng, 40000, 4000, /*sorted=*/r % 2 == 0);
    std::copy(keys.begin(), keys.end(), rows.indices.begin() + r * 4000);
  }
  expect_sparse_matches(p, rows, {});
}

TEST(SparseDecode, FlagsIndicesOutsideTheSequence) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  DecodeProblem p(make_case(DType::kF16, 4, 2, 128, 16, {100, 200}), rng);
  HostRows rows = make_rows(rng, p, 2, 50, IndexGranularity::kPerKvGroup, true);
  rows.row_lens = {50, 50, 50, 50};
  for (int r = 0; r < 4; ++r) {
    const auto keys = testing::random_subset(rng, 100, 50, true);
    std::copy(keys.begin(), keys.end(), rows.indices.begin() + r * 50);
  }
  rows.indices[3] = 150;  // sequence 0 has 100 keys
  auto plan = plan_sparse_decode(shape_of(p), IndexGranularity::kPerKvGroup, 50);
  ASSERT_TRUE(plan.ok());
  DeviceBuffer workspace(plan->workspace.total_bytes), o(2 * 4 * 128 * 2), lse(2 * 4 * 4);
  KC_ASSERT_OK(initialize_workspace(plan->workspace, workspace.data(), nullptr));
  DeviceBuffer indices = testing::upload_vector(rows.indices), lens = testing::upload_vector(rows.row_lens);
  DecodeIndexRows view{indices.as<int32_t>(), lens.as<int32_t>(), 2, 2, 50, IndexGranularity::kPerKvGroup};
  AttentionOutput out{o.data(), DType::kF16, lse.as<float>()};
  AttentionParams params;
  params.scale = p.scale();
  KC_ASSERT_OK(sparse_decode(*plan, p.device_q(), p.device_kv(), params, view, nullptr, out, workspace.data(), nullptr));
  auto errors = read_device_errors(plan->workspace, workspace.data(), nullptr);
  ASSERT_TRUE(errors.ok());
  EXPECT_EQ(*errors, static_cast<uint32_t>(kErrorIndex)) << describe_device_errors(*errors);
  // Host-side refusals name the field.
  DecodeIndexRows bad = view;
  bad.num_rows = 3;
  Status st = sparse_decode(*plan, p.device_q(), p.device_kv(), params, bad, nullptr, out, workspace.data(), nullptr);
  EXPECT_NE(st.message().find("rows.num_rows is 3"), std::string::npos) << st.message();
  bad = view;
  bad.granularity = IndexGranularity::kPerQueryHead;
  st = sparse_decode(*plan, p.device_q(), p.device_kv(), params, bad, nullptr, out, workspace.data(), nullptr);
  EXPECT_NE(st.message().find("rows.granularity"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kascade::cuda
