// tests/cuda/test_prefill_problem.h — what the prefill kernel tests share: a random varlen prefill
// problem over a paged KV cache (shuffled pages, block-table entries past a sequence's pages = -1)
// with host and device views, chunk views of one sequence (the same cache, a later kv_len), device
// copies of planned compact index rows, and an fp64 + naive same-precision recomputation of
// attention over arbitrary per-(query, head) key lists for the FA3 tolerance rule
// (harness within_naive_error). Builds on cuda_test_support.h (DeviceBuffer, skips, asserts).
// The recomputation is itself checked against src/ref by the dense tests (both must agree).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/prefill/prefill_plan.h"
#include "cuda_test_support.h"
#include "kascade/attention.h"
#include "kascade/budget.h"
#include "kascade/dtype.h"
#include "ref/prefill_rows.h"

namespace kascade::testing {

struct PrefillCase {
  DType dtype = DType::kF16;
  int32_t num_heads = 8;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 128;
  int32_t page_size = 16;  // 0: contiguous (one page per sequence)
  std::vector<int32_t> q_lens;
  std::vector<int32_t> kv_lens;
  float q_range = 2.0f, k_range = 2.0f, v_range = 1.0f;
};

// A PrefillCase from its fields (the tests' shorthand).
PrefillCase make_prefill_case(DType dtype, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                              std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens, int32_t page_size = 16);

// Shape-parameterised prefill tests: (dtype, H, G, head_dim, page_size; 0 = contiguous).
using PrefillConfig = std::tuple<DType, int, int, int, int>;
std::string prefill_config_name(const ::testing::TestParamInfo<PrefillConfig>& info);
class PrefillConfigTest : public ::testing::TestWithParam<PrefillConfig> {
 protected:
  PrefillCase make_case(std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens) const;
};

// The prefill kernel families a plan can select (PrefillPlanOptions::kernels): mma.sync, wgmma
// issued synchronously, and the warp-specialised sm_90a kernels (dense + LSE pass and sparse
// prefill with gathered keys; with kWarpSpecializedTma also the pooled scores; Top-k has one
// kernel) with cp.async K/V producers (kWarpSpecialized) or the TMA one for the causal passes and
// pooling (kWarpSpecializedTma; cp.async / mma.sync where the layout does not allow TMA). kAuto:
// the default choice (causal_launch.h: ws_tma where the device, build and K/V layout allow it, the
// ws sparse kernel on every layout of such a device and build, else mma.sync).
enum class PrefillVariant { kMma, kWgmma, kWarpSpecialized, kWarpSpecializedTma, kAuto };
const char* prefill_variant_name(PrefillVariant variant);
// Options forcing `variant` (every other option at its default).
cuda::PrefillPlanOptions variant_options(PrefillVariant variant);
// Whether this machine runs `variant` (the sm_90a ones need an sm_90 device).
bool variant_available(PrefillVariant variant);

#define KC_SKIP_WITHOUT_VARIANT(variant)                                                          \
  do {                                                                                            \
    if (!::kascade::testing::variant_available(variant))                                          \
      GTEST_SKIP() << "this device does not run " << ::kascade::testing::prefill_variant_name(variant); \
  } while (0)

// One prefill call: queries [total_q, H, d] (packed, sequence b's q_len[b] queries are its last
// positions), K/V of every sequence's kv_len keys. Values are drawn in the dtype, so the float
// copies equal what the device holds. Without a CUDA device only the host side exists.
class PrefillProblem {
 public:
  PrefillProblem(const PrefillCase& c, std::mt19937_64& rng);

  const PrefillCase& spec() const { return case_; }
  int32_t batch() const { return static_cast<int32_t>(case_.q_lens.size()); }
  int32_t total_q() const { return cu_q_lens_.back(); }
  int32_t max_q_len() const;
  int32_t max_kv_len() const;
  float scale() const;
  int32_t group() const { return case_.num_heads / case_.num_kv_heads; }

  QueryBatch host_q() const;
  PagedKv host_kv() const;
  QueryBatch device_q() const;
  PagedKv device_kv() const;

  // The plan shape of this call (limits = this call's lengths).
  cuda::PrefillShape shape(int32_t tile_size = 32) const;

  // Sets every query to zero (host and device): all logits 0, so pooled scores tie exactly.
  void zero_queries();

  int32_t q_start(int32_t b) const { return cu_q_lens_[b]; }
  int32_t q_len(int32_t b) const { return case_.q_lens[b]; }
  int32_t kv_len(int32_t b) const { return case_.kv_lens[b]; }
  // Absolute position of query i (0-based within the call) of sequence b.
  int32_t position(int32_t b, int32_t i) const { return kv_len(b) - q_len(b) + i; }

