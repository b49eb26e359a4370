// tests/cuda/test_prefill_problem.cpp — implementation of the prefill test helpers
// (test_prefill_problem.h).
#include "test_prefill_problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <string>

#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_plan.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "testing/harness.h"

namespace kascade::testing {

// ---- cases, configurations, variants

PrefillCase make_prefill_case(DType dtype, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                              std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens, int32_t page_size) {
  PrefillCase c;
  c.dtype = dtype;
  c.num_heads = num_heads;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim;
  c.page_size = page_size;
  c.q_lens = std::move(q_lens);
  c.kv_lens = std::move(kv_lens);
  return c;
}

std::string prefill_config_name(const ::testing::TestParamInfo<PrefillConfig>& info) {
  const PrefillConfig& c = info.param;
  return std::string(dtype_name(std::get<0>(c))) + "_H" + std::to_string(std::get<1>(c)) + "_G" +
         std::to_string(std::get<2>(c)) + "_d" + std::to_string(std::get<3>(c)) + "_page" +
         std::to_string(std::get<4>(c));
}

PrefillCase PrefillConfigTest::make_case(std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens) const {
  const auto [dtype, h, g, d, page] = GetParam();
  return make_prefill_case(dtype, h, g, d, std::move(q_lens), std::move(kv_lens), page);
}

const char* prefill_variant_name(PrefillVariant variant) {
  switch (variant) {
    case PrefillVariant::kMma:
      return "mma";
    case PrefillVariant::kWgmma:
      return "wgmma";
    case PrefillVariant::kWarpSpecialized:
      return "warp-specialised";
    case PrefillVariant::kWarpSpecializedTma:
      return "warp-specialised (TMA)";
    case PrefillVariant::kAuto:
      return "automatic";
  }
  return "unknown variant";
}

cuda::PrefillPlanOptions variant_options(PrefillVariant variant) {
  cuda::PrefillPlanOptions options;
  switch (variant) {
    case PrefillVariant::kMma:
      options.kernels = cuda::PrefillKernels::kMma;
      break;
    case PrefillVariant::kWgmma:
      options.kernels = cuda::PrefillKernels::kWgmma;
      break;
    case PrefillVariant::kWarpSpecialized:
      options.kernels = cuda::PrefillKernels::kWarpSpecialized;
      break;
    case PrefillVariant::kWarpSpecializedTma:
      options.kernels = cuda::PrefillKernels::kWarpSpecializedTma;
      break;
    case PrefillVariant::kAuto:
      options.kernels = cuda::PrefillKernels::kAuto;
      break;
  }
  return options;
}

bool variant_available(PrefillVariant variant) {
  return variant == PrefillVariant::kMma || variant == PrefillVariant::kAuto ? cuda_device_available()
                                                                             : wgmma_device_available();
}

// ---- PrefillProblem

PrefillProblem::PrefillProblem(const PrefillCase& c, std::mt19937_64& rng) : case_(c) {
  const int32_t n = batch();
  cu_q_lens_.assign(1, 0);
  for (int32_t b = 0; b < n; ++b) cu_q_lens_.push_back(cu_q_lens_.back() + c.q_lens[b]);
  const int32_t longest = std::max(1, max_kv_len());
  if (c.page_size > 0) {
    page_size_ = c.page_size;
  } else {
    page_size_ = 16;
    while (page_size_ < longest) page_size_ *= 2;
  }
  max_pages_ = (longest + page_size_ - 1) / page_size_;
  num_pages_ = n * max_pages_;
  const int64_t q_elems = int64_t{total_q()} * c.num_heads * c.head_dim;
  const int64_t kv_elems = int64_t{num_pages_} * page_size_ * c.num_kv_heads * c.head_dim;
  q_ = random_floats(rng, q_elems, -c.q_range, c.q_range, c.dtype);
  k_ = random_floats(rng, kv_elems, -c.k_range, c.k_range, c.dtype);
  v_ = random_floats(rng, kv_elems, -c.v_range, c.v_range, c.dtype);
  q_bytes_ = pack_as(q_, c.dtype);
  k_bytes_ = pack_as(k_, c.dtype);
  v_bytes_ = pack_as(v_, c.dtype);
  std::vector<int32_t> perm(num_pages_);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  // Entries past a sequence's used pages are -1, so a kernel that reads them is caught.
  block_table_.assign(perm.size(), -1);
  for (int32_t b = 0; b < n; ++b) {
    const int32_t used = (c.kv_lens[b] + page_size_ - 1) / page_size_;
    for (int32_t i = 0; i < used; ++i) block_table_[b * max_pages_ + i] = perm[b * max_pages_ + i];
  }
  if (cuda_device_available()) {
    q_d_ = upload_vector(q_bytes_);
    k_d_ = upload_vector(k_bytes_);
    v_d_ = upload_vector(v_bytes_);
    table_d_ = upload_vector(block_table_);
    cu_d_ = upload_vector(cu_q_lens_);
    lens_d_ = upload_vector(c.kv_lens);
  }
}

int32_t PrefillProblem::max_q_len() const {
  return std::max(1, *std::max_element(case_.q_lens.begin(), case_.q_lens.end()));
}
int32_t PrefillProblem::max_kv_len() const {
  return std::max(1, *std::max_element(case_.kv_lens.begin(), case_.kv_lens.end()));
}
float PrefillProblem::scale() const { return 1.0f / std::sqrt(static_cast<float>(case_.head_dim)); }

QueryBatch PrefillProblem::host_q() const {
  QueryBatch q;
  q.q = q_bytes_.data();
  q.dtype = case_.dtype;
  q.batch = batch();
  q.total_q = total_q();
  q.num_heads = case_.num_heads;
  q.head_dim = case_.head_dim;
  q.cu_q_lens = cu_q_lens_.data();
  return q;
}

PagedKv PrefillProblem::host_kv() const {
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
  kv.kv_lens = case_.kv_lens.data();
  return kv;
}

QueryBatch PrefillProblem::device_q() const {
  QueryBatch q = host_q();
  q.q = q_d_.data();
  q.cu_q_lens = cu_d_.as<int32_t>();
  return q;
}

PagedKv PrefillProblem::device_kv() const {
  PagedKv kv = host_kv();
  kv.k = k_d_.data();
  kv.v = v_d_.data();
  kv.block_table = table_d_.as<int32_t>();
  kv.kv_lens = lens_d_.as<int32_t>();
  return kv;
}

cuda::PrefillShape PrefillProblem::shape(int32_t tile_size) const {
  cuda::PrefillShape s;
  s.dtype = case_.dtype;
  s.batch = batch();
  s.num_heads = case_.num_heads;
  s.num_kv_heads = case_.num_kv_heads;
  s.head_dim = case_.head_dim;
  s.max_total_q = std::max(1, total_q());
  s.max_q_len = max_q_len();
  s.max_kv_len = max_kv_len();
  s.tile_size = tile_size;
  return s;
}

void PrefillProblem::zero_queries() {
  std::fill(q_.begin(), q_.end(), 0.0f);
  q_bytes_ = pack_as(q_, case_.dtype);
  if (q_d_.data() != nullptr) q_d_.upload(q_bytes_.data(), q_bytes_.size());
}

int64_t PrefillProblem::row_offset(int32_t b, int32_t j, int32_t g) const {
  const int32_t page = block_table_[b * max_pages_ + j / page_size_];
  return ((int64_t{page} * page_size_ + j % page_size_) * case_.num_kv_heads + g) * case_.head_dim;
}
const float* PrefillProblem::q_row(int32_t b, int32_t i, int32_t h) const {
  return q_.data() + (int64_t{cu_q_lens_[b] + i} * case_.num_heads + h) * case_.head_dim;
}
const float* PrefillProblem::k_row(int32_t b, int32_t j, int32_t g) const { return k_.data() + row_offset(b, j, g); }
const float* PrefillProblem::v_row(int32_t b, int32_t j, int32_t g) const { return v_.data() + row_offset(b, j, g); }

PrefillProblem::Chunk PrefillProblem::chunk(int32_t c0, int32_t c1) const {
  Chunk c;
  c.q = device_q();
  c.q.q = static_cast<const uint8_t*>(q_d_.data()) +
          (int64_t{c0} - (kv_len(0) - q_len(0))) * case_.num_heads * case_.head_dim * dtype_size(case_.dtype);
  c.q.batch = 1;
  c.q.total_q = c1 - c0;
  c.cu_q_lens = upload_vector(std::vector<int32_t>{0, c1 - c0});
  c.kv_lens = upload_vector(std::vector<int32_t>{c1});
  c.q.cu_q_lens = c.cu_q_lens.as<int32_t>();
  c.kv = device_kv();
  c.kv.kv_lens = c.kv_lens.as<int32_t>();
  return c;
}

// ---- rows

Budget small_prefill_budget() {
  Budget b;
  b.rho_ppm = 300000;
  b.k_min = 5;
  return b;
}

PrefillIndexRows PrefillRowsOnDevice::view(bool include_local, IndexGranularity granularity) const {
  PrefillIndexRows rows;
  rows.indices = indices.as<int32_t>();
  rows.row_offsets = row_offsets.as<int64_t>();
  rows.tile_base = tile_base.as<int32_t>();
  rows.batch = static_cast<int32_t>(plan.tile_first.size());
  rows.num_rows = plan.num_rows;
  rows.tile_size = plan.tile_size;
  rows.include_local = include_local;
  rows.granularity = granularity;
  return rows;
}

std::vector<int32_t> PrefillRowsOnDevice::download_indices() const {
  std::vector<int32_t> all = indices.download_as<int32_t>();
  all.resize(static_cast<size_t>(plan.total_indices()));
  return all;
}

PrefillRowsOnDevice plan_rows_on_device(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens,
                                        int32_t tile_size, int32_t num_rows, const Budget& budget, bool rolling) {
  PrefillRowsOnDevice rows;
  auto plan = ref::plan_prefill_rows(q_lens.data(), kv_lens.data(), static_cast<int32_t>(q_lens.size()), tile_size,
                                     num_rows, budget, rolling);
  if (!plan.ok()) {
    ADD_FAILURE() << plan.status().to_string();
    return rows;
  }
  rows.plan = *plan;
  rows.indices = DeviceBuffer(std::max<size_t>(1, size_t(rows.plan.total_indices())) * sizeof(int32_t));
  rows.row_offsets = upload_vector(rows.plan.row_offsets);
  rows.tile_base = upload_vector(rows.plan.tile_base);
  return rows;
}

// ---- key lists and recomputation

KeyListFn dense_keys(const PrefillProblem& p) {
  return [&p](int32_t b, int32_t i, int32_t) {
    std::vector<int32_t> keys(static_cast<size_t>(p.position(b, i)) + 1);
    std::iota(keys.begin(), keys.end(), 0);
    return keys;
  };
}

KeyListFn sparse_keys(const PrefillProblem& p, const ref::PrefillRowPlan& plan, const std::vector<int32_t>& indices,
                      bool include_local, IndexGranularity granularity, const std::vector<int32_t>& head_map) {
  return [&p, &plan, &indices, include_local, granularity, &head_map](int32_t b, int32_t i, int32_t h) {
    const int32_t pos = p.position(b, i);
    const int32_t tile_size = plan.tile_size;
    const int64_t tile = pos / tile_size;
    const int64_t slot = plan.tile_base[b] + (tile - plan.tile_first[b]);
    int32_t row = h;
    if (granularity == IndexGranularity::kPerKvGroup) {
      const int32_t g = h / p.group();
      row = head_map.empty() ? g : head_map[g];
    }
    const int64_t r = slot * plan.num_rows + row;
    std::vector<int32_t> keys;
    for (int64_t e = plan.row_offsets[r]; e < plan.row_offsets[r + 1]; ++e) {
      if (indices[e] <= pos) keys.push_back(indices[e]);
    }
    if (include_local) {
      for (int32_t j = static_cast<int32_t>(tile * tile_size); j <= pos; ++j) keys.push_back(j);
    }
    return keys;
  };
}

PrefillReference recompute_prefill(const PrefillProblem& p, const KeyListFn& keys) {
  const PrefillCase& c = p.spec();
  const int32_t d = c.head_dim, heads = c.num_heads;
  const double scale = p.scale();
  PrefillReference r;
  const size_t rows = static_cast<size_t>(p.total_q()) * heads;
  r.o64.assign(rows * d, 0.0);
  r.lse64.assign(rows, -std::numeric_limits<double>::infinity());
  r.naive_o.assign(rows * d, 0.0f);
  std::vector<std::pair<int32_t, int32_t>> queries;  // (b, i)
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t i = 0; i < p.q_len(b); ++i) queries.emplace_back(b, i);
  }
  const int64_t total = static_cast<int64_t>(queries.size()) * heads;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t t = 0; t < total; ++t) {
    const auto [b, i] = queries[static_cast<size_t>(t / heads)];
    const int32_t h = static_cast<int32_t>(t % heads);
    const std::vector<int32_t> list = keys(b, i, h);
    const size_t row = static_cast<size_t>(p.q_start(b) + i) * heads + h;
    if (list.empty()) continue;
    const int32_t g = h / p.group();
    recompute_row(
        p.q_row(b, i, h), list, [&](int32_t j) { return p.k_row(b, j, g); }, [&](int32_t j) { return p.v_row(b, j, g); },
        d, scale, c.dtype, r.o64.data() + row * d, r.lse64.data() + row, r.naive_o.data() + row * d);
  }
  return r;
}

