// src/cuda/model/decode_graph.h — the CUDA graph of one decode step of the GPU runtime
// (cuda_session.h): which steps may share a graph (DecodeGraphKey), whether a policy's decode is
// graph-safe (graph_safe_policy), and the executable graph itself (DecodeGraph: capture a step's
// launches on a stream, update the executable in place when only kernel arguments changed, launch).
//
// Key: a captured step bakes in the layout of the call description (batch, which sequence is in
// which slot, which rows want logits), the sampler's settings and the width of the policy's decode
// index rows (the bucket of the max over the batch of k(n): the policy sizes its rows per call). Tokens, positions,
// cache slots, kv_lens and the selection sizes live in device buffers uploaded before each launch,
// so they change freely between replays.
// Graph-safe policies: dense and the Kascade variants (their decode runs dense decode, the fused
// anchor pipeline and sparse decode, all plan/run kernels reading lengths from device memory).
// The baselines are refused with the reason: quest and lessismore copy row lengths back to the
// host inside the step, streaming writes its rows from the host; oracle and omnikv (whose decode
// ops would capture) are kept eager as baselines for accuracy studies (DESIGN.md §3).
// Tested by tests/cuda/test_gpu_runtime_graph.cpp (the key and policy rules without a GPU; graph
// decode against eager decode on kascade-tiny on the GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/ops/sampling.h"
#include "kascade/policy.h"
#include "kascade/status.h"

namespace kascade::cuda {

// What a captured decode step depends on besides device data.
struct DecodeGraphKey {
  std::vector<int32_t> sequences;    // [batch] session sequence of each slot
  std::vector<int32_t> logit_slots;  // slots whose row of logits is computed, in order
  bool sample = false;               // the step ends with the device sampler
  SamplingParams sampling;           // its settings (when sample)
  int64_t rows_k_max = 0;            // AttentionPolicy::planned_decode_row_width (0: no rows)

  // Everything but rows_k_max: steps of one composition (the plans their first eager run made
  // are the ones a capture uses).
  bool same_composition(const DecodeGraphKey& o) const {
    return sequences == o.sequences && logit_slots == o.logit_slots && sample == o.sample &&
           (!sample || (sampling.temperature == o.sampling.temperature && sampling.top_k == o.sampling.top_k &&
                        sampling.top_p == o.sampling.top_p));
  }
  bool operator==(const DecodeGraphKey& o) const { return same_composition(o) && rows_k_max == o.rows_k_max; }
};

// OK when `config`'s decode can be captured; Unsupported naming the policy and the reason otherwise.
Status graph_safe_policy(const PolicyConfig& config);

class DecodeGraph {
 public:
  DecodeGraph() = default;
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  bool ready() const { return exec_ != nullptr; }
  // Captures what body() enqueues on `stream` (thread-local capture mode: an unsafe call such as
  // cudaMalloc or a synchronous copy inside body fails the capture instead of running). The
  // executable is updated in place when the new graph has the previous one's topology, made anew
  // otherwise. On failure the stream is left out of capture, the previous executable is dropped
  // and the Status names what failed.
  Status capture(cudaStream_t stream, const std::function<Status()>& body);
  Status launch(cudaStream_t stream);
  void reset();
  int64_t in_place_updates() const { return updates_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  int64_t updates_ = 0;
};

}  // namespace kascade::cuda
