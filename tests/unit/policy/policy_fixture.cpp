// tests/unit/policy/policy_fixture.cpp — problems, calls, the policy runner and the fp64
// restricted-softmax reference of policy_fixture.h.
#include "policy_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "testing/harness.h"

namespace kascade::testing {

ForwardInfo Call::info() const {
  ForwardInfo info;
  info.mode = mode;
  info.batch = batch();
  info.q_lens = q_lens.data();
  info.kv_lens = kv_lens.data();
  return info;
}

Problem::Problem(std::mt19937_64& rng, const ProblemShape& shape, const std::vector<int32_t>& lens, float range)
    : shape_(shape), lens_(lens) {
  const int32_t h = shape.num_heads, g = shape.num_kv_heads, d = shape.head_dim, ps = shape.page_size;
  int64_t total = 0;
  for (int32_t len : lens) {
    q_base_.push_back(total);
    total += len;
    max_pages_ = std::max(max_pages_, (len + ps - 1) / ps);
  }
  max_pages_ = std::max(max_pages_, 1);
  // Pages: every sequence gets ceil(len / ps) pages, in a shuffled order of page ids.
  std::vector<int32_t> needed;
  for (int32_t len : lens) needed.push_back((len + ps - 1) / ps);
  num_pages_ = std::max(1, std::accumulate(needed.begin(), needed.end(), 0));
  std::vector<int32_t> ids(static_cast<size_t>(num_pages_));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  block_table_.assign(lens.size() * static_cast<size_t>(max_pages_), 0);
  size_t next = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    for (int32_t p = 0; p < needed[b]; ++p) block_table_[b * max_pages_ + p] = ids[next++];
  }
  for (int32_t l = 0; l < shape.num_layers; ++l) {
    q_.push_back(random_floats(rng, static_cast<size_t>(total) * h * d, -range, range));
    k_.push_back(random_floats(rng, static_cast<size_t>(num_pages_) * ps * g * d, -range, range));
    v_.push_back(random_floats(rng, static_cast<size_t>(num_pages_) * ps * g * d, -1.0f, 1.0f));
  }
}

float Problem::scale() const { return 1.0f / std::sqrt(static_cast<float>(shape_.head_dim)); }

void Problem::copy_layer(int32_t dst, int32_t src) {
  q_[dst] = q_[src];
  k_[dst] = k_[src];
  v_[dst] = v_[src];
}

Call Problem::call(ForwardMode mode, const std::vector<int32_t>& starts, const std::vector<int32_t>& ends) const {
  Call c;
  c.mode = mode;
  c.starts = starts;
  c.cu_q_lens.push_back(0);
  for (size_t b = 0; b < starts.size(); ++b) {
    c.q_lens.push_back(ends[b] - starts[b]);
    c.kv_lens.push_back(ends[b]);
    c.cu_q_lens.push_back(c.cu_q_lens.back() + c.q_lens.back());
  }
  c.total_q = c.cu_q_lens.back();
  const int32_t hd = shape_.num_heads * shape_.head_dim;
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    std::vector<float> q(static_cast<size_t>(c.total_q) * hd);
    for (size_t b = 0; b < starts.size(); ++b) {
      for (int32_t i = 0; i < c.q_lens[b]; ++i) {
        const float* src = q_[l].data() + (q_base_[b] + starts[b] + i) * hd;
        std::copy_n(src, hd, q.data() + static_cast<size_t>(c.cu_q_lens[b] + i) * hd);
      }
    }
    c.q.push_back(std::move(q));
  }
  return c;
}

Call Problem::prefill_all() const {
  return call(ForwardMode::kPrefill, std::vector<int32_t>(lens_.size(), 0), lens_);
}

Call Problem::decode_last() const {
  std::vector<int32_t> starts;
  for (int32_t len : lens_) starts.push_back(len - 1);
  return call(ForwardMode::kDecode, starts, lens_);
}

QueryBatch Problem::queries(const Call& call, int32_t layer) const {
  QueryBatch q;
  q.q = call.q[layer].data();
  q.dtype = DType::kF32;
  q.batch = call.batch();
  q.total_q = call.total_q;
  q.num_heads = shape_.num_heads;
  q.head_dim = shape_.head_dim;
  q.cu_q_lens = call.cu_q_lens.data();
  return q;
}

PagedKv Problem::kv(const Call& call, int32_t layer) const {
  PagedKv kv;
  kv.k = k_[layer].data();
  kv.v = v_[layer].data();
  kv.dtype = DType::kF32;
  kv.num_pages = num_pages_;
  kv.page_size = shape_.page_size;
  kv.num_kv_heads = shape_.num_kv_heads;
  kv.head_dim = shape_.head_dim;
  kv.block_table = block_table_.data();
  kv.max_pages_per_seq = max_pages_;
  kv.kv_lens = call.kv_lens.data();
  return kv;
}

const float* Problem::q_at(int32_t layer, int32_t b, int32_t p, int32_t h) const {
  return q_[layer].data() + ((q_base_[b] + p) * shape_.num_heads + h) * shape_.head_dim;
}

