// tests/unit/policy/policy_fixture.h — small multi-layer attention problems for the policy tests:
// random queries for every position and a paged KV cache (shuffled page ids) per layer, forward
// calls over any range of positions per sequence (one-shot prefill, chunks, decode steps), a
// runner that drives an AttentionPolicy over all layers of a call, and an fp64 reference of
// "softmax restricted to a key set" written here, independent of src/ref.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kascade/attention.h"
#include "kascade/policy.h"

namespace kascade::testing {

struct ProblemShape {
  int32_t num_layers = 5;
  int32_t num_heads = 8;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 32;
  int32_t page_size = 16;  // KV cache page size
};

// One forward call: sequence b's queries are the positions [starts[b], kv_lens[b]).
struct Call {
  ForwardMode mode = ForwardMode::kPrefill;
  std::vector<int32_t> starts;     // [batch]
  std::vector<int32_t> q_lens;     // [batch]
  std::vector<int32_t> kv_lens;    // [batch]
  std::vector<int32_t> cu_q_lens;  // [batch + 1]
  int32_t total_q = 0;
  std::vector<std::vector<float>> q;  // [layer][total_q, H, d]
  int32_t batch() const { return static_cast<int32_t>(q_lens.size()); }
  ForwardInfo info() const;
};

class Problem {
 public:
  // lens: [batch] the number of positions each sequence holds (queries and keys exist for all).
  Problem(std::mt19937_64& rng, const ProblemShape& shape, const std::vector<int32_t>& lens, float range = 2.0f);

  const ProblemShape& shape() const { return shape_; }
  const std::vector<int32_t>& lens() const { return lens_; }
  int32_t batch() const { return static_cast<int32_t>(lens_.size()); }
  float scale() const;

  // Makes layer dst's queries, keys and values copies of layer src's.
  void copy_layer(int32_t dst, int32_t src);

  // Prefill-style call: positions [starts[b], ends[b]) of every sequence.
  Call call(ForwardMode mode, const std::vector<int32_t>& starts, const std::vector<int32_t>& ends) const;
  // One-shot prefill of every sequence's full length.
  Call prefill_all() const;
  // Decode: one query per sequence at position lens[b] - 1 (kv_len = lens[b]).
  Call decode_last() const;

  QueryBatch queries(const Call& call, int32_t layer) const;
  PagedKv kv(const Call& call, int32_t layer) const;

  // Element access (fp32): q of position p, k / v of key j, for head h / KV head g of sequence b.
  const float* q_at(int32_t layer, int32_t b, int32_t p, int32_t h) const;
  const float* k_at(int32_t layer, int32_t b, int64_t j, int32_t g) const;
  const float* v_at(int32_t layer, int32_t b, int64_t j, int32_t g) const;

 private:
  ProblemShape shape_;
  std::vector<int32_t> lens_;
  std::vector<int64_t> q_base_;                // [batch] first packed row of each sequence
  std::vector<std::vector<float>> q_;          // [layer][Σ lens, H, d]
  std::vector<std::vector<float>> k_, v_;      // [layer][num_pages, page_size, G, d]
  std::vector<int32_t> block_table_;           // [batch, max_pages]
  int32_t num_pages_ = 0;
  int32_t max_pages_ = 0;
};

// The outputs of every layer of a call.
struct RunResult {
  std::vector<std::vector<float>> o;    // [layer][total_q, H, d]
  std::vector<std::vector<float>> lse;  // [layer][total_q, H]
  std::vector<IndexSnapshot> rows;      // [layer] the policy's rows after the layer (if requested)
};

// begin_forward + attention for layers 0..N-1 (outputs in guarded, NaN-poisoned buffers).
// Fails the current test (ADD_FAILURE) and returns false on any non-OK Status or canary damage.
bool run_policy(AttentionPolicy& policy, const Problem& problem, const Call& call, bool snapshots, RunResult* result);

// fp64 softmax restricted to `keys` (any order, distinct) for the query at position p of
// sequence b, head h, layer `layer`: o [d] and lse. An empty set gives o = 0, lse = -inf.
void restricted_attention_fp64(const Problem& problem, int32_t layer, int32_t b, int32_t p, int32_t h,
                               const std::vector<int32_t>& keys, std::vector<double>* o, double* lse);

// Row r of sequence b of a decode snapshot, as a vector.
std::vector<int32_t> decode_row(const IndexSnapshot& snap, int32_t b, int32_t r);
// Row r of sequence b's tile `tile` of a prefill snapshot (the tile must be in the call).
std::vector<int32_t> prefill_row(const IndexSnapshot& snap, int32_t b, int64_t tile, int32_t r);

// A policy config for the problem's shape.
PolicyConfig config_for(const Problem& problem, const std::string& name);

// A DecodeIndexRows view of caller-owned storage. indices: [batch, num_rows, k_max];
// row_lens: [batch, num_rows].
inline DecodeIndexRows decode_rows_view(int32_t* indices, int32_t* row_lens, int32_t batch, int32_t num_rows,
                                        int32_t k_max,
                                        IndexGranularity granularity = IndexGranularity::kPerKvGroup) {
  DecodeIndexRows rows;
  rows.indices = indices;
  rows.row_lens = row_lens;
  rows.batch = batch;
  rows.num_rows = num_rows;
  rows.k_max = k_max;
  rows.granularity = granularity;
  return rows;
}

}  // namespace kascade::testing