  // Host float images.
  const float* q_row(int32_t b, int32_t i, int32_t h) const;
  const float* k_row(int32_t b, int32_t j, int32_t g) const;
  const float* v_row(int32_t b, int32_t j, int32_t g) const;

  // Device views of a call over queries [c0, c1) of sequence 0 with kv_len c1 (the same cache): a
  // chunk of a chunked prefill. Owns its small device arrays.
  struct Chunk {
    QueryBatch q;
    PagedKv kv;
    DeviceBuffer cu_q_lens, kv_lens;
  };
  Chunk chunk(int32_t c0, int32_t c1) const;

 private:
  int64_t row_offset(int32_t b, int32_t j, int32_t g) const;
  PrefillCase case_;
  int32_t page_size_ = 0, max_pages_ = 0, num_pages_ = 0;
  std::vector<float> q_, k_, v_;
  std::vector<uint8_t> q_bytes_, k_bytes_, v_bytes_;
  std::vector<int32_t> block_table_, cu_q_lens_;
  DeviceBuffer q_d_, k_d_, v_d_, table_d_, cu_d_, lens_d_;
};

// A budget that selects a large share of each tile's candidates (rho 30 %, k_min 5), so that
// small test calls select many indices.
Budget small_prefill_budget();

// Planned compact rows of a call (ref::plan_prefill_rows) with host and device copies.
struct PrefillRowsOnDevice {
  ref::PrefillRowPlan plan;
  DeviceBuffer indices, row_offsets, tile_base;
  // A device view (indices as they are on the device).
  PrefillIndexRows view(bool include_local, IndexGranularity granularity) const;
  // The device indices downloaded, [plan.total_indices()].
  std::vector<int32_t> download_indices() const;
};
// Plans rows for the call's (q_lens, kv_lens); indices start as -1 (0xFF poison).
PrefillRowsOnDevice plan_rows_on_device(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens,
                                        int32_t tile_size, int32_t num_rows, const Budget& budget, bool rolling);

// The keys query i of sequence b attends with head h.
using KeyListFn = std::function<std::vector<int32_t>(int32_t b, int32_t i, int32_t h)>;
KeyListFn dense_keys(const PrefillProblem& p);
// Keys of the rows (host copy `indices` of a view laid out by `plan`), as ref::sparse_prefill_ref.
KeyListFn sparse_keys(const PrefillProblem& p, const ref::PrefillRowPlan& plan, const std::vector<int32_t>& indices,
                      bool include_local, IndexGranularity granularity, const std::vector<int32_t>& head_map);

// fp64 o [total_q, H, d] and lse [total_q, H], and the naive same-precision o (logits, weights and
// output rounded to the dtype). Parallel over rows (OpenMP).
struct PrefillReference {
  std::vector<double> o64, lse64;
  std::vector<float> naive_o;
};
PrefillReference recompute_prefill(const PrefillProblem& p, const KeyListFn& keys);

// o by the FA3 rule (<= 2 × naive error + 2 unit roundoffs), lse within 1e-4 + 1e-5|lse| of fp64;
// a query with no keys must give o = 0 and lse = -inf.
::testing::AssertionResult check_prefill_attention(const PrefillProblem& p, const PrefillReference& r,
                                                   const std::vector<float>& got_o, const std::vector<float>& got_lse);

// Checks rows selected for the call (host copy `got` laid out by `plan`, R = plan.num_rows pooled
// rows, sum or max pooling) against ref::pooled_scores_prefill_tile_ref + ref::topk_select_ref with
// the tie-aware rule (topk_sets_equivalent, eps_rel), and that every row is ascending.
::testing::AssertionResult check_selected_rows(const PrefillProblem& p, const ref::PrefillRowPlan& plan,
                                               const std::vector<int32_t>& got, bool reduce_max, double eps_rel);

// True when the device is sm_90 (Hopper): the wgmma variants (PrefillPlanOptions::wgmma) run there.
bool wgmma_device_available();

#define KC_SKIP_WITHOUT_WGMMA()                                                                 \
  do {                                                                                          \
    if (!::kascade::testing::wgmma_device_available()) GTEST_SKIP() << "no sm_90 device (wgmma)"; \
  } while (0)

// A prefill plan for the problem (asserting success is the caller's job) with a zeroed workspace.
struct PlannedWorkspace {
  cuda::PrefillPlan plan;
  DeviceBuffer workspace;
};
Result<PlannedWorkspace> make_prefill_workspace(const cuda::PrefillShape& shape,
                                                const cuda::PrefillPlanOptions& options = {});

// Reads the workspace's error word and expects it clear (naming the bits otherwise).
void expect_no_prefill_errors(const cuda::PrefillPlan& plan, void* workspace);

}  // namespace kascade::testing
