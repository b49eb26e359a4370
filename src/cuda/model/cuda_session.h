// src/cuda/model/cuda_session.h — the CUDA implementation of runtime::ForwardSession
// (src/runtime/forward_session.h): a batch of sequences in flight on the GPU and the forward calls
// that extend them (DESIGN.md §3 data flow, per layer: RMSNorm → fused qkv GEMM → (Qwen3 q/k norm)
// + RoPE + KV append (one kernel) → the policy's attention through the CUDA AttentionBackend →
// o_proj GEMM accumulated into the fp32 residual stream → RMSNorm → fused gate/up GEMM → SwiGLU →
// down_proj GEMM accumulated into the residual; final RMSNorm of the requested rows → lm_head GEMM
// with fp32 logits → device sampler or a copy to the host).
//
// Precision: the residual stream is fp32; activations, weights and the KV cache are the model's
// activation dtype (bf16 / fp16) with fp32 accumulation in every GEMM, norm and attention op.
//
// KV cache: paged, [num_pages, page_size, G, d] per layer for K and V (the PagedKv layout); each
// sequence owns a fixed run of pages sized for its max_tokens, so the block table of a sequence is
// fixed for the session; the call's block tables ([batch, max_pages_per_seq], −1 past a
// sequence's pages), kv_lens, cu_q_lens, positions and cache slots are uploaded in one copy per
// call. Chunked prefill and batched varlen decode are the same path (any q_len per sequence).
//
// Memory: before allocating, the session's KV cache, activation workspace and sampler are added to
// the resident weights and checked against cudaMemGetInfo (runtime::check_gpu_memory); a batch ×
// context that does not fit is refused with a message naming every number.
//
// CUDA graphs (RuntimeOptions::cuda_graph, kascade/runtime.h CudaGraphStats): a decode call of a
// graph-safe policy (decode_graph.h) whose composition ran eagerly once is captured (error word
// reset, embedding, every layer with the policy's attention, final norm, LM head and, for
// step_sample, the device sampler) and launched; later decode calls of the same composition and
// row width run the policy once on the host with the backend in a check pass (nothing launches:
// the policy plans its rows, counts its statistics, and the backend compares every op's
// arguments with the captured ones), upload the call description and selection sizes, and launch
// the graph. Prefill calls always run eagerly (their plans depend on each chunk's lengths). A
// capture that fails is reported in CudaGraphStats::eager_reason and the session goes on eagerly
// (that step's attended-key statistics may then count twice for the layers captured before the
// failure).
//
// Host policies and the layer observer (`kascade calibrate --device cuda`): a policy that does not
// run on the CUDA backend (calibration's recording policy reads host memory) is run on the host:
// for every layer the session copies the call's q and the layer's whole K and V cache to host
// memory (the activation dtype, with host copies of the block table, kv_lens and cu_q_lens), calls
// the policy on those views, and copies its output back to the device before o_proj. With a
// ForwardObserver the residual stream entering each layer and the attention block output after
// o_proj (the residual after o_proj minus the one before, fp32) are copied to the host and passed
// to it. Both synchronise per layer and run eagerly (no CUDA graph): they are for calibration, not
// for speed.
// Pipelined decode (submit_decode / collect_decode, RuntimeOptions::pipelined_decode): a decode call
// is prepared (the policy's check pass, the call description) and launched while the call before it
// still runs; a fed item's token is copied on the device from the previous call's sampled row
// (cudaMemcpyAsync device to device, after the description's upload, before the launch), so the
// host never waits for it. Each call's sampled tokens, the embedding's error word and the
// backend's error words are copied into pinned memory behind it (a call slot of two) and an event
// is recorded; collect_decode waits for that event only. Host policies and the layer observer
// synchronise per layer and are refused. A step or step_sample in between overwrites the sampled
// rows, so the next submitted call may not feed (refused with a message) until one gives its tokens.
// Profiling hook: with the environment variable KASCADE_PROFILE_DECODE_STEP=N (N >= 1) the N-th
// decode call of every session runs between cudaProfilerStart() and cudaProfilerStop(), so
// `ncu --profile-from-start off --graph-profiling node …` measures the kernels of one decode step
// (graph replays included) without the prefill before it (with pipelined decode the range also
// holds the launches of the call submitted before the profiled one is collected).
// Tested by tests/cuda/test_gpu_runtime_parity.cpp (logits and greedy tokens vs the CPU runtime),
// tests/cuda/test_gpu_runtime_memory.cpp (planning, refusals) and tests/cuda/test_gpu_runtime_graph.cpp
// (graph decode vs eager decode: logits, greedy and sampled tokens, varlen batches, the eager reasons).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cuda/model/cuda_model.h"
#include "cuda/model/decode_graph.h"
#include "cuda/ops/sampling.h"
#include "kascade/policy.h"
#include "runtime/forward_session.h"
#include "runtime/gpu_memory_plan.h"

