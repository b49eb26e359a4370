// tests/unit/ref/attention_problem.cpp — random attention problems and the test-side reference
// implementations (attention_problem.h).
#include "attention_problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kascade::testing {

AttentionProblem::AttentionProblem(const ProblemSpec& spec, std::mt19937_64& rng) : spec_(spec) {
  cu_q_lens_.assign(1, 0);
  for (int32_t len : spec_.q_lens) cu_q_lens_.push_back(cu_q_lens_.back() + len);
  q_ = random_floats(rng, static_cast<size_t>(o_size()), -spec_.q_range, spec_.q_range, spec_.dtype);
  q_bytes_ = pack_as(q_, spec_.dtype);
  for (int32_t b = 0; b < batch(); ++b) {
    const size_t n = static_cast<size_t>(kv_len(b)) * kv_heads() * dim();
    k_.push_back(random_floats(rng, n, -1.0f, 1.0f, spec_.dtype));
    v_.push_back(random_floats(rng, n, -1.0f, 1.0f, spec_.dtype));
  }
  build_cache(rng);
}

AttentionProblem AttentionProblem::with_layout(int32_t page_size, bool shuffle_pages, std::mt19937_64& rng) const {
  AttentionProblem copy = *this;
  copy.spec_.page_size = page_size;
  copy.spec_.shuffle_pages = shuffle_pages;
  copy.build_cache(rng);
  return copy;
}

void AttentionProblem::build_cache(std::mt19937_64& rng) {
  int32_t longest = 1;
  for (int32_t len : spec_.kv_lens) longest = std::max(longest, len);
  page_size_ = spec_.page_size > 0 ? spec_.page_size : longest;
  std::vector<int32_t> pages_of(static_cast<size_t>(batch()));
  int32_t used = 0;
  max_pages_ = 1;
  for (int32_t b = 0; b < batch(); ++b) {
    pages_of[b] = (kv_len(b) + page_size_ - 1) / page_size_;
    used += pages_of[b];
    max_pages_ = std::max(max_pages_, pages_of[b]);
  }
  num_pages_ = std::max(1, used + spec_.spare_pages);
  std::vector<int32_t> ids(static_cast<size_t>(num_pages_));
  std::iota(ids.begin(), ids.end(), 0);
  if (spec_.shuffle_pages) std::shuffle(ids.begin(), ids.end(), rng);
  // Entries past a sequence's pages are -1: reading them would fault (and ASan would say so).
  block_table_.assign(static_cast<size_t>(batch()) * max_pages_, -1);
  const size_t row = static_cast<size_t>(kv_heads()) * dim();
  const size_t elems = static_cast<size_t>(num_pages_) * page_size_ * row;
  std::vector<float> k_all(elems, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> v_all(elems, std::numeric_limits<float>::quiet_NaN());
  int32_t next = 0;
  for (int32_t b = 0; b < batch(); ++b) {
    for (int32_t p = 0; p < pages_of[b]; ++p) block_table_[static_cast<size_t>(b) * max_pages_ + p] = ids[next++];
    for (int64_t j = 0; j < kv_len(b); ++j) {
      const int32_t page = block_table_[static_cast<size_t>(b) * max_pages_ + j / page_size_];
      const size_t dst = (static_cast<size_t>(page) * page_size_ + static_cast<size_t>(j % page_size_)) * row;
      std::copy_n(k_[b].begin() + static_cast<int64_t>(j * row), row, k_all.begin() + static_cast<int64_t>(dst));
      std::copy_n(v_[b].begin() + static_cast<int64_t>(j * row), row, v_all.begin() + static_cast<int64_t>(dst));
    }
  }
  k_cache_ = pack_as(k_all, spec_.dtype);
  v_cache_ = pack_as(v_all, spec_.dtype);
}

float AttentionProblem::scale() const { return 1.0f / std::sqrt(static_cast<float>(dim())); }

float AttentionProblem::q(int32_t b, int32_t i, int32_t h, int32_t c) const {
  return q_[(static_cast<size_t>(first_query(b) + i) * heads() + h) * dim() + c];
}
float AttentionProblem::k(int32_t b, int64_t j, int32_t g, int32_t c) const {
  return k_[b][(static_cast<size_t>(j) * kv_heads() + g) * dim() + c];
}
float AttentionProblem::v(int32_t b, int64_t j, int32_t g, int32_t c) const {
  return v_[b][(static_cast<size_t>(j) * kv_heads() + g) * dim() + c];
}

QueryBatch AttentionProblem::queries() const {
  QueryBatch qb;
  qb.q = q_bytes_.data();
  qb.dtype = spec_.dtype;
  qb.batch = batch();
  qb.total_q = total_q();
  qb.num_heads = heads();
  qb.head_dim = dim();
  qb.cu_q_lens = cu_q_lens_.data();
  return qb;
}

PagedKv AttentionProblem::cache() const {
  PagedKv kv;
  kv.k = k_cache_.data();
  kv.v = v_cache_.data();
  kv.dtype = spec_.dtype;
  kv.num_pages = num_pages_;
  kv.page_size = page_size_;
  kv.num_kv_heads = kv_heads();
  kv.head_dim = dim();
  kv.block_table = block_table_.data();
  kv.max_pages_per_seq = max_pages_;
  kv.kv_lens = spec_.kv_lens.data();
  return kv;
}

AttentionParams AttentionProblem::params() const { return AttentionParams{scale()}; }

KeySetFn causal_keys(const AttentionProblem& problem) {
  return [&problem](int32_t b, int32_t i, int32_t) {
    std::vector<int64_t> keys(static_cast<size_t>(problem.position(b, i) + 1));
    std::iota(keys.begin(), keys.end(), 0);
    return keys;
  };
}

namespace {

// Two-pass softmax attention of one (b, i, h) over `keys` with accumulator type T.
template <typename T>
void attend_one(const AttentionProblem& p, int32_t b, int32_t i, int32_t h, const std::vector<int64_t>& keys, T* o,
                T* lse) {
  const int32_t g = h / p.group();
  const int32_t d = p.dim();
  if (keys.empty()) {
    std::fill_n(o, d, T(0));
    *lse = -std::numeric_limits<T>::infinity();
    return;
  }
  std::vector<T> s(keys.size());
  T m = -std::numeric_limits<T>::infinity();
  const float* q = p.q_row(b, i, h);
  for (size_t t = 0; t < keys.size(); ++t) {
    const float* k = p.k_row(b, keys[t], g);
    T dot = 0;
    for (int32_t c = 0; c < d; ++c) dot += T(q[c]) * T(k[c]);
    s[t] = T(p.scale()) * dot;
    m = std::max(m, s[t]);
  }
  T sum = 0;
  std::fill_n(o, d, T(0));
  for (size_t t = 0; t < keys.size(); ++t) {
    const float* v = p.v_row(b, keys[t], g);
    const T w = std::exp(s[t] - m);
    sum += w;
    for (int32_t c = 0; c < d; ++c) o[c] += w * T(v[c]);
  }
  for (int32_t c = 0; c < d; ++c) o[c] /= sum;
  *lse = m + std::log(sum);
}

}  // namespace

ReferenceOutputs reference_outputs(const AttentionProblem& p, DType out_dtype, const KeySetFn& keys) {
  ReferenceOutputs ref;
  ref.o64.assign(static_cast<size_t>(p.o_size()), 0.0);
  ref.lse64.assign(static_cast<size_t>(p.lse_size()), 0.0);
  ref.o_naive.assign(static_cast<size_t>(p.o_size()), 0.0f);
  ref.lse_naive.assign(static_cast<size_t>(p.lse_size()), 0.0f);
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t i = 0; i < p.q_len(b); ++i) {
      for (int32_t h = 0; h < p.heads(); ++h) {
        const std::vector<int64_t> set = keys(b, i, h);
        const int64_t li = p.lse_index(b, i, h);
        const size_t oi = static_cast<size_t>(li) * p.dim();
        attend_one<double>(p, b, i, h, set, ref.o64.data() + oi, ref.lse64.data() + li);
        attend_one<float>(p, b, i, h, set, ref.o_naive.data() + oi, ref.lse_naive.data() + li);
        for (int32_t c = 0; c < p.dim(); ++c) ref.o_naive[oi + c] = round_to_dtype(ref.o_naive[oi + c], out_dtype);
      }
    }
  }
  return ref;
}

