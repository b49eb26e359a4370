// tests/cuda/test_backend_stack.cpp — the multi-layer problem and its fp64 / naive recomputations
// (test_backend_stack.h).
#include "test_backend_stack.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "testing/harness.h"

namespace kascade::testing {

// ---- StackCall

ForwardInfo StackCall::info() const {
  ForwardInfo info;
  info.mode = mode;
  info.batch = batch();
  info.q_lens = q_lens.data();
  info.kv_lens = kv_lens.data();
  return info;
}

QueryBatch StackCall::host_q(int32_t layer) const {
  const StackShape& s = stack_->shape();
  QueryBatch q;
  q.q = q_bytes_[static_cast<size_t>(layer)].data();
  q.dtype = s.dtype;
  q.batch = batch();
  q.total_q = total_q;
  q.num_heads = s.num_heads;
  q.head_dim = s.head_dim;
  q.cu_q_lens = cu_q_lens.data();
  return q;
}

PagedKv StackCall::host_kv(int32_t layer) const {
  const StackShape& s = stack_->shape();
  PagedKv kv;
  kv.k = stack_->k_bytes_[static_cast<size_t>(layer)].data();
  kv.v = stack_->v_bytes_[static_cast<size_t>(layer)].data();
  kv.dtype = s.dtype;
  kv.num_pages = stack_->num_pages_;
  kv.page_size = s.page_size;
  kv.num_kv_heads = s.num_kv_heads;
  kv.head_dim = s.head_dim;
  kv.block_table = block_table_.data();
  kv.max_pages_per_seq = stack_->max_pages_;
  kv.kv_lens = kv_lens.data();
  return kv;
}

QueryBatch StackCall::device_q(int32_t layer) const {
  QueryBatch q = host_q(layer);
  q.q = q_d_.empty() ? nullptr : q_d_[static_cast<size_t>(layer)].data();
  q.cu_q_lens = cu_d_.as<int32_t>();
  return q;
}

PagedKv StackCall::device_kv(int32_t layer) const {
  PagedKv kv = host_kv(layer);
  kv.k = stack_->k_d_.empty() ? nullptr : stack_->k_d_[static_cast<size_t>(layer)].data();
  kv.v = stack_->v_d_.empty() ? nullptr : stack_->v_d_[static_cast<size_t>(layer)].data();
  kv.block_table = table_d_.as<int32_t>();
  kv.kv_lens = lens_d_.as<int32_t>();
  return kv;
}

int32_t StackCall::sequence_of(int32_t row) const {
  const auto it = std::upper_bound(cu_q_lens.begin(), cu_q_lens.end(), row);
  return static_cast<int32_t>(it - cu_q_lens.begin()) - 1;
}

// ---- LayerStack

LayerStack::LayerStack(const StackShape& shape, std::mt19937_64& rng) : shape_(shape) {
  const int32_t ps = shape.page_size, h = shape.num_heads, g = shape.num_kv_heads, d = shape.head_dim;
  int64_t total = 0;
  std::vector<int32_t> needed;
  for (int32_t len : shape.lens) {
    q_base_.push_back(total);
    total += len;
    max_len_ = std::max(max_len_, len);
    needed.push_back((len + ps - 1) / ps);
    max_pages_ = std::max(max_pages_, needed.back());
  }
  max_pages_ = std::max(max_pages_, 1);
  num_pages_ = std::max(1, std::accumulate(needed.begin(), needed.end(), 0));
  std::vector<int32_t> ids(static_cast<size_t>(num_pages_));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  block_table_.assign(shape.lens.size() * static_cast<size_t>(max_pages_), -1);
  size_t next = 0;
  for (size_t b = 0; b < shape.lens.size(); ++b) {
    for (int32_t p = 0; p < needed[b]; ++p) block_table_[b * max_pages_ + p] = ids[next++];
  }
  const size_t kv_elems = static_cast<size_t>(num_pages_) * ps * g * d;
  const bool device = cuda_device_available();
  for (int32_t l = 0; l < shape.num_layers; ++l) {
    q_.push_back(random_floats(rng, static_cast<size_t>(total) * h * d, -2.0f, 2.0f, shape.dtype));
    k_.push_back(random_floats(rng, kv_elems, -2.0f, 2.0f, shape.dtype));
    v_.push_back(random_floats(rng, kv_elems, -1.0f, 1.0f, shape.dtype));
    k_bytes_.push_back(pack_as(k_.back(), shape.dtype));
    v_bytes_.push_back(pack_as(v_.back(), shape.dtype));
    if (device) {
      k_d_.push_back(upload_vector(k_bytes_.back()));
      v_d_.push_back(upload_vector(v_bytes_.back()));
    }
  }
}

float LayerStack::scale() const { return 1.0f / std::sqrt(static_cast<float>(shape_.head_dim)); }

int64_t LayerStack::kv_offset(int32_t seq, int32_t j, int32_t g) const {
  const int32_t page = block_table_[static_cast<size_t>(seq) * max_pages_ + j / shape_.page_size];
  return ((int64_t{page} * shape_.page_size + j % shape_.page_size) * shape_.num_kv_heads + g) * shape_.head_dim;
}

const float* LayerStack::q_at(int32_t layer, int32_t seq, int32_t pos, int32_t h) const {
  return q_[static_cast<size_t>(layer)].data() + ((q_base_[seq] + pos) * shape_.num_heads + h) * shape_.head_dim;
}
const float* LayerStack::k_at(int32_t layer, int32_t seq, int32_t j, int32_t g) const {
  return k_[static_cast<size_t>(layer)].data() + kv_offset(seq, j, g);
}
const float* LayerStack::v_at(int32_t layer, int32_t seq, int32_t j, int32_t g) const {
  return v_[static_cast<size_t>(layer)].data() + kv_offset(seq, j, g);
}

std::unique_ptr<StackCall> LayerStack::call(ForwardMode mode, const std::vector<int32_t>& seqs,
                                            const std::vector<int32_t>& starts,
                                            const std::vector<int32_t>& ends) const {
  auto call = std::make_unique<StackCall>();
  call->stack_ = this;
  call->mode = mode;
  call->seqs = seqs;
  call->starts = starts;
  call->kv_lens = ends;
  call->cu_q_lens.assign(1, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    call->q_lens.push_back(ends[i] - starts[i]);
    call->cu_q_lens.push_back(call->cu_q_lens.back() + call->q_lens.back());
    const auto row = block_table_.begin() + static_cast<int64_t>(seqs[i]) * max_pages_;
    call->block_table_.insert(call->block_table_.end(), row, row + max_pages_);
  }
  call->total_q = call->cu_q_lens.back();
  const int32_t h = shape_.num_heads, d = shape_.head_dim;
  const bool device = cuda_device_available();
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    std::vector<float> packed;
    packed.reserve(static_cast<size_t>(call->total_q) * h * d);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const float* first = q_at(l, seqs[i], starts[i], 0);
      packed.insert(packed.end(), first, first + static_cast<int64_t>(call->q_lens[i]) * h * d);
    }
    call->q_bytes_.push_back(pack_as(packed, shape_.dtype));
    if (device) call->q_d_.push_back(upload_vector(call->q_bytes_.back()));
  }
  if (device) {
    call->cu_d_ = upload_vector(call->cu_q_lens);
    call->lens_d_ = upload_vector(call->kv_lens);
    call->table_d_ = upload_vector(call->block_table_);
  }
  return call;
}