namespace kascade::cuda {

struct CudaSessionOptions {
  bool cuda_graph = true;               // capture and replay decode calls (graph-safe policies)
  bool small_m_linear = false;          // linear layers of <= 8 rows through small_m_linear (ops/small_m_linear.h)
  bool host_policy = false;             // the policy reads host memory (see the header comment)
  ForwardObserver* observer = nullptr;  // per-layer residual stream and attention output, or none
};

class CudaSession final : public runtime::ForwardSession {
 public:
  // max_tokens[s]: most tokens sequence s will hold (<= the model's max_seq_len); chunk_size: most
  // tokens of one sequence in one call; max_logit_rows: most logit rows one call requests;
  static Result<std::unique_ptr<CudaSession>> create(CudaModel& model, AttentionPolicy& policy,
                                                     const std::vector<int64_t>& max_tokens, int32_t chunk_size,
                                                     int64_t max_logit_rows, const CudaSessionOptions& options = {});
  ~CudaSession() override;

  Status step(ForwardMode mode, const std::vector<runtime::CallItem>& items, std::vector<float>* logits) override;
  Status step_sample(ForwardMode mode, const std::vector<runtime::CallItem>& items, const SamplerConfig& sampler,
                     std::span<const double> uniforms, std::vector<int32_t>* tokens) override;
  // Pipelined decode (see the header comment): the call is launched and its tokens, error words and
  // end event queued into a call slot; collect_decode waits for the oldest slot's event only.
  // Not with a host-memory policy or a layer observer: both synchronise with the host every layer.
  bool can_pipeline_decode() const override { return !host_policy_ && observer_ == nullptr; }
  Status submit_decode(const std::vector<runtime::DecodeItem>& items, const SamplerConfig& sampler,
                       std::span<const double> uniforms) override;
  Status collect_decode(std::vector<int32_t>* tokens) override;
  ForwardTimings timings() const override { return timings_; }
  CudaGraphStats cuda_graph_stats() const override { return graph_stats_; }

  // The memory the session planned (and allocated) beside the weights.
  const runtime::GpuMemoryPlan& memory_plan() const { return plan_; }

 private:
  CudaSession(CudaModel& model, AttentionPolicy& policy) : model_(&model), policy_(&policy) {}

  // A prepared call: its sizes and (decode) what a graph of it depends on.
  struct Call {
    ForwardMode mode = ForwardMode::kPrefill;
    int32_t batch = 0;
    int64_t tokens = 0;
    int64_t rows = 0;  // logit rows
    DecodeGraphKey key;
  };
  // The sampler step of step_sample (absent for step).
  struct SampleStep {
    SamplingParams params;
    std::span<const double> uniforms;  // [rows] host
  };

