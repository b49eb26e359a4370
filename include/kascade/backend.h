// kascade/backend.h — the op-level interface every attention backend implements (DESIGN.md §3:
// "the CPU backend and the CUDA backend implement the same op interface"). Policies
// (include/kascade/policy.h) decide *which* keys each layer attends and call these ops; the
// backend owns the arithmetic and the memory. Header-only, so a backend library needs nothing
// but kascade_core to implement it.
//
// Memory: every pointer an op receives (inside the views of kascade/attention.h, head maps, index
// rows) lives in the backend's memory space (host for the CPU backend, device for CUDA); the only
// host pointers are the ones documented as such (`k_per_seq`). allocate() returns an owning
// BackendBuffer; copy_from_host / copy_to_host move bytes across.
//
// Index rows (DecodeIndexRows / PrefillIndexRows) are sets: duplicate-free, order unspecified.
// Selection ops write the first k entries of each row (decode rows: -1 past row_lens); prefill
// rows have lengths fixed in advance by their offsets (src/ref/prefill_rows.h plans them).
//
// The ops:
//   dense            exact causal attention (o + lse), prefill (any q_len) and decode (q_len 1).
//   select_decode    post-softmax scores p_h[j] of the query at n-1 over keys j < n, pooled into
//                    `pooling.num_rows` rows (row r reduces heads [r·H/R, (r+1)·H/R) with a sum or
//                    a max), then the exact Top-k of each row (ties: lower index wins), k per
//                    sequence from a host array. Covers Kascade per KV group (R = G, sum),
//                    kascade-pooled (R = 1, sum), the decode oracle (R = H) and OmniKV (R = 1, max).
//   select_prefill   for every (sequence, tile) the call touches: pooled scores over the call's
//                    queries of the tile and candidates j < s_t (DESIGN.md §2.3), then the Top-k of
//                    each row at the row's planned length k_t; tile by tile, with scratch bounded
//                    by O(rows · n) (never the O(n²/T) score matrix).
//   sparse_decode / sparse_prefill   softmax restricted to the rows (∪ local keys in prefill),
//                    KV group g reading row head_map[g] (identity when head_map is null).
//   select_prefill_oracle   per query head and query, the top-k(i+1) keys of its own p over
//                    j <= i (rows with tile_size 1, include_local false, per query head, lengths
//                    planned by the caller). The CPU backend scores each query's full row; the
//                    CUDA backend runs each query as a decode selection over its i + 1 keys.
//   select_quest_decode     Quest: pages of `page_size` keys, per-channel min/max of the keys of
//                    each page (over the valid keys), page score Σ_d max(q_d·min_d, q_d·max_d) per
//                    query head; pages in descending score (ties: lower page) are taken whole
//                    until they hold >= k keys. Per-query-head rows of length <= min(n, k+page-1).
//   select_lessismore_decode  LessIsMore, one row per sequence: S = sinks [0, min(num_sinks, n))
//                    ∪ recent [n - k_recent, n) with k_recent = ceil(k/4); then every head's keys
//                    ranked by p_h (descending, ties: lower index) are merged rank by rank (rank 0 of
//                    heads 0..H-1, then rank 1, ...), skipping keys already in the row, until
//                    k - k_recent new keys were added or the candidates run out. Row length
//                    <= min(n, k + num_sinks); a saturated k (= n) selects every key.
//   anchor_decode / anchor_prefill   a selection followed by the layer's own output (dense or
//                    sparse over the fresh rows). The default composes the ops above; a backend
//                    may override them with a fused kernel.
// A backend that cannot run an op returns kUnsupported from it and says so in supports().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "kascade/attention.h"
#include "kascade/status.h"

