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
// Not on CUDA: the ForwardObserver (calibration's importance statistic reads the residual stream on
// the host) — the runtime refuses it before creating a session.
// Tested by tests/cuda/test_gpu_runtime_parity.cpp (logits and greedy tokens vs the CPU runtime)
// and tests/cuda/test_gpu_runtime_memory.cpp (planning, refusals).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cuda/model/cuda_model.h"
#include "cuda/ops/sampling.h"
#include "kascade/policy.h"
#include "runtime/forward_session.h"
#include "runtime/gpu_memory_plan.h"

namespace kascade::cuda {

class CudaSession final : public runtime::ForwardSession {
 public:
  // max_tokens[s]: most tokens sequence s will hold (<= the model's max_seq_len); chunk_size: most
  // tokens of one sequence in one call; max_logit_rows: most logit rows one call requests.
  static Result<std::unique_ptr<CudaSession>> create(CudaModel& model, AttentionPolicy& policy,
                                                     const std::vector<int64_t>& max_tokens, int32_t chunk_size,
                                                     int64_t max_logit_rows);
  ~CudaSession() override;

  Status step(ForwardMode mode, const std::vector<runtime::CallItem>& items, std::vector<float>* logits) override;
  Status step_sample(ForwardMode mode, const std::vector<runtime::CallItem>& items, const SamplerConfig& sampler,
                     std::span<const double> uniforms, std::vector<int32_t>* tokens) override;
  ForwardTimings timings() const override { return timings_; }

  // The memory the session planned (and allocated) beside the weights.
  const runtime::GpuMemoryPlan& memory_plan() const { return plan_; }

 private:
  CudaSession(CudaModel& model, AttentionPolicy& policy) : model_(&model), policy_(&policy) {}
  // Validates the items, uploads the call description, runs the forward pass up to the logits of
  // the requested rows (on the device); *rows gets their count.
  Status forward(ForwardMode mode, const std::vector<runtime::CallItem>& items, int64_t* rows);
  Status run_layers(int32_t batch, int64_t tokens);
  void* at(size_t offset) const { return static_cast<uint8_t*>(workspace_) + offset; }
  void* k_cache(int32_t layer) const;
  void* v_cache(int32_t layer) const;
  Status commit(const std::vector<runtime::CallItem>& items);

  CudaModel* model_;
  AttentionPolicy* policy_;
  runtime::SessionLimits limits_;
  runtime::ActivationLayout layout_;
  runtime::GpuMemoryPlan plan_;
  void* kv_ = nullptr;         // [layers][K, V][num_pages, page_size, G, d] act
  size_t kv_layer_bytes_ = 0;  // one of K or V of one layer
  int32_t num_pages_ = 0;
  void* workspace_ = nullptr;  // the activation layout
  std::unique_ptr<DeviceSampler> sampler_;
  std::vector<int32_t> page_base_;   // [sequences] first page of each sequence's run
  std::vector<int64_t> lengths_;     // [sequences] committed tokens
  std::vector<int64_t> max_tokens_;  // [sequences]
  std::vector<int32_t> host_ints_;   // staging of the call description
  // Offsets (in int32 elements) of the current call's description in the ints buffer.
  int64_t off_tokens_ = 0, off_positions_ = 0, off_slots_ = 0, off_cu_ = 0, off_kv_lens_ = 0, off_table_ = 0,
          off_rows_ = 0;
  ForwardTimings timings_;
};

}  // namespace kascade::cuda
