// tests/unit/policy/compose_ref.cpp — Kascade composed from src/ref ops (see compose_ref.h).
#include "compose_ref.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ref/attention_ref.h"
#include "ref/prefill_rows.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"

namespace kascade::testing {

DecodeIndexRows DecodeRowsStore::view(IndexGranularity granularity) {
  return decode_rows_view(indices.data(), lens.data(), static_cast<int32_t>(lens.size() / static_cast<size_t>(num_rows)),
                          num_rows, k_max, granularity);
}

PrefillIndexRows PrefillRowsStore::view(int32_t batch, IndexGranularity granularity) {
  PrefillIndexRows rows;
  rows.indices = indices.data();
  rows.row_offsets = row_offsets.data();
  rows.tile_base = tile_base.data();
  rows.batch = batch;
  rows.num_rows = num_rows;
  rows.tile_size = tile_size;
  rows.include_local = true;
  rows.granularity = granularity;
  return rows;
}

DecodeRowsStore select_decode_by_ref(const Problem& problem, const Call& call, int32_t layer, int32_t num_rows,
                                     bool reduce_max, const Budget& budget) {
  DecodeRowsStore store;
  store.num_rows = num_rows;
  const int32_t batch = call.batch();
  const int32_t stride = *std::max_element(call.kv_lens.begin(), call.kv_lens.end());
  store.k_max = stride;
  std::vector<float> scores(static_cast<size_t>(batch) * num_rows * stride, 0.0f);
  AttentionParams params;
  params.scale = problem.scale();
  ref::PoolingSpec spec;
  spec.num_rows = num_rows;
  spec.reduce = reduce_max ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
  EXPECT_TRUE(ref::pooled_scores_decode_ref(problem.queries(call, layer), problem.kv(call, layer), params, spec,
                                            scores.data(), stride)
                  .ok());
  store.indices.assign(static_cast<size_t>(batch) * num_rows * stride, -1);
  store.lens.assign(static_cast<size_t>(batch) * num_rows, 0);
  for (int32_t b = 0; b < batch; ++b) {
    const int64_t n = call.kv_lens[b];
    const int64_t k = budget_k(n, budget);
    for (int32_t r = 0; r < num_rows; ++r) {
      const size_t row = static_cast<size_t>(b) * num_rows + r;
      EXPECT_TRUE(ref::topk_select_ref(scores.data() + row * stride, n, k, store.indices.data() + row * stride).ok());
      store.lens[row] = static_cast<int32_t>(k);
    }
  }
  return store;
}

PrefillRowsStore select_prefill_by_ref(const Problem& problem, const Call& call, int32_t layer, int32_t num_rows,
                                       const PolicyConfig& config) {
  PrefillRowsStore store;
  auto plan = ref::plan_prefill_rows(call.q_lens.data(), call.kv_lens.data(), call.batch(), config.tile_size, num_rows,
                                     config.budget, config.rolling);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  store.row_offsets = plan->row_offsets;
  store.tile_base = plan->tile_base;
  store.tile_first = plan->tile_first;
  store.num_rows = num_rows;
  store.tile_size = config.tile_size;
  store.indices.assign(static_cast<size_t>(plan->total_indices()), -1);
  AttentionParams params;
  params.scale = problem.scale();
  ref::PoolingSpec spec;
  spec.num_rows = num_rows;
  spec.reduce = ref::PoolReduce::kSum;
  const QueryBatch q = problem.queries(call, layer);
  const PagedKv kv = problem.kv(call, layer);
  for (int32_t b = 0; b < call.batch(); ++b) {
    const int64_t slots = store.tile_base[b + 1] - store.tile_base[b];
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t tile = store.tile_first[b] + s;
      const int64_t s_t = tile * config.tile_size;
      std::vector<float> scores(static_cast<size_t>(num_rows * s_t) + 1, 0.0f);
      EXPECT_TRUE(ref::pooled_scores_prefill_tile_ref(q, kv, params, spec, b, tile, config.tile_size, scores.data(),
                                                      nullptr)
                      .ok());
      for (int32_t r = 0; r < num_rows; ++r) {
        const int64_t row = (store.tile_base[b] + s) * num_rows + r;
        const int64_t k = store.row_offsets[row + 1] - store.row_offsets[row];
        EXPECT_TRUE(
            ref::topk_select_ref(scores.data() + r * s_t, s_t, k, store.indices.data() + store.row_offsets[row]).ok());
      }
    }
  }
  return store;
}