namespace kascade {

// An owning allocation in a backend's memory space. Move-only; `release` frees it.
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(void* data, size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;
  BackendBuffer(BackendBuffer&& other) noexcept { swap(other); }
  BackendBuffer& operator=(BackendBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  ~BackendBuffer() { reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void reset() {
    if (data_ != nullptr && release_) release_(data_);
    data_ = nullptr;
    bytes_ = 0;
    release_ = nullptr;
  }

 private:
  void swap(BackendBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(release_, other.release_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

// How select ops reduce per-head post-softmax scores into rows: R = num_rows rows, row r reduces
// query heads [r·H/R, (r+1)·H/R). R must divide H.
enum class ScoreReduce : uint8_t { kSum = 0, kMax = 1 };
struct ScorePooling {
  int32_t num_rows = 0;
  ScoreReduce reduce = ScoreReduce::kSum;
};

// What an anchor op writes as the layer's own output.
enum class AnchorOutput : uint8_t {
  kDense = 0,   // dense attention (Kascade layer 0, OmniKV filters, LessIsMore selection layers)
  kSparse = 1,  // softmax restricted to the fresh rows (Kascade anchors > 0, oracle)
};

// The ops, for supports().
enum class BackendOp : uint8_t {
  kDense,
  kSelectDecode,
  kSelectPrefill,
  kSparseDecode,
  kSparsePrefill,
  kSelectPrefillOracle,
  kSelectQuestDecode,
  kSelectLessIsMoreDecode,
};

inline const char* backend_op_name(BackendOp op) {
  switch (op) {
    case BackendOp::kDense: return "dense";
    case BackendOp::kSelectDecode: return "select_decode";
    case BackendOp::kSelectPrefill: return "select_prefill";
    case BackendOp::kSparseDecode: return "sparse_decode";
    case BackendOp::kSparsePrefill: return "sparse_prefill";
    case BackendOp::kSelectPrefillOracle: return "select_prefill_oracle";
    case BackendOp::kSelectQuestDecode: return "select_quest_decode";
    case BackendOp::kSelectLessIsMoreDecode: return "select_lessismore_decode";
  }
  return "unknown";
}

// The static shape of a model's attention, for supports().
struct AttentionShape {
  int32_t num_heads = 0;     // H
  int32_t num_kv_heads = 0;  // G
  int32_t head_dim = 0;      // d
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // "cpu", "cuda".
  virtual const char* name() const = 0;

  // OK when this backend can run `op` for `shape`; otherwise a Status saying why not
  // (kUnsupported for a valid request it does not implement).
  virtual Status supports(BackendOp op, const AttentionShape& shape) const = 0;

  // ---- memory ----
  // An allocation of `bytes` (>= 1) in this backend's memory.
  virtual Result<BackendBuffer> allocate(size_t bytes) = 0;
  // dst: backend memory [bytes]; src: host memory [bytes].
  virtual Status copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  // dst: host memory [bytes]; src: backend memory [bytes].
  virtual Status copy_to_host(void* dst, const void* src, size_t bytes) = 0;

  // ---- attention ----
  virtual Status dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                       const AttentionOutput& out) = 0;
  // head_map: [G] int32 or null (identity). Decode: q_len 1 per sequence.
  virtual Status sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const DecodeIndexRows& rows, const int32_t* head_map,
                               const AttentionOutput& out) = 0;
  virtual Status sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                const PrefillIndexRows& rows, const int32_t* head_map,
                                const AttentionOutput& out) = 0;

  // ---- selection ----
  // k_per_seq: [batch] host int32, 0 <= k <= kv_len[b] and k <= rows.k_max. Writes rows.indices
  // [batch, R, k_max] (-1 past k) and rows.row_lens [batch, R] (= k). rows.num_rows == R.
  virtual Status select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const ScorePooling& pooling, const int32_t* k_per_seq,
                               const DecodeIndexRows& rows) = 0;
  // rows: include_local, num_rows == R, offsets planned (row length k_t <= s_t); fills indices.
  virtual Status select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                const ScorePooling& pooling, const PrefillIndexRows& rows) = 0;
  // rows: tile_size 1, !include_local, kPerQueryHead, num_rows == H; row of query i holds its
  // planned number of keys (<= i + 1) out of j <= i.
  virtual Status select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                       const PrefillIndexRows& rows) = 0;
  // rows: kPerQueryHead, num_rows == H, k_max >= min(kv_len, k + page_size - 1).
  virtual Status select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size,
                                     const int32_t* k_per_seq, const DecodeIndexRows& rows) = 0;
  // rows: kPerKvGroup, num_rows == 1, k_max >= min(kv_len, k + num_sinks).
  virtual Status select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                          const int32_t* k_per_seq, int32_t num_sinks,
                                          const DecodeIndexRows& rows) = 0;

  // ---- fusable anchors: select, then the layer's own output ----
  // head_map is the map the sparse output reads the fresh rows with ([G] or null).
  virtual Status anchor_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                               const ScorePooling& pooling, const int32_t* k_per_seq,
                               const DecodeIndexRows& rows, AnchorOutput output, const int32_t* head_map,
                               const AttentionOutput& out) {
    KC_RETURN_IF_ERROR(select_decode(q, kv, params, pooling, k_per_seq, rows));
    if (output == AnchorOutput::kDense) return dense(q, kv, params, out);
    return sparse_decode(q, kv, params, rows, head_map, out);
  }
  virtual Status anchor_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                const ScorePooling& pooling, const PrefillIndexRows& rows,
                                AnchorOutput output, const int32_t* head_map, const AttentionOutput& out) {
    KC_RETURN_IF_ERROR(select_prefill(q, kv, params, pooling, rows));
    if (output == AnchorOutput::kDense) return dense(q, kv, params, out);
    return sparse_prefill(q, kv, params, rows, head_map, out);
  }
};

}  // namespace kascade
