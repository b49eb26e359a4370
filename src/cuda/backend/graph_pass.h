// src/cuda/backend/graph_pass.h — what the CUDA backend keeps while a decode step is captured into
// a CUDA graph or checked against a captured one (CudaBackend::begin_graph_pass):
//   OpTrace      the host-side arguments of every graph-safe op of the step, flattened into words
//                (op, every field of the q / KV / rows / output views, pointers included, the
//                pooling, the head map pointer; never the device data and never the k values):
//                two steps with equal traces launch the same kernels with the same arguments, so
//                a graph captured for one replays the other;
//   StagedSizes  the host k_per_seq of the step's selections: every selecting op of one step must
//                pass the same sizes (the policies pass k(n) per sequence); they are copied into
//                the device buffer the captured ops read before each launch (pageable copies
//                cannot be captured, and the sizes change from step to step).
// Host-only (no CUDA calls). Tested by tests/cuda/test_gpu_runtime_graph.cpp (GraphPassTrace.*,
// which need no GPU) and through the graph decode of the runtime (same file).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/status.h"

namespace kascade::cuda {

enum class GraphPass : uint8_t {
  kNone = 0,     // eager: ops launch as they are called
  kCapture = 1,  // ops record their trace and launch into the stream being captured
  kCheck = 2,    // ops record their trace and launch nothing
};

// The graph-safe ops, as trace words.
enum class TracedOp : uint8_t { kDense = 1, kSparseDecode = 2, kSelectDecode = 3, kAnchorDecode = 4 };

class OpTrace {
 public:
  void clear() { words_.clear(); }
  size_t size() const { return words_.size(); }
  bool operator==(const OpTrace& other) const { return words_ == other.words_; }

  void add_op(TracedOp op) { add(0x6f70000000000000ull | static_cast<uint64_t>(op)); }
  void add(uint64_t word) { words_.push_back(word); }
  void add_pointer(const void* p) { add(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p))); }
  void add_float(float f) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof(bits));
    add(bits);
  }
  void add_query(const QueryBatch& q) {
    add_pointer(q.q);
    add(static_cast<uint64_t>(q.dtype));
    add(pack(q.batch, q.total_q));
    add(pack(q.num_heads, q.head_dim));
    add_pointer(q.cu_q_lens);
  }
  void add_kv(const PagedKv& kv) {
    add_pointer(kv.k);
    add_pointer(kv.v);
    add(static_cast<uint64_t>(kv.dtype));
    add(pack(kv.num_pages, kv.page_size));
    add(pack(kv.num_kv_heads, kv.head_dim));
    add_pointer(kv.block_table);
    add(static_cast<uint64_t>(static_cast<uint32_t>(kv.max_pages_per_seq)));
    add_pointer(kv.kv_lens);
  }
  void add_params(const AttentionParams& params) { add_float(params.scale); }
  void add_rows(const DecodeIndexRows& rows) {
    add_pointer(rows.indices);
    add_pointer(rows.row_lens);
    add(pack(rows.batch, rows.num_rows));
    add(pack(rows.k_max, static_cast<int32_t>(rows.granularity)));
  }
  void add_pooling(const ScorePooling& pooling) { add(pack(pooling.num_rows, static_cast<int32_t>(pooling.reduce))); }
  void add_output(const AttentionOutput& out) {
    add_pointer(out.o);
    add(static_cast<uint64_t>(out.dtype));
    add_pointer(out.lse);
  }

 private:
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::vector<uint64_t> words_;
};

class StagedSizes {
 public:
  void clear() {
    sizes_.clear();
    staged_ = false;
  }
  bool staged() const { return staged_; }
  const std::vector<int32_t>& sizes() const { return sizes_; }
  // k_per_seq: [batch] host. The first call of a step keeps the sizes; later calls must match them.
  Status stage(const int32_t* k_per_seq, int32_t batch, const char* op) {
    KC_CHECK_ARG(k_per_seq != nullptr && batch >= 1, op, ": k_per_seq is null or batch ", batch, " < 1");
    if (!staged_) {
      sizes_.assign(k_per_seq, k_per_seq + batch);
      staged_ = true;
      return ok_status();
    }
    if (static_cast<int32_t>(sizes_.size()) != batch || !std::equal(sizes_.begin(), sizes_.end(), k_per_seq))
      return unsupported(op, ": k_per_seq differs from the sizes an earlier op of this decode step passed; a "
                                 "CUDA graph step reads one staged copy of the sizes (the step is not graph-safe)");
    return ok_status();
  }

 private:
  std::vector<int32_t> sizes_;
  bool staged_ = false;
};

}  // namespace kascade::cuda