GuardedOutput::GuardedOutput(const AttentionProblem& problem, DType out_dtype)
    : dtype(out_dtype),
      o(static_cast<size_t>(problem.o_size()) * dtype_size(out_dtype)),
      lse(static_cast<size_t>(problem.lse_size())) {}

AttentionOutput GuardedOutput::view() {
  AttentionOutput out;
  out.o = o.data();
  out.dtype = dtype;
  out.lse = lse.data();
  return out;
}

std::vector<float> GuardedOutput::o_as_float() const {
  const size_t n = o.size() / dtype_size(dtype);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = load_as_float(o.data(), dtype, static_cast<int64_t>(i));
  return values;
}

::testing::AssertionResult matches_reference(const AttentionProblem& p, const GuardedOutput& got,
                                             const ReferenceOutputs& ref) {
  if (!got.intact()) return ::testing::AssertionFailure() << "an output canary was overwritten";
  const std::vector<float> o = got.o_as_float();
  const std::vector<int64_t> o_shape = {p.total_q(), p.heads(), p.dim()};
  const auto o_ok = within_naive_error(o, ref.o_naive, ref.o64, o_shape, 2.0 * dtype_epsilon(got.dtype));
  if (!o_ok) return ::testing::AssertionFailure() << "o: " << o_ok.message();
  double lse_max = 0.0;
  for (double x : ref.lse64) {
    if (std::isfinite(x)) lse_max = std::max(lse_max, std::fabs(x));
  }
  const auto lse_ok = within_naive_error(got.lse.span(), ref.lse_naive, ref.lse64, {p.total_q(), p.heads()},
                                         1e-6 * (1.0 + lse_max));
  if (!lse_ok) return ::testing::AssertionFailure() << "lse: " << lse_ok.message();
  return ::testing::AssertionSuccess();
}

std::vector<int32_t> random_subset(std::mt19937_64& rng, int64_t lo, int64_t hi, int64_t count) {
  std::vector<int32_t> all(static_cast<size_t>(hi - lo));
  std::iota(all.begin(), all.end(), static_cast<int32_t>(lo));
  for (int64_t t = 0; t < count; ++t) {
    std::uniform_int_distribution<int64_t> pick(t, static_cast<int64_t>(all.size()) - 1);
    std::swap(all[t], all[pick(rng)]);
  }
  all.resize(static_cast<size_t>(count));
  return all;
}

}  // namespace kascade::testing
