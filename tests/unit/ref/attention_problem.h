// tests/unit/ref/attention_problem.h — random attention problems for the CPU reference tests:
// queries and a paged KV cache (page size 1, 16, ... or contiguous; page ids shuffled; spare pages
// and the unused tail of each last page filled with NaN so that a read outside the valid keys
// poisons the result), the same values kept in plain logical arrays, and independent reference
// implementations over an explicit key set per (sequence, query, head): an fp64 one and a naive
// one (fp32 accumulation, o rounded to the output dtype) for the FA3 tolerance rule.
// The references index the logical arrays directly (no paging, no blocks, two-pass softmax).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "testing/harness.h"

namespace kascade::testing {

struct ProblemSpec {
  DType dtype = DType::kF32;  // q, k and v
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 64;
  std::vector<int32_t> q_lens;
  std::vector<int32_t> kv_lens;
  int32_t page_size = 16;  // 0: contiguous (one page per sequence holding the longest sequence)
  bool shuffle_pages = true;
  int32_t spare_pages = 3;  // pages no sequence uses, NaN-filled
  float q_range = 3.0f;     // q uniform in [-q_range, q_range); k and v in [-1, 1)
};

class AttentionProblem {
 public:
  AttentionProblem(const ProblemSpec& spec, std::mt19937_64& rng);
  // The same logical q, k, v stored with another page layout.
  AttentionProblem with_layout(int32_t page_size, bool shuffle_pages, std::mt19937_64& rng) const;

  const ProblemSpec& spec() const { return spec_; }
  int32_t batch() const { return static_cast<int32_t>(spec_.q_lens.size()); }
  int32_t total_q() const { return cu_q_lens_.back(); }
  int32_t heads() const { return spec_.num_heads; }
  int32_t kv_heads() const { return spec_.num_kv_heads; }
  int32_t group() const { return spec_.num_heads / spec_.num_kv_heads; }
  int32_t dim() const { return spec_.head_dim; }
  int32_t q_len(int32_t b) const { return spec_.q_lens[b]; }
  int32_t kv_len(int32_t b) const { return spec_.kv_lens[b]; }
  int64_t position(int32_t b, int32_t i) const { return int64_t{spec_.kv_lens[b]} - spec_.q_lens[b] + i; }
  int32_t first_query(int32_t b) const { return cu_q_lens_[b]; }
  float scale() const;

  // Logical values (as stored, i.e. rounded through the dtype).
  float q(int32_t b, int32_t i, int32_t h, int32_t c) const;
  float k(int32_t b, int64_t j, int32_t g, int32_t c) const;
  float v(int32_t b, int64_t j, int32_t g, int32_t c) const;
  // The same values as rows of head_dim elements: [d].
  const float* q_row(int32_t b, int32_t i, int32_t h) const { return &q_[(static_cast<size_t>(first_query(b) + i) * heads() + h) * dim()]; }
  const float* k_row(int32_t b, int64_t j, int32_t g) const { return &k_[b][(static_cast<size_t>(j) * kv_heads() + g) * dim()]; }
  const float* v_row(int32_t b, int64_t j, int32_t g) const { return &v_[b][(static_cast<size_t>(j) * kv_heads() + g) * dim()]; }

  QueryBatch queries() const;
  PagedKv cache() const;
  AttentionParams params() const;

  // Sizes of o ([total_q, H, d]) and lse ([total_q, H]) and the flat index of (b, i, h).
  int64_t o_size() const { return int64_t{total_q()} * heads() * dim(); }
  int64_t lse_size() const { return int64_t{total_q()} * heads(); }
  int64_t lse_index(int32_t b, int32_t i, int32_t h) const { return int64_t{first_query(b) + i} * heads() + h; }

 private:
  void build_cache(std::mt19937_64& rng);

  ProblemSpec spec_;
  std::vector<int32_t> cu_q_lens_;          // [batch + 1]
  std::vector<float> q_;                    // [total_q, H, d]
  std::vector<std::vector<float>> k_, v_;   // per sequence [kv_len, G, d]
  std::vector<uint8_t> q_bytes_;            // q packed in dtype
  std::vector<uint8_t> k_cache_, v_cache_;  // [num_pages, page_size, G, d] in dtype
  std::vector<int32_t> block_table_;        // [batch, max_pages]
  int32_t num_pages_ = 0;
  int32_t page_size_ = 0;
  int32_t max_pages_ = 0;
};

// The keys (positions) that query i of sequence b, head h attends.
using KeySetFn = std::function<std::vector<int64_t>(int32_t b, int32_t i, int32_t h)>;
// Dense causal: 0 .. position.
KeySetFn causal_keys(const AttentionProblem& problem);

// Outputs of the two test-side implementations for a whole call.
struct ReferenceOutputs {
  std::vector<double> o64, lse64;        // fp64, unrounded
  std::vector<float> o_naive, lse_naive;  // fp32 accumulation; o rounded to the output dtype
};
ReferenceOutputs reference_outputs(const AttentionProblem& problem, DType out_dtype, const KeySetFn& keys);

// Output buffers of one op call: o in out_dtype and lse, both guarded and NaN-poisoned.
struct GuardedOutput {
  GuardedOutput(const AttentionProblem& problem, DType out_dtype);
  AttentionOutput view();
  std::vector<float> o_as_float() const;
  bool intact() const { return o.intact() && lse.intact(); }
  DType dtype;
  GuardedBuffer<uint8_t> o;  // 0xFF bytes: NaN in every dtype
  GuardedBuffer<float> lse;
};

// within_naive_error on o and on lse, plus intact canaries.
::testing::AssertionResult matches_reference(const AttentionProblem& problem, const GuardedOutput& got,
                                             const ReferenceOutputs& ref);

// `count` distinct values of [lo, hi), in random order.
std::vector<int32_t> random_subset(std::mt19937_64& rng, int64_t lo, int64_t hi, int64_t count);

}  // namespace kascade::testing