const float* Problem::k_at(int32_t layer, int32_t b, int64_t j, int32_t g) const {
  const int64_t page = block_table_[b * max_pages_ + j / shape_.page_size];
  const int64_t row = page * shape_.page_size + j % shape_.page_size;
  return k_[layer].data() + (row * shape_.num_kv_heads + g) * shape_.head_dim;
}

const float* Problem::v_at(int32_t layer, int32_t b, int64_t j, int32_t g) const {
  const int64_t page = block_table_[b * max_pages_ + j / shape_.page_size];
  const int64_t row = page * shape_.page_size + j % shape_.page_size;
  return v_[layer].data() + (row * shape_.num_kv_heads + g) * shape_.head_dim;
}

bool run_policy(AttentionPolicy& policy, const Problem& problem, const Call& call, bool snapshots, RunResult* result) {
  const ProblemShape& s = problem.shape();
  Status status = policy.begin_forward(call.info());
  if (!status.ok()) {
    ADD_FAILURE() << "begin_forward: " << status.to_string();
    return false;
  }
  result->o.clear();
  result->lse.clear();
  result->rows.clear();
  AttentionParams params;
  params.scale = problem.scale();
  for (int32_t l = 0; l < s.num_layers; ++l) {
    GuardedBuffer<float> o(static_cast<size_t>(call.total_q) * s.num_heads * s.head_dim);
    GuardedBuffer<float> lse(static_cast<size_t>(call.total_q) * s.num_heads);
    AttentionOutput out;
    out.o = o.data();
    out.dtype = DType::kF32;
    out.lse = lse.data();
    status = policy.attention(l, problem.queries(call, l), problem.kv(call, l), params, out);
    if (!status.ok()) {
      ADD_FAILURE() << "attention(layer " << l << "): " << status.to_string();
      return false;
    }
    if (!o.intact() || !lse.intact()) {
      ADD_FAILURE() << "layer " << l << " wrote outside its output";
      return false;
    }
    if (count_nan(o.span()) != 0) {
      ADD_FAILURE() << "layer " << l << " left " << count_nan(o.span()) << " output elements unwritten (NaN)";
      return false;
    }
    result->o.emplace_back(o.span().begin(), o.span().end());
    result->lse.emplace_back(lse.span().begin(), lse.span().end());
    if (snapshots) {
      auto snap = policy.snapshot_indices();
      if (!snap.ok()) {
        ADD_FAILURE() << "snapshot after layer " << l << ": " << snap.status().to_string();
        return false;
      }
      result->rows.push_back(*snap);
    }
  }
  return true;
}

void restricted_attention_fp64(const Problem& problem, int32_t layer, int32_t b, int32_t p, int32_t h,
                               const std::vector<int32_t>& keys, std::vector<double>* o, double* lse) {
  const ProblemShape& s = problem.shape();
  const int32_t g = h / (s.num_heads / s.num_kv_heads);
  const int32_t d = s.head_dim;
  o->assign(static_cast<size_t>(d), 0.0);
  if (keys.empty()) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const float* q = problem.q_at(layer, b, p, h);
  std::vector<double> logits;
  double m = -std::numeric_limits<double>::infinity();
  for (int32_t j : keys) {
    const float* k = problem.k_at(layer, b, j, g);
    double dot = 0.0;
    for (int32_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
    logits.push_back(dot * static_cast<double>(problem.scale()));
    m = std::max(m, logits.back());
  }
  double sum = 0.0;
  for (size_t n = 0; n < keys.size(); ++n) {
    const double w = std::exp(logits[n] - m);
    sum += w;
    const float* v = problem.v_at(layer, b, keys[n], g);
    for (int32_t c = 0; c < d; ++c) (*o)[static_cast<size_t>(c)] += w * v[c];
  }
  for (auto& x : *o) x /= sum;
  *lse = m + std::log(sum);
}

std::vector<int32_t> decode_row(const IndexSnapshot& snap, int32_t b, int32_t r) {
  const size_t row = static_cast<size_t>(b) * snap.num_rows + r;
  const int32_t* begin = snap.indices.data() + row * snap.k_max;
  return std::vector<int32_t>(begin, begin + snap.row_lens[row]);
}

std::vector<int32_t> prefill_row(const IndexSnapshot& snap, int32_t b, int64_t tile, int32_t r) {
  const int64_t slot = snap.tile_base[b] + (tile - snap.tile_first[b]);
  const int64_t row = slot * snap.num_rows + r;
  return std::vector<int32_t>(snap.indices.begin() + snap.row_offsets[row],
                              snap.indices.begin() + snap.row_offsets[row + 1]);
}

PolicyConfig config_for(const Problem& problem, const std::string& name) {
  PolicyConfig config;
  config.name = name;
  config.num_layers = problem.shape().num_layers;
  config.num_heads = problem.shape().num_heads;
  config.num_kv_heads = problem.shape().num_kv_heads;
  config.head_dim = problem.shape().head_dim;
  config.budget.rho_ppm = 100000;
  config.budget.k_min = 8;
  return config;
}

}  // namespace kascade::testing