// ---- references

StackReference recompute_attention(const LayerStack& stack, const StackCall& call, int32_t layer,
                                   const StackKeys& keys) {
  const StackShape& s = stack.shape();
  const int32_t d = s.head_dim, heads = s.num_heads;
  const double scale = stack.scale();
  StackReference r;
  const size_t rows = static_cast<size_t>(call.total_q) * heads;
  r.o64.assign(rows * d, 0.0);
  r.lse64.assign(rows, -std::numeric_limits<double>::infinity());
  r.naive_o.assign(rows * d, 0.0f);
  const int64_t total = static_cast<int64_t>(rows);
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t t = 0; t < total; ++t) {
    const int32_t row = static_cast<int32_t>(t / heads), h = static_cast<int32_t>(t % heads);
    const int32_t b = call.sequence_of(row);
    const int32_t seq = call.seqs[b];
    const int32_t pos = call.starts[b] + (row - call.cu_q_lens[b]);
    const std::vector<int32_t> list = keys(row, h);
    if (list.empty()) continue;
    const float* q = stack.q_at(layer, seq, pos, h);
    const int32_t g = h / stack.group();
    std::vector<double> logit(list.size());
    std::vector<float> logit_naive(list.size());
    for (size_t n = 0; n < list.size(); ++n) {
      const float* k = stack.k_at(layer, seq, list[n], g);
      double acc = 0.0;
      float acc32 = 0.0f;
      for (int32_t c = 0; c < d; ++c) {
        acc += static_cast<double>(q[c]) * k[c];
        acc32 += q[c] * k[c];
      }
      logit[n] = acc * scale;
      logit_naive[n] = round_to_dtype(round_to_dtype(acc32, s.dtype) * static_cast<float>(scale), s.dtype);
    }
    const double m = *std::max_element(logit.begin(), logit.end());
    const float m_naive = *std::max_element(logit_naive.begin(), logit_naive.end());
    double sum = 0.0;
    float sum_naive = 0.0f;
    for (size_t n = 0; n < list.size(); ++n) {
      sum += std::exp(logit[n] - m);
      sum_naive += std::exp(logit_naive[n] - m_naive);
    }
    r.lse64[static_cast<size_t>(t)] = m + std::log(sum);
    std::vector<double> o(d, 0.0);
    std::vector<float> o_naive(d, 0.0f);
    for (size_t n = 0; n < list.size(); ++n) {
      const float* v = stack.v_at(layer, seq, list[n], g);
      const double w = std::exp(logit[n] - m) / sum;
      const float w_naive = round_to_dtype(std::exp(logit_naive[n] - m_naive) / sum_naive, s.dtype);
      for (int32_t c = 0; c < d; ++c) {
        o[c] += w * v[c];
        o_naive[c] += w_naive * v[c];
      }
    }
    for (int32_t c = 0; c < d; ++c) {
      r.o64[static_cast<size_t>(t) * d + c] = o[c];
      r.naive_o[static_cast<size_t>(t) * d + c] = round_to_dtype(o_naive[c], s.dtype);
    }
  }
  return r;
}