namespace {

struct LayerOut {
  std::vector<float> o, lse;
  AttentionOutput view() {
    AttentionOutput out;
    out.o = o.data();
    out.dtype = DType::kF32;
    out.lse = lse.data();
    return out;
  }
};

LayerOut make_out(const Problem& problem, const Call& call) {
  LayerOut out;
  out.o.assign(static_cast<size_t>(call.total_q) * problem.shape().num_heads * problem.shape().head_dim, 0.0f);
  out.lse.assign(static_cast<size_t>(call.total_q) * problem.shape().num_heads, 0.0f);
  return out;
}

}  // namespace

RunResult compose_kascade(const Problem& problem, const Call& call, const PolicyConfig& config) {
  const int32_t n_layers = config.num_layers;
  const int32_t g_count = config.num_kv_heads;
  const bool pooled = config.name == "kascade-pooled";
  const bool remap = config.name == "kascade" || config.name == "kascade-decode";
  const int32_t num_rows = pooled ? 1 : g_count;
  const std::vector<int32_t> zeros(static_cast<size_t>(g_count), 0);
  AttentionParams params;
  params.scale = problem.scale();
  DecodeRowsStore decode_rows;
  PrefillRowsStore prefill_rows;
  RunResult result;
  const auto& anchors = config.schedule.anchors;
  for (int32_t l = 0; l < n_layers; ++l) {
    const QueryBatch q = problem.queries(call, l);
    const PagedKv kv = problem.kv(call, l);
    LayerOut out = make_out(problem, call);
    const bool is_anchor = std::find(anchors.begin(), anchors.end(), l) != anchors.end();
    if (is_anchor) {
      if (call.mode == ForwardMode::kDecode) {
        decode_rows = select_decode_by_ref(problem, call, l, num_rows, false, config.budget);
      } else {
        prefill_rows = select_prefill_by_ref(problem, call, l, num_rows, config);
      }
    }
    const int32_t* map = nullptr;
    if (pooled) {
      map = zeros.data();
    } else if (!is_anchor && remap) {
      map = config.schedule.head_map.data() + static_cast<size_t>(l) * g_count;
    }
    Status status;
    if (l == 0) {
      status = ref::dense_attention_ref(q, kv, params, out.view());
    } else if (call.mode == ForwardMode::kDecode) {
      status = ref::sparse_decode_ref(q, kv, params, decode_rows.view(IndexGranularity::kPerKvGroup), map, out.view());
    } else {
      status = ref::sparse_prefill_ref(q, kv, params, prefill_rows.view(call.batch(), IndexGranularity::kPerKvGroup),
                                       map, out.view());
    }
    EXPECT_TRUE(status.ok()) << "layer " << l << ": " << status.to_string();
    result.o.push_back(std::move(out.o));
    result.lse.push_back(std::move(out.lse));
  }
  return result;
}

RunResult compose_oracle_decode(const Problem& problem, const Call& call, const PolicyConfig& config) {
  AttentionParams params;
  params.scale = problem.scale();
  RunResult result;
  for (int32_t l = 0; l < config.num_layers; ++l) {
    const QueryBatch q = problem.queries(call, l);
    const PagedKv kv = problem.kv(call, l);
    LayerOut out = make_out(problem, call);
    Status status;
    if (l == 0) {
      status = ref::dense_attention_ref(q, kv, params, out.view());
    } else {
      DecodeRowsStore rows = select_decode_by_ref(problem, call, l, config.num_heads, false, config.budget);
      status = ref::sparse_decode_ref(q, kv, params, rows.view(IndexGranularity::kPerQueryHead), nullptr, out.view());
    }
    EXPECT_TRUE(status.ok()) << "layer " << l << ": " << status.to_string();
    result.o.push_back(std::move(out.o));
    result.lse.push_back(std::move(out.lse));
  }
  return result;
}

}  // namespace kascade::testing