  // Validates the items, packs the call description into host_ints_, starts the policy's call.
  Status prepare(ForwardMode mode, const std::vector<runtime::CallItem>& items, const SampleStep* sample, Call* call);
  // Runs the prepared call up to the logits (and sampled tokens) on the device: eagerly, or through
  // the decode graph.
  Status forward(const Call& call, const SampleStep* sample);
  // The host -> device copies of a call: its description and the sampler's uniforms.
  Status upload_inputs(const Call& call, const SampleStep* sample);
  // Everything a call launches, with no host copy and no synchronisation (capturable).
  Status enqueue(const Call& call, const SampleStep* sample);
  Status run_layers(int32_t batch, int64_t tokens);
  // The policy's attention of every layer with the views run_layers passes (a graph check pass).
  Status policy_pass(int32_t batch, int64_t tokens);
  // The attention of one layer through a host policy (see the header comment).
  Status host_attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                        const AttentionOutput& out);
  // y = x · wᵀ (+ y) on the model's stream: small_m_linear for the few rows of a decode call when
  // CudaSessionOptions::small_m_linear is set and it takes the shape, cuBLAS otherwise.
  Status linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                DType out_dtype, bool accumulate);
  // bytes from the device into host memory, after the stream's earlier work (synchronises).
  Status to_host(void* dst, const void* src, size_t bytes);
  // The views of a call (kv.k / kv.v are set per layer).
  QueryBatch query_view(int32_t batch, int64_t tokens) const;
  PagedKv kv_view() const;
  // Decode through the graph: replay, recapture, or eager when the composition is new.
  Status forward_graph(const Call& call, const SampleStep* sample);
  void* at(size_t offset) const { return static_cast<uint8_t*>(workspace_) + offset; }
  void* k_cache(int32_t layer) const;
  void* v_cache(int32_t layer) const;
  // Adds the items' tokens to their sequences' lengths.
  void commit_lengths(const std::vector<runtime::CallItem>& items);
  // Queues what ends a call in slot `slot` behind it: the copies of its first `token_rows` sampled
  // tokens and of the embedding's error word into the slot's pinned memory, the backend's error
  // check of that slot, and the slot's end event (its begin is recorded by upload_inputs).
  Status enqueue_call_end(int slot, int64_t token_rows);
  // Waits for the slot's end event, then reports the call's errors and adds its device time.
  Status finish_call(int slot);

  CudaModel* model_;
  AttentionPolicy* policy_;
  runtime::SessionLimits limits_;
  runtime::ActivationLayout layout_;
  runtime::GpuMemoryPlan plan_;
  void* kv_ = nullptr;         // [layers][K, V][num_pages, page_size, G, d] act
  size_t kv_layer_bytes_ = 0;  // one of K or V of one layer
  int32_t num_pages_ = 0;
  void* workspace_ = nullptr;  // the activation layout
  // Call slots: slot 0 serves step / step_sample, slots 0 and 1 alternate in pipelined decode.
  struct CallSlot {
    cudaEvent_t begin = nullptr, end = nullptr;
    bool timed = false;          // begin was recorded by upload_inputs for the slot's current call
    int32_t* tokens = nullptr;   // pinned [max_logit_rows]: the call's sampled tokens
    uint32_t* error = nullptr;   // pinned: the embedding's error word after the call
  };
  static constexpr int kCallSlots = 2;
  CallSlot slots_[kCallSlots];
  int slot_ = 0;  // the slot of the call being prepared (upload_inputs records its begin)
  // Pipelined decode: the calls in flight (oldest first), the sequences of the last submitted call
  // in row order (what a fed item reads), and the fed tokens of the call being prepared: runs of
  // `count` tokens copied on the device from the previous call's sampled rows [src, src + count) to
  // the call's token slots [dst, dst + count) after its description is uploaded.
  struct InFlight {
    int slot = 0;
    int64_t rows = 0;
  };
  std::vector<InFlight> in_flight_;
  std::vector<int32_t> last_sequences_;
  struct FeedRun {
    int64_t dst = 0, src = 0, count = 0;
  };
  std::vector<FeedRun> feed_runs_;
  std::unique_ptr<DeviceSampler> sampler_;
  std::vector<int32_t> page_base_;   // [sequences] first page of each sequence's run
  std::vector<int64_t> lengths_;     // [sequences] committed tokens
  std::vector<int64_t> max_tokens_;  // [sequences]
  std::vector<int32_t> host_ints_;   // staging of the call description
  // Offsets (in int32 elements) of the current call's description in the ints buffer.
  int64_t off_tokens_ = 0, off_positions_ = 0, off_slots_ = 0, off_cu_ = 0, off_kv_lens_ = 0, off_table_ = 0,
          off_rows_ = 0;
  ForwardTimings timings_;
  int64_t decode_calls_ = 0;       // decode calls so far (the profiling hook counts them)
  int64_t profile_decode_call_ = 0;  // KASCADE_PROFILE_DECODE_STEP, 0 = off
  bool profiling_ = false;           // cudaProfilerStart() was called for the current call
  bool small_m_linear_ = false;      // CudaSessionOptions::small_m_linear
  // Host policy and observer (calibration).
  bool host_policy_ = false;
  ForwardObserver* observer_ = nullptr;
  std::vector<uint8_t> host_q_, host_k_, host_v_, host_out_;  // act dtype: q / out [T, H, d], K / V one layer
  std::vector<float> host_x_, host_attn_;                     // [T, hidden] fp32
  // CUDA graph decode.
  DecodeGraph graph_;
  DecodeGraphKey graph_key_;                    // of the captured graph
  std::vector<DecodeGraphKey> warm_;            // compositions that ran eagerly once
  CudaGraphStats graph_stats_;
};

}  // namespace kascade::cuda
