// tests/cuda/test_backend_stack.h — a multi-layer attention problem for running whole policy
// schedules on the CUDA backend and the CPU backend side by side (test_backend_prefill.cpp):
//   - per layer, random q of every position of every sequence and a paged K/V cache (pages of all
//     sequences shuffled together; block-table entries past a sequence's pages are -1, so a kernel
//     that reads them is caught), drawn in f16 / bf16 so the float copies equal what both backends
//     read;
//   - calls over positions [start, end) of any subset of the sequences (prefill chunks, decode
//     steps), with host views (CPU backend) and device views (CUDA backend) of the same bytes;
//   - fp64 and naive same-precision recomputations of attention over per-(query, head) key lists
//     (the FA3 rule of DESIGN.md §4), and fp64 post-softmax probabilities for tie-aware row checks;
//     written here, independent of src/ref and of the kernels.
// Exercised by test_backend_prefill.cpp; the recomputation is checked there against the CPU backend
// (dense layers must agree with it within the rule before any GPU comparison is trusted).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_support.h"
#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "kascade/policy.h"

namespace kascade::testing {

struct StackShape {
  DType dtype = DType::kBF16;
  int32_t num_layers = 6;
  int32_t num_heads = 8;     // H
  int32_t num_kv_heads = 2;  // G
  int32_t head_dim = 64;     // d
  int32_t page_size = 16;
  std::vector<int32_t> lens;  // positions each sequence holds (queries, keys and values exist for all)
};

class LayerStack;

// One forward call: call sequence i is stack sequence seqs[i], its queries are the positions
// [starts[i], kv_lens[i]) and its keys 0 .. kv_lens[i] - 1.
class StackCall {
 public:
  ForwardMode mode = ForwardMode::kPrefill;
  std::vector<int32_t> seqs, starts, q_lens, kv_lens;  // [batch]
  std::vector<int32_t> cu_q_lens;                       // [batch + 1]
  int32_t total_q = 0;

  int32_t batch() const { return static_cast<int32_t>(seqs.size()); }
  ForwardInfo info() const;
  QueryBatch host_q(int32_t layer) const;
  PagedKv host_kv(int32_t layer) const;
  QueryBatch device_q(int32_t layer) const;
  PagedKv device_kv(int32_t layer) const;
  // Absolute position of the call's packed query `row` (0 .. total_q - 1) and its call sequence.
  int32_t sequence_of(int32_t row) const;

 private:
  friend class LayerStack;
  const LayerStack* stack_ = nullptr;
  std::vector<std::vector<uint8_t>> q_bytes_;  // [layer][total_q, H, d] dtype
  std::vector<int32_t> block_table_;           // [batch, max_pages]
  std::vector<DeviceBuffer> q_d_;              // [layer]
  DeviceBuffer cu_d_, lens_d_, table_d_;
};

class LayerStack {
 public:
  LayerStack(const StackShape& shape, std::mt19937_64& rng);

  const StackShape& shape() const { return shape_; }
  int32_t batch() const { return static_cast<int32_t>(shape_.lens.size()); }
  int32_t group() const { return shape_.num_heads / shape_.num_kv_heads; }
  int32_t page_size() const { return shape_.page_size; }
  int32_t max_pages() const { return max_pages_; }
  // The longest len (the block table covers it).
  int32_t max_seq_len() const { return max_len_; }
  float scale() const;

  // Positions [starts[i], ends[i]) of stack sequences seqs[i] (device views only with a GPU).
  std::unique_ptr<StackCall> call(ForwardMode mode, const std::vector<int32_t>& seqs,
                                  const std::vector<int32_t>& starts, const std::vector<int32_t>& ends) const;

  // Host float images: q of position `pos`, head h; k / v of key j, KV head g (stack sequence `seq`).
  const float* q_at(int32_t layer, int32_t seq, int32_t pos, int32_t h) const;
  const float* k_at(int32_t layer, int32_t seq, int32_t j, int32_t g) const;
  const float* v_at(int32_t layer, int32_t seq, int32_t j, int32_t g) const;

 private:
  friend class StackCall;
  int64_t kv_offset(int32_t seq, int32_t j, int32_t g) const;
  StackShape shape_;
  int32_t max_pages_ = 0, num_pages_ = 0, max_len_ = 0;
  std::vector<int64_t> q_base_;                   // [batch] first position row of each sequence
  std::vector<int32_t> block_table_;              // [batch, max_pages]
  std::vector<std::vector<float>> q_, k_, v_;     // [layer] float images
  std::vector<std::vector<uint8_t>> k_bytes_, v_bytes_;  // [layer] dtype bytes
  std::vector<DeviceBuffer> k_d_, v_d_;           // [layer]
};

// The keys (query row `row` of the call, head h) attends: any order, distinct.
using StackKeys = std::function<std::vector<int32_t>(int32_t row, int32_t h)>;

// fp64 o [total_q, H, d] and lse [total_q, H]; the naive same-precision o (logits, weights and
// output rounded to the dtype). Parallel over (row, head) with OpenMP.
struct StackReference {
  std::vector<double> o64, lse64;
  std::vector<float> naive_o;
};
StackReference recompute_attention(const LayerStack& stack, const StackCall& call, int32_t layer,
                                   const StackKeys& keys);

// o by the FA3 rule (<= 2 x naive error + 2 unit roundoffs of fp64), lse within 1e-4 + 1e-5|lse|;
// an empty key list must give o = 0 and lse = -inf.
::testing::AssertionResult matches_reference(const LayerStack& stack, const StackCall& call,
                                             const StackReference& ref, const std::vector<float>& got_o,
                                             const std::vector<float>& got_lse);

// fp64 post-softmax weights p_h[j], j = 0 .. pos, of the query at `pos` of stack sequence `seq`.
std::vector<double> probabilities(const LayerStack& stack, int32_t layer, int32_t seq, int32_t pos, int32_t h);

}  // namespace kascade::testing
