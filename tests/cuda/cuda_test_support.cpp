// tests/cuda/cuda_test_support.cpp — implementation of the shared CUDA test helpers
// (cuda_test_support.h).
#include "cuda_test_support.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "testing/harness.h"

namespace kascade::testing {

bool cuda_device_available() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
}

DeviceBuffer::DeviceBuffer(size_t bytes, uint8_t fill_byte) : bytes_(bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes + 2 * kGuard) != cudaSuccess) {
    ADD_FAILURE() << "cudaMalloc of " << bytes << " bytes failed";
    bytes_ = 0;
    return;
  }
  base_ = static_cast<uint8_t*>(p);
  cudaMemset(base_, 0xA5, kGuard);
  cudaMemset(base_ + kGuard + bytes, 0xA5, kGuard);
  cudaMemset(base_ + kGuard, fill_byte, bytes);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // tests may launch on non-blocking streams next
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (base_) cudaFree(base_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (base_) cudaFree(base_);
}

void DeviceBuffer::upload(const void* src, size_t bytes) {
  if (bytes > bytes_) {
    ADD_FAILURE() << "upload of " << bytes << " bytes into a buffer of " << bytes_;
    return;
  }
  if (bytes) {
    EXPECT_EQ(cudaMemcpy(data(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

void DeviceBuffer::fill(uint8_t byte) {
  EXPECT_EQ(cudaMemset(data(), byte, bytes_), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

std::vector<uint8_t> DeviceBuffer::download() const {
  std::vector<uint8_t> out(bytes_);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (bytes_) {
    EXPECT_EQ(cudaMemcpy(out.data(), data(), bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return out;
}

bool DeviceBuffer::guards_intact() const {
  if (!base_) return false;
  std::vector<uint8_t> head(kGuard), tail(kGuard);
  if (cudaMemcpy(head.data(), base_, kGuard, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  if (cudaMemcpy(tail.data(), base_ + kGuard + bytes_, kGuard, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  return std::all_of(head.begin(), head.end(), [](uint8_t x) { return x == 0xA5; }) &&
         std::all_of(tail.begin(), tail.end(), [](uint8_t x) { return x == 0xA5; });
}

std::vector<float> to_floats(const std::vector<uint8_t>& raw, DType dtype) {
  const size_t n = raw.size() / dtype_size(dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = load_as_float(raw.data(), dtype, static_cast<int64_t>(i));
  return out;
}

// ---- DecodeProblem

DecodeProblem::DecodeProblem(const DecodeCase& c, std::mt19937_64& rng) : case_(c) {
  const int32_t batch = static_cast<int32_t>(c.kv_lens.size());
  int32_t longest = 1;
  for (int32_t n : c.kv_lens) longest = std::max(longest, n);
  max_seq_len_ = c.max_seq_len > 0 ? c.max_seq_len : longest;
  if (c.page_size > 0) {
    page_size_ = c.page_size;
  } else {
    page_size_ = 16;
    while (page_size_ < max_seq_len_) page_size_ *= 2;
  }
  max_pages_ = (max_seq_len_ + page_size_ - 1) / page_size_;
  num_pages_ = batch * max_pages_;
  const int64_t q_elems = static_cast<int64_t>(batch) * c.num_heads * c.head_dim;
  const int64_t kv_elems = static_cast<int64_t>(num_pages_) * page_size_ * c.num_kv_heads * c.head_dim;
  q_ = random_floats(rng, q_elems, -c.q_range, c.q_range, c.dtype);
  k_ = random_floats(rng, kv_elems, -c.k_range, c.k_range, c.dtype);
  v_ = random_floats(rng, kv_elems, -c.v_range, c.v_range, c.dtype);
  q_bytes_ = pack_as(q_, c.dtype);
  k_bytes_ = pack_as(k_, c.dtype);
  v_bytes_ = pack_as(v_, c.dtype);
  // Shuffled pages: sequence b's i-th page is perm[b * max_pages + i].
  std::vector<int32_t> perm(num_pages_);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  block_table_ = perm;
  cu_q_lens_.resize(batch + 1);
  std::iota(cu_q_lens_.begin(), cu_q_lens_.end(), 0);
  if (cuda_device_available()) {  // host-only problems serve the CPU-side checks of the helpers
    q_d_ = upload_vector(q_bytes_);
    k_d_ = upload_vector(k_bytes_);
    v_d_ = upload_vector(v_bytes_);
    table_d_ = DeviceBuffer(block_table_.size() * sizeof(int32_t));
    lens_d_ = DeviceBuffer(batch * sizeof(int32_t));
  }
  set_kv_lens(c.kv_lens);
}

float DecodeProblem::scale() const { return 1.0f / std::sqrt(static_cast<float>(case_.head_dim)); }

void DecodeProblem::set_kv_lens(const std::vector<int32_t>& kv_lens) {
  kv_lens_ = kv_lens;
  // Entries past a sequence's used pages are -1, so a kernel that reads them is caught.
  std::vector<int32_t> table(block_table_.size(), -1);
  for (int32_t b = 0; b < batch(); ++b) {
    const int32_t used = std::min(max_pages_, (std::max(kv_lens[b], 1) + page_size_ - 1) / page_size_);
    for (int32_t i = 0; i < used; ++i) table[b * max_pages_ + i] = block_table_[b * max_pages_ + i];
  }
  if (table_d_.data() == nullptr) return;
  table_d_.upload(table.data(), table.size() * sizeof(int32_t));
  lens_d_.upload(kv_lens_.data(), kv_lens_.size() * sizeof(int32_t));
}

void DecodeProblem::redraw_q(std::mt19937_64& rng) {
  q_ = random_floats(rng, q_.size(), -case_.q_range, case_.q_range, case_.dtype);
  q_bytes_ = pack_as(q_, case_.dtype);
  if (q_d_.data() != nullptr) q_d_.upload(q_bytes_.data(), q_bytes_.size());
}

QueryBatch DecodeProblem::host_q() const {
  QueryBatch q;
  q.q = q_bytes_.data();
  q.dtype = case_.dtype;
  q.batch = batch();
  q.total_q = batch();
  q.num_heads = case_.num_heads;
  q.head_dim = case_.head_dim;
  q.cu_q_lens = cu_q_lens_.data();
  return q;
}

PagedKv DecodeProblem::host_kv() const {
  PagedKv kv;
  kv.k = k_bytes_.data();
  kv.v = v_bytes_.data();
  kv.dtype = case_.dtype;
  kv.num_pages = num_pages_;
  kv.page_size = page_size_;
  kv.num_kv_heads = case_.num_kv_heads;
  kv.head_dim = case_.head_dim;
  kv.block_table = block_table_.data();
  kv.max_pages_per_seq = max_pages_;
  kv.kv_lens = kv_lens_.data();
  return kv;
}

QueryBatch DecodeProblem::device_q() const {
  QueryBatch q = host_q();
  q.q = q_d_.data();
  q.cu_q_lens = nullptr;  // decode: query b is row b; the kernels never read cu_q_lens
  return q;
}

PagedKv DecodeProblem::device_kv() const {
  PagedKv kv = host_kv();
  kv.k = k_d_.data();
  kv.v = v_d_.data();
  kv.block_table = table_d_.as<int32_t>();
  kv.kv_lens = lens_d_.as<int32_t>();
  return kv;
}

int64_t DecodeProblem::row_offset(int32_t b, int32_t j, int32_t g) const {
  const int32_t page = block_table_[b * max_pages_ + j / page_size_];
  return ((static_cast<int64_t>(page) * page_size_ + j % page_size_) * case_.num_kv_heads + g) * case_.head_dim;
}
const float* DecodeProblem::q_row(int32_t b, int32_t h) const {
  return q_.data() + (static_cast<int64_t>(b) * case_.num_heads + h) * case_.head_dim;
}
const float* DecodeProblem::k_row(int32_t b, int32_t j, int32_t g) const { return k_.data() + row_offset(b, j, g); }
const float* DecodeProblem::v_row(int32_t b, int32_t j, int32_t g) const { return v_.data() + row_offset(b, j, g); }

// ---- key lists and recomputation

KeyLists dense_key_lists(const DecodeProblem& p) {
  KeyLists keys(static_cast<size_t>(p.batch()) * p.spec().num_heads);
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t h = 0; h < p.spec().num_heads; ++h) {
      auto& list = keys[b * p.spec().num_heads + h];
      list.resize(p.kv_lens()[b]);
      std::iota(list.begin(), list.end(), 0);
    }
  }
  return keys;
}

KeyLists sparse_key_lists(const DecodeProblem& p, const std::vector<int32_t>& indices,
                          const std::vector<int32_t>& row_lens, int32_t num_rows, int32_t k_max,
                          IndexGranularity granularity, const std::vector<int32_t>& head_map) {
  const int32_t h_count = p.spec().num_heads, g_size = h_count / p.spec().num_kv_heads;
  KeyLists keys(static_cast<size_t>(p.batch()) * h_count);
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t h = 0; h < h_count; ++h) {
      int32_t row = h;
      if (granularity == IndexGranularity::kPerKvGroup) {
        const int32_t g = h / g_size;
        row = head_map.empty() ? g * num_rows / p.spec().num_kv_heads : head_map[g];
      }
      const int64_t base = (static_cast<int64_t>(b) * num_rows + row) * k_max;
      const int32_t len = row_lens[b * num_rows + row];
      keys[b * h_count + h].assign(indices.begin() + base, indices.begin() + base + len);
    }
  }
  return keys;
}

AttentionResult recompute_attention(const DecodeProblem& p, const KeyLists& keys) {
  const DecodeCase& c = p.spec();
  const int32_t d = c.head_dim, g_size = c.num_heads / c.num_kv_heads;
  const double scale = p.scale();
  AttentionResult r;
  r.o64.assign(static_cast<size_t>(p.batch()) * c.num_heads * d, 0.0);
  r.lse64.assign(static_cast<size_t>(p.batch()) * c.num_heads, -std::numeric_limits<double>::infinity());
  r.naive_o.assign(r.o64.size(), 0.0f);
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t h = 0; h < c.num_heads; ++h) {
      const auto& list = keys[b * c.num_heads + h];
      if (list.empty()) continue;
      const int32_t g = h / g_size;
      const int64_t base = (static_cast<int64_t>(b) * c.num_heads + h) * d;
      recompute_row(
          p.q_row(b, h), list, [&](int32_t j) { return p.k_row(b, j, g); }, [&](int32_t j) { return p.v_row(b, j, g); },
          d, scale, c.dtype, r.o64.data() + base, r.lse64.data() + (b * c.num_heads + h), r.naive_o.data() + base);
    }
  }
  return r;
}

void recompute_row(const float* q, const std::vector<int32_t>& keys, const std::function<const float*(int32_t)>& k_row,
                   const std::function<const float*(int32_t)>& v_row, int32_t d, double scale, DType dtype, double* o64,
                   double* lse64, float* naive_o) {
  std::vector<double> s(keys.size());
  std::vector<float> s_naive(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float* k = k_row(keys[i]);
    double acc = 0.0;
    float acc32 = 0.0f;
    for (int32_t ch = 0; ch < d; ++ch) {
      acc += static_cast<double>(q[ch]) * k[ch];
      acc32 += q[ch] * k[ch];
    }
    s[i] = acc * scale;
    s_naive[i] = round_to_dtype(round_to_dtype(acc32, dtype) * static_cast<float>(scale), dtype);
  }
  const double m = *std::max_element(s.begin(), s.end());
  const float m_naive = *std::max_element(s_naive.begin(), s_naive.end());
  double sum = 0.0;
  float sum_naive = 0.0f;
  for (size_t i = 0; i < keys.size(); ++i) {
    sum += std::exp(s[i] - m);
    sum_naive += std::exp(s_naive[i] - m_naive);
  }
  *lse64 = m + std::log(sum);
  std::vector<double> o(d, 0.0);
  std::vector<float> o_naive(d, 0.0f);
  for (size_t i = 0; i < keys.size(); ++i) {
    const float* v = v_row(keys[i]);
    const double w = std::exp(s[i] - m) / sum;
    const float w_naive = round_to_dtype(std::exp(s_naive[i] - m_naive) / sum_naive, dtype);
    for (int32_t ch = 0; ch < d; ++ch) {
      o[ch] += w * v[ch];
      o_naive[ch] += w_naive * v[ch];
    }
  }
  for (int32_t ch = 0; ch < d; ++ch) {
    o64[ch] = o[ch];
    naive_o[ch] = round_to_dtype(o_naive[ch], dtype);
  }
}

::testing::AssertionResult check_lse(const std::vector<float>& got, const std::vector<double>& want, int32_t heads,
                                     const char* row_name) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "lse has " << got.size() << " entries, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i];
    const double g = got[i];
    const bool ok = std::isinf(w) ? (std::isinf(g) && g < 0) : std::fabs(g - w) <= 1e-4 + 1e-5 * std::fabs(w);
    if (!ok) {
      return ::testing::AssertionFailure() << "lse of " << row_name << " = (" << i / heads << ", " << i % heads
                                           << "): got " << g << ", fp64 reference " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_attention(const DecodeProblem& p, const KeyLists& keys,
                                           const std::vector<float>& got_o, const std::vector<float>& got_lse) {
  const DecodeCase& c = p.spec();
  const AttentionResult r = recompute_attention(p, keys);
  const std::vector<int64_t> shape = {p.batch(), c.num_heads, c.head_dim};
  auto o_check = within_naive_error(got_o, r.naive_o, r.o64, shape, 2.0 * dtype_epsilon(c.dtype));
  if (!o_check) return ::testing::AssertionFailure() << "o: " << o_check.message();
  return check_lse(got_lse, r.lse64, c.num_heads, "(b, h)");
}

std::vector<int32_t> random_subset(std::mt19937_64& rng, int32_t n, int32_t k, bool sorted) {
  std::vector<int32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  for (int32_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<int32_t> pick(i, n - 1);
    std::swap(all[i], all[pick(rng)]);
  }
  all.resize(k);
  if (sorted) std::sort(all.begin(), all.end());
  return all;
}

}  // namespace kascade::testing