::testing::AssertionResult check_prefill_attention(const PrefillProblem& p, const PrefillReference& r,
                                                   const std::vector<float>& got_o, const std::vector<float>& got_lse) {
  const PrefillCase& c = p.spec();
  const std::vector<int64_t> shape = {p.total_q(), c.num_heads, c.head_dim};
  if (got_o.size() != r.o64.size() || got_lse.size() != r.lse64.size()) {
    return ::testing::AssertionFailure() << "output sizes " << got_o.size() << ", " << got_lse.size()
                                         << "; expected " << r.o64.size() << ", " << r.lse64.size();
  }
  auto o_check = within_naive_error(got_o, r.naive_o, r.o64, shape, 2.0 * dtype_epsilon(c.dtype));
  if (!o_check) return ::testing::AssertionFailure() << "o: " << o_check.message();
  return check_lse(got_lse, r.lse64, c.num_heads, "(query, head)");
}

::testing::AssertionResult check_selected_rows(const PrefillProblem& p, const ref::PrefillRowPlan& plan,
                                               const std::vector<int32_t>& got, bool reduce_max, double eps_rel) {
  const int32_t num_rows = plan.num_rows;
  ref::PoolingSpec spec;
  spec.num_rows = num_rows;
  spec.reduce = reduce_max ? ref::PoolReduce::kMax : ref::PoolReduce::kSum;
  AttentionParams params;
  params.scale = p.scale();
  if (got.size() != static_cast<size_t>(plan.total_indices())) {
    return ::testing::AssertionFailure() << "got " << got.size() << " indices; the plan has " << plan.total_indices();
  }
  int64_t selected = 0;
  for (int32_t b = 0; b < p.batch(); ++b) {
    for (int32_t slot = plan.tile_base[b]; slot < plan.tile_base[b + 1]; ++slot) {
      const int64_t tile = plan.tile_first[b] + (slot - plan.tile_base[b]);
      const int64_t s_t = tile * plan.tile_size;
      std::vector<float> scores(static_cast<size_t>(num_rows * s_t));
      if (s_t > 0) {
        const Status status = ref::pooled_scores_prefill_tile_ref(p.host_q(), p.host_kv(), params, spec, b, tile,
                                                                  plan.tile_size, scores.data(), nullptr);
        if (!status.ok()) return ::testing::AssertionFailure() << status.to_string();
      }
      for (int32_t r = 0; r < num_rows; ++r) {
        const int64_t row = int64_t{slot} * num_rows + r;
        const int64_t begin = plan.row_offsets[row], k = plan.row_offsets[row + 1] - begin;
        const std::vector<int32_t> mine(got.begin() + begin, got.begin() + begin + k);
        const std::string where = "sequence " + std::to_string(b) + " tile " + std::to_string(tile) + " row " +
                                  std::to_string(r) + " (k = " + std::to_string(k) + " of " + std::to_string(s_t) + ")";
        if (!std::is_sorted(mine.begin(), mine.end())) return ::testing::AssertionFailure() << where << ": not ascending";
        std::vector<int32_t> expected(static_cast<size_t>(k));
        const std::span<const float> row_scores(scores.data() + r * s_t, static_cast<size_t>(s_t));
        if (k > 0) {
          const Status status = ref::topk_select_ref(row_scores.data(), s_t, k, expected.data());
          if (!status.ok()) return ::testing::AssertionFailure() << status.to_string();
        }
        auto same = topk_sets_equivalent(mine, expected, row_scores, eps_rel);
        if (!same) return ::testing::AssertionFailure() << where << ": " << same.message();
        selected += k;
      }
    }
  }
  if (selected == 0) return ::testing::AssertionFailure() << "the call selected no index; the test checks nothing";
  return ::testing::AssertionSuccess();
}

bool wgmma_device_available() {
  if (!cuda_device_available()) return false;
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

Result<PlannedWorkspace> make_prefill_workspace(const cuda::PrefillShape& shape,
                                                const cuda::PrefillPlanOptions& options) {
  auto plan = cuda::plan_prefill(shape, options);
  if (!plan.ok()) return plan.status();
  PlannedWorkspace w;
  w.plan = *plan;
  w.workspace = DeviceBuffer(w.plan.workspace.total_bytes, 0);
  KC_RETURN_IF_ERROR(cuda::initialize_prefill_workspace(w.plan, w.workspace.data(), nullptr));
  return w;
}

void expect_no_prefill_errors(const cuda::PrefillPlan& plan, void* workspace) {
  auto errors = cuda::read_prefill_errors(plan, workspace, nullptr);
  EXPECT_TRUE(errors.ok()) << errors.status().to_string();
  if (errors.ok()) {
    EXPECT_EQ(*errors, 0u) << cuda::describe_prefill_errors(*errors);
  }
}

}  // namespace kascade::testing
