// tests/cuda/test_decode_graph.cpp — a decode step (an anchor layer, then a reuse layer reading
// the anchor's fresh rows through a head map) captured once in a CUDA graph with plans sized by
// max_seq_len, then replayed with new lengths (including 1 and max_seq_len), new queries and
// therefore new indices. Every replay is checked against ref::sparse_decode_ref /
// ref::pooled_scores_decode_ref + ref::topk_select_ref and the fp64 recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/kascade/anchor_decode.h"
#include "cuda/kascade/sparse_decode.h"
#include "cuda_test_support.h"
#include "ref/attention_ref.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::cuda {
namespace {

using kascade::testing::DecodeCase;
using kascade::testing::DecodeProblem;
using kascade::testing::DeviceBuffer;

TEST(DecodeGraph, AnchorThenReuseReplayedWithNewLengthsAndIndices) {
  KC_SKIP_WITHOUT_GPU();
  auto rng = testing::rng_for_test();
  constexpr int32_t kMaxSeq = 4096;
  DecodeCase c;
  c.dtype = DType::kBF16;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.page_size = 16;
  c.kv_lens = {100, 3000, 17};
  c.max_seq_len = kMaxSeq;
  DecodeProblem anchor_layer(c, rng), reuse_layer(c, rng);  // two layers' q, K, V
  const int32_t batch = anchor_layer.batch(), h_count = c.num_heads, d = c.head_dim, rows_r = c.num_kv_heads;

  DecodeShape shape;
  shape.dtype = c.dtype;
  shape.batch = batch;
  shape.num_heads = h_count;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = d;
  shape.page_size = c.page_size;
  shape.max_seq_len = kMaxSeq;
  AnchorOptions options;
  options.pooling.num_rows = rows_r;
  options.budget.k_min = 16;
  auto anchor_plan = plan_anchor_decode(shape, options);
  ASSERT_TRUE(anchor_plan.ok()) << anchor_plan.status().to_string();
  auto reuse_plan = plan_sparse_decode(shape, IndexGranularity::kPerKvGroup, anchor_plan->k_max);
  ASSERT_TRUE(reuse_plan.ok()) << reuse_plan.status().to_string();
  const int32_t k_max = anchor_plan->k_max;

  DeviceBuffer anchor_ws(anchor_plan->workspace.total_bytes), reuse_ws(reuse_plan->workspace.total_bytes);
  KC_ASSERT_OK(initialize_workspace(anchor_plan->workspace, anchor_ws.data(), nullptr));
  KC_ASSERT_OK(initialize_workspace(reuse_plan->workspace, reuse_ws.data(), nullptr));
  DeviceBuffer indices(static_cast<size_t>(batch) * rows_r * k_max * sizeof(int32_t), 0x7F);
  DeviceBuffer row_lens(static_cast<size_t>(batch) * rows_r * sizeof(int32_t), 0x7F);
  const std::vector<int32_t> head_map = {1, 0};  // the reuse layer's groups read swapped anchor rows
  DeviceBuffer map_d = testing::upload_vector(head_map);
  const size_t out_elems = static_cast<size_t>(batch) * h_count * d;
  DeviceBuffer o_anchor(out_elems * 2), lse_anchor(batch * h_count * 4), o_reuse(out_elems * 2),
      lse_reuse(batch * h_count * 4);
  DecodeIndexRows rows{indices.as<int32_t>(), row_lens.as<int32_t>(), batch, rows_r, k_max,
                       IndexGranularity::kPerKvGroup};
  AttentionParams params;
  params.scale = anchor_layer.scale();

  cudaStream_t stream = nullptr;
  KC_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  KC_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status anchor_status = anchor_decode(*anchor_plan, anchor_layer.device_q(), anchor_layer.device_kv(), params,
                                             rows, AttentionOutput{o_anchor.data(), c.dtype, lse_anchor.as<float>()},
                                             AnchorRunExtras{}, anchor_ws.data(), stream);
  const Status reuse_status = sparse_decode(*reuse_plan, reuse_layer.device_q(), reuse_layer.device_kv(), params, rows,
                                            map_d.as<int32_t>(),
                                            AttentionOutput{o_reuse.data(), c.dtype, lse_reuse.as<float>()},
                                            reuse_ws.data(), stream);
  cudaGraph_t graph = nullptr;
  KC_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  KC_ASSERT_OK(anchor_status);
  KC_ASSERT_OK(reuse_status);
  cudaGraphExec_t exec = nullptr;
  KC_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  const std::vector<std::vector<int32_t>> steps = {{100, 3000, 17}, {kMaxSeq, 1, 2049}, {33, 4095, 128}};
  for (size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE("replay " + std::to_string(step));
    anchor_layer.set_kv_lens(steps[step]);
    reuse_layer.set_kv_lens(steps[step]);
    anchor_layer.redraw_q(rng);
    reuse_layer.redraw_q(rng);
    o_anchor.fill(0xFF);
    o_reuse.fill(0xFF);
    indices.fill(0x7F);
    KC_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    KC_ASSERT_CUDA(cudaStreamSynchronize(stream));

    const auto got_indices = indices.download_as<int32_t>();
    const auto got_lens = row_lens.download_as<int32_t>();
    // Selection: tie-aware sets against the reference pooled scores.
    std::vector<float> ref_scores(static_cast<size_t>(batch) * rows_r * kMaxSeq);
    KC_ASSERT_OK(ref::pooled_scores_decode_ref(anchor_layer.host_q(), anchor_layer.host_kv(), params,
                                               ref::PoolingSpec{rows_r, ref::PoolReduce::kSum}, ref_scores.data(),
                                               kMaxSeq));
    for (int32_t b = 0; b < batch; ++b) {
      const int32_t n = steps[step][b];
      const int32_t k = static_cast<int32_t>(budget_k(n, options.budget));
      for (int32_t r = 0; r < rows_r; ++r) {
        const int64_t row = static_cast<int64_t>(b) * rows_r + r;
        ASSERT_EQ(got_lens[row], k);
        const std::vector<float> s(ref_scores.begin() + row * kMaxSeq, ref_scores.begin() + row * kMaxSeq + n);
        std::vector<int32_t> want(k);
        KC_ASSERT_OK(ref::topk_select_ref(s.data(), n, k, want.data()));
        const std::vector<int32_t> got(got_indices.begin() + row * k_max, got_indices.begin() + row * k_max + k);
        EXPECT_TRUE(testing::topk_sets_equivalent(got, want, s, 1e-3));
      }
    }
    // Anchor output (sparse over its own rows) and reuse output (rows through the head map).
    const auto anchor_keys =
        testing::sparse_key_lists(anchor_layer, got_indices, got_lens, rows_r, k_max, IndexGranularity::kPerKvGroup, {});
    EXPECT_TRUE(testing::check_attention(anchor_layer, anchor_keys, testing::to_floats(o_anchor.download(), c.dtype),
                                         lse_anchor.download_as<float>()));
    const auto reuse_keys = testing::sparse_key_lists(reuse_layer, got_indices, got_lens, rows_r, k_max,
                                                      IndexGranularity::kPerKvGroup, head_map);
    const std::vector<float> got_reuse = testing::to_floats(o_reuse.download(), c.dtype);
    EXPECT_TRUE(testing::check_attention(reuse_layer, reuse_keys, got_reuse, lse_reuse.download_as<float>()));
    std::vector<int32_t> host_indices = got_indices, host_lens = got_lens;
    DecodeIndexRows host_rows{host_indices.data(), host_lens.data(), batch, rows_r, k_max, IndexGranularity::kPerKvGroup};
    std::vector<float> ref_o(out_elems), ref_lse(batch * h_count);
    KC_ASSERT_OK(ref::sparse_decode_ref(reuse_layer.host_q(), reuse_layer.host_kv(), params, host_rows,
                                        head_map.data(), AttentionOutput{ref_o.data(), DType::kF32, ref_lse.data()}));
    EXPECT_TRUE(testing::all_close(got_reuse, ref_o, {batch, h_count, d}, testing::tolerance_for(c.dtype)));
    for (auto* plan_ws : {&anchor_ws, &reuse_ws}) {
      const WorkspaceLayout& layout = plan_ws == &anchor_ws ? anchor_plan->workspace : reuse_plan->workspace;
      auto errors = read_device_errors(layout, plan_ws->data(), stream);
      ASSERT_TRUE(errors.ok());
      EXPECT_EQ(*errors, 0u) << describe_device_errors(*errors);
    }
  }
  KC_ASSERT_CUDA(cudaGraphExecDestroy(exec));
  KC_ASSERT_CUDA(cudaGraphDestroy(graph));
  KC_ASSERT_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace kascade::cuda