::testing::AssertionResult matches_reference(const LayerStack& stack, const StackCall& call,
                                             const StackReference& ref, const std::vector<float>& got_o,
                                             const std::vector<float>& got_lse) {
  const StackShape& s = stack.shape();
  if (got_o.size() != ref.o64.size() || got_lse.size() != ref.lse64.size()) {
    return ::testing::AssertionFailure() << "output sizes " << got_o.size() << ", " << got_lse.size() << "; expected "
                                         << ref.o64.size() << ", " << ref.lse64.size();
  }
  const std::vector<int64_t> shape = {call.total_q, s.num_heads, s.head_dim};
  auto o_check = within_naive_error(got_o, ref.naive_o, ref.o64, shape, 2.0 * dtype_epsilon(s.dtype));
  if (!o_check) return ::testing::AssertionFailure() << "o: " << o_check.message();
  for (size_t i = 0; i < got_lse.size(); ++i) {
    const double want = ref.lse64[i], got = got_lse[i];
    const bool ok = std::isinf(want) ? (std::isinf(got) && got < 0)
                                     : std::fabs(got - want) <= 1e-4 + 1e-5 * std::fabs(want);
    if (!ok) {
      return ::testing::AssertionFailure() << "lse of (query row, head) = (" << i / s.num_heads << ", "
                                           << i % s.num_heads << "): got " << got << ", fp64 reference " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<double> probabilities(const LayerStack& stack, int32_t layer, int32_t seq, int32_t pos, int32_t h) {
  const int32_t d = stack.shape().head_dim, g = h / stack.group();
  const double scale = stack.scale();
  const float* q = stack.q_at(layer, seq, pos, h);
  std::vector<double> p(static_cast<size_t>(pos) + 1);
  double m = -std::numeric_limits<double>::infinity();
  for (int32_t j = 0; j <= pos; ++j) {
    const float* k = stack.k_at(layer, seq, j, g);
    double dot = 0.0;
    for (int32_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
    p[j] = dot * scale;
    m = std::max(m, p[j]);
  }
  double sum = 0.0;
  for (double& x : p) {
    x = std::exp(x - m);
    sum += x;
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace kascade::testing
