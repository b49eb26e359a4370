// src/cuda/model/cuda_session.cpp — the CUDA forward session (cuda_session.h).
// Tested by tests/cuda/test_gpu_runtime_parity.cpp and test_gpu_runtime_memory.cpp.
#include "cuda/model/cuda_session.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>

#include "cuda/common/cuda_status.h"
#include "cuda/ops/attention_inputs.h"
#include "cuda/ops/elementwise.h"
#include "cuda/ops/norm.h"
#include "cuda/ops/small_m_linear.h"

namespace kascade::cuda {
namespace {

using Clock = std::chrono::steady_clock;

Result<void*> device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t error = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return resource_exhausted("cuda runtime: cannot allocate ", bytes, " bytes of device memory for ", what, ": ",
                              cudaGetErrorString(error));
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<CudaSession>> CudaSession::create(CudaModel& model, AttentionPolicy& policy,
                                                         const std::vector<int64_t>& max_tokens, int32_t chunk_size,
                                                         int64_t max_logit_rows, const CudaSessionOptions& options) {
  const ModelConfig& c = model.config();
  const CudaModelOptions& o = model.options();
  KC_CHECK_ARG(!max_tokens.empty(), "cuda session: no sequences");
  KC_CHECK_ARG(static_cast<int64_t>(max_tokens.size()) <= o.max_batch, "cuda session: ", max_tokens.size(),
               " sequences, but the CUDA runtime was created for at most ", o.max_batch,
               " sequences per batch (--max-batch)");
  KC_CHECK_ARG(chunk_size >= 1 && max_logit_rows >= 0, "cuda session: chunk size ", chunk_size, ", logit rows ",
               max_logit_rows);
  std::unique_ptr<CudaSession> s(new CudaSession(model, policy));
  int64_t pages = 0, call_tokens = 0;
  for (size_t i = 0; i < max_tokens.size(); ++i) {
    KC_CHECK_ARG(max_tokens[i] >= 1 && max_tokens[i] <= o.max_seq_len, "cuda session: sequence ", i, " may hold ",
                 max_tokens[i], " tokens; the CUDA runtime was planned for 1..", o.max_seq_len, " (max context)");
    s->page_base_.push_back(static_cast<int32_t>(pages));
    pages += (max_tokens[i] + o.page_size - 1) / o.page_size;
    call_tokens += std::min<int64_t>(max_tokens[i], chunk_size);
    KC_CHECK_ARG(pages <= std::numeric_limits<int32_t>::max(), "cuda session: ", pages, " KV pages exceed int32");
  }
  s->num_pages_ = static_cast<int32_t>(pages);
  s->max_tokens_ = max_tokens;
  s->lengths_.assign(max_tokens.size(), 0);
  s->limits_.num_sequences = static_cast<int32_t>(max_tokens.size());
  s->limits_.max_call_tokens = call_tokens;
  s->limits_.max_logit_rows = std::min(max_logit_rows, call_tokens);
  s->limits_.max_pages_per_seq = model.max_pages_per_seq();
  KC_ASSIGN_OR_RETURN(s->layout_, runtime::device_activation_layout(c, o.act_dtype, s->limits_));
  s->kv_layer_bytes_ = runtime::device_kv_bytes(c, o.act_dtype, pages, o.page_size) /
                       (2 * static_cast<size_t>(c.num_hidden_layers));
  s->plan_.weights = model.weights().bytes();
  s->plan_.kv_cache = runtime::device_kv_bytes(c, o.act_dtype, pages, o.page_size);
  s->plan_.activations = s->layout_.total;
  KC_ASSIGN_OR_RETURN(s->plan_.sampler, DeviceSampler::workspace_bytes(s->limits_.num_sequences, c.vocab_size));
  KC_CUDA_RETURN_IF_ERROR(cudaSetDevice(o.device));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(model.stream()));
  KC_ASSIGN_OR_RETURN(const DeviceMemoryInfo memory, device_memory_info());
  int64_t longest = 0;
  for (int64_t t : max_tokens) longest = std::max(longest, t);
  KC_RETURN_IF_ERROR(runtime::check_gpu_memory(
      s->plan_, s->plan_.weights, memory.free_bytes,
      "a batch of " + std::to_string(max_tokens.size()) + " sequences of up to " + std::to_string(longest) +
          " tokens (" + std::to_string(pages) + " KV pages of " + std::to_string(o.page_size) + ", calls of up to " +
          std::to_string(call_tokens) + " tokens)"));
  KC_ASSIGN_OR_RETURN(s->kv_, device_alloc(s->plan_.kv_cache, "the KV cache"));
  KC_ASSIGN_OR_RETURN(s->workspace_, device_alloc(s->layout_.total, "the activation workspace"));
  KC_ASSIGN_OR_RETURN(s->sampler_, DeviceSampler::create(s->limits_.num_sequences, c.vocab_size, model.stream()));
  for (CallSlot& slot : s->slots_) {
    KC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.begin));
    KC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.end));
    void* tokens = nullptr;
    void* error = nullptr;
    KC_CUDA_RETURN_IF_ERROR(
        cudaMallocHost(&tokens, static_cast<size_t>(std::max<int64_t>(s->limits_.max_logit_rows, 1)) * sizeof(int32_t)));
    slot.tokens = static_cast<int32_t*>(tokens);
    KC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&error, sizeof(uint32_t)));
    slot.error = static_cast<uint32_t*>(error);
  }
  if (const char* step = std::getenv("KASCADE_PROFILE_DECODE_STEP"); step != nullptr && *step != '\0') {
    char* end = nullptr;
    const long long n = std::strtoll(step, &end, 10);
    KC_CHECK_ARG(end != nullptr && *end == '\0' && n >= 1, "KASCADE_PROFILE_DECODE_STEP is '", step,
                 "'; expected a decode step number >= 1");
    s->profile_decode_call_ = n;
  }
  s->host_policy_ = options.host_policy;
  s->small_m_linear_ = options.small_m_linear;
  s->observer_ = options.observer;
  if (!options.cuda_graph) {
    s->graph_stats_.eager_reason = "CUDA graphs are off (--no-cuda-graph)";
  } else if (options.host_policy || options.observer != nullptr) {
    s->graph_stats_.eager_reason = "the policy or the layer observer reads host memory (calibration)";
  } else if (const Status safe = graph_safe_policy(policy.config()); !safe.ok()) {
    s->graph_stats_.eager_reason = safe.message();
  } else if (model.backend()->options().check_errors_every_op) {
    s->graph_stats_.eager_reason = "the attention backend checks device errors after every op (synchronising)";
  } else {
    s->graph_stats_.enabled = true;
  }
  return s;
}

CudaSession::~CudaSession() {
  if (model_ != nullptr) (void)cudaStreamSynchronize(model_->stream());
  // Pipelined calls never collected (a generate that stopped on an error): end their error checks,
  // which the backend (it outlives the session) would otherwise keep pending.
  if (model_ != nullptr)
    for (const InFlight& call : in_flight_) (void)model_->backend()->finish_error_check(call.slot);
  graph_.reset();
  if (kv_ != nullptr) (void)cudaFree(kv_);
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  for (CallSlot& slot : slots_) {
    if (slot.begin != nullptr) (void)cudaEventDestroy(slot.begin);
    if (slot.end != nullptr) (void)cudaEventDestroy(slot.end);
    if (slot.tokens != nullptr) (void)cudaFreeHost(slot.tokens);
    if (slot.error != nullptr) (void)cudaFreeHost(slot.error);
  }
}

void* CudaSession::k_cache(int32_t layer) const {
  return static_cast<uint8_t*>(kv_) + (2 * static_cast<size_t>(layer)) * kv_layer_bytes_;
}
void* CudaSession::v_cache(int32_t layer) const {
  return static_cast<uint8_t*>(kv_) + (2 * static_cast<size_t>(layer) + 1) * kv_layer_bytes_;
}

Status CudaSession::prepare(ForwardMode mode, const std::vector<runtime::CallItem>& items, const SampleStep* sample,
                            Call* call) {
  const ModelConfig& c = model_->config();
  const int32_t page_size = model_->options().page_size;
  KC_CHECK_ARG(!items.empty(), "cuda session: a forward call without sequences");
  std::vector<bool> seen(lengths_.size(), false);
  std::vector<int32_t> tokens, positions, slots, cu = {0}, q_lens, kv_lens, rows;
  DecodeGraphKey key;
  for (const runtime::CallItem& item : items) {
    KC_RETURN_IF_ERROR(runtime::check_call_item(mode, item, seen, lengths_, max_tokens_, "cuda session"));
    const int64_t n = static_cast<int64_t>(item.tokens.size());
    const int64_t start = lengths_[item.sequence];
    if (item.logits_from < n) key.logit_slots.push_back(static_cast<int32_t>(key.sequences.size()));
    key.sequences.push_back(item.sequence);
    for (int64_t i = 0; i < n; ++i) {
      KC_CHECK_ARG(item.tokens[i] >= 0 && item.tokens[i] < c.vocab_size, "cuda session: token id ", item.tokens[i],
                   " outside the vocabulary [0, ", c.vocab_size, ")");
      if (i >= item.logits_from) rows.push_back(static_cast<int32_t>(tokens.size()));
      const int64_t pos = start + i;
      tokens.push_back(item.tokens[i]);
      positions.push_back(static_cast<int32_t>(pos));
      slots.push_back((page_base_[item.sequence] + static_cast<int32_t>(pos / page_size)) * page_size +
                      static_cast<int32_t>(pos % page_size));
    }
    cu.push_back(static_cast<int32_t>(tokens.size()));
    q_lens.push_back(static_cast<int32_t>(n));
    kv_lens.push_back(static_cast<int32_t>(start + n));
  }
  const int32_t batch = static_cast<int32_t>(items.size());
  const int64_t T = static_cast<int64_t>(tokens.size()), R = static_cast<int64_t>(rows.size());
  KC_CHECK_ARG(T <= limits_.max_call_tokens && R <= limits_.max_logit_rows, "cuda session: a call of ", T,
               " tokens and ", R, " logit rows; the session was planned for ", limits_.max_call_tokens, " and ",
               limits_.max_logit_rows);
  // The call description, packed: tokens, positions, slots [T], cu_q_lens [B+1], kv_lens [B],
  // block table [B, P], logit rows [R].
  const int32_t P = limits_.max_pages_per_seq;
  off_tokens_ = 0;
  off_positions_ = T;
  off_slots_ = 2 * T;
  off_cu_ = 3 * T;
  off_kv_lens_ = off_cu_ + batch + 1;
  off_table_ = off_kv_lens_ + batch;
  off_rows_ = off_table_ + static_cast<int64_t>(batch) * P;
  host_ints_.assign(static_cast<size_t>(off_rows_ + R), -1);
  std::copy(tokens.begin(), tokens.end(), host_ints_.begin() + off_tokens_);
  std::copy(positions.begin(), positions.end(), host_ints_.begin() + off_positions_);
  std::copy(slots.begin(), slots.end(), host_ints_.begin() + off_slots_);
  std::copy(cu.begin(), cu.end(), host_ints_.begin() + off_cu_);
  std::copy(kv_lens.begin(), kv_lens.end(), host_ints_.begin() + off_kv_lens_);
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t s = items[b].sequence;
    const int64_t seq_pages = (max_tokens_[s] + page_size - 1) / page_size;
    for (int64_t p = 0; p < seq_pages && p < P; ++p)
      host_ints_[static_cast<size_t>(off_table_ + static_cast<int64_t>(b) * P + p)] = page_base_[s] + static_cast<int32_t>(p);
  }
  std::copy(rows.begin(), rows.end(), host_ints_.begin() + off_rows_);
  KC_CHECK_ARG(static_cast<int64_t>(host_ints_.size()) <= layout_.int32_elements, "cuda session: call description of ",
               host_ints_.size(), " ints exceeds the planned ", layout_.int32_elements);
  if (sample != nullptr) {
    KC_CHECK_ARG(R == 0 || sample->params.temperature == 0.0f || static_cast<int64_t>(sample->uniforms.size()) == R,
                 "cuda session: ", sample->uniforms.size(), " uniforms for ", R, " sampled rows");
    key.sample = true;
    key.sampling = sample->params;
  }
  ForwardInfo info;
  info.mode = mode;
  info.batch = batch;
  info.q_lens = q_lens.data();
  info.kv_lens = kv_lens.data();
  KC_RETURN_IF_ERROR(policy_->begin_forward(info));
  // The row stride the policy just planned (a captured graph bakes it in).
  if (mode == ForwardMode::kDecode && graph_stats_.enabled) key.rows_k_max = policy_->planned_decode_row_width();
  call->mode = mode;
  call->batch = batch;
  call->tokens = T;
  call->rows = R;
  call->key = std::move(key);
  return ok_status();
}

Status CudaSession::upload_inputs(const Call& call, const SampleStep* sample) {
  const cudaStream_t stream = model_->stream();
  KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(slots_[slot_].begin, stream));
  slots_[slot_].timed = true;
  // Pageable sources: the copies are staged before cudaMemcpyAsync returns, so the host arrays may
  // change after.
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(at(layout_.ints), host_ints_.data(), host_ints_.size() * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, stream));
  if (sample != nullptr && call.rows > 0 && sample->params.temperature > 0.0f)
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(at(layout_.uniforms), sample->uniforms.data(),
                                            sample->uniforms.size() * sizeof(double), cudaMemcpyHostToDevice, stream));
  // Fed tokens (pipelined decode): the previous call's samples, still in tokens_out (its sampler
  // ran before this point of the stream, this call's has not).
  int32_t* d_tokens = static_cast<int32_t*>(at(layout_.ints)) + off_tokens_;
  const int32_t* d_sampled = static_cast<const int32_t*>(at(layout_.tokens_out));
  for (const FeedRun& run : feed_runs_)
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_tokens + run.dst, d_sampled + run.src,
                                            static_cast<size_t>(run.count) * sizeof(int32_t), cudaMemcpyDeviceToDevice,
                                            stream));
  return ok_status();
}

Status CudaSession::enqueue(const Call& call, const SampleStep* sample) {
  const ModelConfig& c = model_->config();
  const cudaStream_t stream = model_->stream();
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(at(layout_.error), 0, sizeof(uint32_t), stream));
  KC_RETURN_IF_ERROR(run_layers(call.batch, call.tokens));
  const int64_t R = call.rows;
  if (R == 0) return ok_status();
  const DType act = model_->options().act_dtype;
  const int32_t hidden = static_cast<int32_t>(c.hidden_size);
  const int32_t* d_ints = static_cast<const int32_t*>(at(layout_.ints));
  KC_RETURN_IF_ERROR(rmsnorm_rows(static_cast<const float*>(at(layout_.x)), d_ints + off_rows_, R, hidden,
                                  model_->weights().final_norm(), static_cast<float>(c.rms_norm_eps),
                                  at(layout_.final_rows), act, stream));
  KC_RETURN_IF_ERROR(linear(at(layout_.final_rows), model_->weights().lm_head(), at(layout_.logits), R, c.vocab_size,
                            hidden, act, DType::kF32, false));
  if (sample == nullptr) return ok_status();
  return sampler_->sample(static_cast<const float*>(at(layout_.logits)), static_cast<int32_t>(R), sample->params,
                          static_cast<const double*>(at(layout_.uniforms)), static_cast<int32_t*>(at(layout_.tokens_out)));
}

Status CudaSession::forward(const Call& call, const SampleStep* sample) {
  if (call.mode == ForwardMode::kDecode && ++decode_calls_ == profile_decode_call_) {
    KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(model_->stream()));
    KC_CUDA_RETURN_IF_ERROR(cudaProfilerStart());
    profiling_ = true;
  }
  if (call.mode == ForwardMode::kDecode && graph_stats_.enabled) return forward_graph(call, sample);
  if (call.mode == ForwardMode::kDecode) ++graph_stats_.eager_steps;
  KC_RETURN_IF_ERROR(upload_inputs(call, sample));
  return enqueue(call, sample);
}

Status CudaSession::forward_graph(const Call& call, const SampleStep* sample) {
  const cudaStream_t stream = model_->stream();
  CudaBackend& backend = *model_->backend();
  if (graph_.ready() && call.key == graph_key_) {
    // Replay: the policy runs on the host (plans, statistics) while the backend checks its ops.
    KC_RETURN_IF_ERROR(backend.begin_graph_pass(GraphPass::kCheck));
    const Status pass = policy_pass(call.batch, call.tokens);
    if (!pass.ok()) {
      backend.abort_graph_pass();
      return pass;
    }
    KC_ASSIGN_OR_RETURN(const bool same, backend.end_graph_pass());
    if (same) {
      KC_RETURN_IF_ERROR(upload_inputs(call, sample));
      KC_RETURN_IF_ERROR(backend.upload_graph_inputs());
      KC_RETURN_IF_ERROR(graph_.launch(stream));
      ++graph_stats_.replays;
      return ok_status();
    }
    ++graph_stats_.trace_mismatches;  // recapture below (the policy ran twice for this step)
  }
  const bool warm = std::any_of(warm_.begin(), warm_.end(),
                                [&call](const DecodeGraphKey& k) { return k.same_composition(call.key); });
  if (!warm) {
    // The first step of a composition runs eagerly: it makes the attention plans (allocations a
    // capture must not contain) and loads the kernels.
    warm_.push_back(call.key);
    ++graph_stats_.eager_steps;
    KC_RETURN_IF_ERROR(upload_inputs(call, sample));
    return enqueue(call, sample);
  }
  KC_RETURN_IF_ERROR(backend.begin_graph_pass(GraphPass::kCapture));
  const Status captured = graph_.capture(stream, [&]() { return enqueue(call, sample); });
  if (!captured.ok()) {
    backend.abort_graph_pass();
    graph_stats_.enabled = false;
    graph_stats_.eager_reason = captured.to_string();
    ++graph_stats_.eager_steps;
    KC_RETURN_IF_ERROR(upload_inputs(call, sample));
    return enqueue(call, sample);
  }
  KC_ASSIGN_OR_RETURN(const bool kept, backend.end_graph_pass());
  if (!kept) return internal_error("cuda session: the backend did not keep the captured trace");
  graph_key_ = call.key;
  KC_RETURN_IF_ERROR(upload_inputs(call, sample));
  KC_RETURN_IF_ERROR(backend.upload_graph_inputs());
  KC_RETURN_IF_ERROR(graph_.launch(stream));
  ++graph_stats_.captures;
  return ok_status();
}

QueryBatch CudaSession::query_view(int32_t batch, int64_t T) const {
  const ModelConfig& c = model_->config();
  QueryBatch q;
  q.q = at(layout_.q);
  q.dtype = model_->options().act_dtype;
  q.batch = batch;
  q.total_q = static_cast<int32_t>(T);
  q.num_heads = static_cast<int32_t>(c.num_attention_heads);
  q.head_dim = static_cast<int32_t>(c.head_dim);
  q.cu_q_lens = static_cast<const int32_t*>(at(layout_.ints)) + off_cu_;
  return q;
}

PagedKv CudaSession::kv_view() const {
  const ModelConfig& c = model_->config();
  const int32_t* d_ints = static_cast<const int32_t*>(at(layout_.ints));
  PagedKv kv;
  kv.dtype = model_->options().act_dtype;
  kv.num_pages = num_pages_;
  kv.page_size = model_->options().page_size;
  kv.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  kv.head_dim = static_cast<int32_t>(c.head_dim);
  kv.block_table = d_ints + off_table_;
  kv.max_pages_per_seq = limits_.max_pages_per_seq;
  kv.kv_lens = d_ints + off_kv_lens_;
  return kv;
}

Status CudaSession::policy_pass(int32_t batch, int64_t T) {
  const QueryBatch q = query_view(batch, T);
  PagedKv kv = kv_view();
  AttentionParams params;
  params.scale = model_->attention_scale();
  const AttentionOutput out{at(layout_.attn), model_->options().act_dtype, nullptr};
  for (int32_t l = 0; l < static_cast<int32_t>(model_->config().num_hidden_layers); ++l) {
    kv.k = k_cache(l);
    kv.v = v_cache(l);
    Status s = policy_->attention(l, q, kv, params, out);
    if (!s.ok()) return s.with_context("layer " + std::to_string(l));
  }
  return ok_status();
}

Status CudaSession::run_layers(int32_t batch, int64_t T) {
  const ModelConfig& c = model_->config();
  const DType act = model_->options().act_dtype;
  const cudaStream_t stream = model_->stream();
  const bool pdl = model_->options().programmatic_launch;  // CudaModelOptions::programmatic_launch
  const DeviceWeights& w = model_->weights();
  const int32_t hidden = static_cast<int32_t>(c.hidden_size), H = static_cast<int32_t>(c.num_attention_heads),
                G = static_cast<int32_t>(c.num_key_value_heads), d = static_cast<int32_t>(c.head_dim);
  const int64_t inter = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int32_t* d_ints = static_cast<const int32_t*>(at(layout_.ints));
  float* x = static_cast<float*>(at(layout_.x));
  KC_RETURN_IF_ERROR(embedding_gather(w.embed_tokens(), act, c.vocab_size, hidden, d_ints + off_tokens_, T, x,
                                      static_cast<uint32_t*>(at(layout_.error)), stream));
  const QueryBatch q = query_view(batch, T);
  PagedKv kv = kv_view();
  AttentionParams params;
  params.scale = model_->attention_scale();
  const AttentionOutput out{at(layout_.attn), act, nullptr};
  AttentionInputsShape shape{T, H, G, d, act};
  for (int32_t l = 0; l < static_cast<int32_t>(c.num_hidden_layers); ++l) {
    const DeviceLayerWeights& lw = w.layer(l);
    const size_t residual_bytes = static_cast<size_t>(T) * static_cast<size_t>(hidden) * sizeof(float);
    if (observer_ != nullptr) {
      host_x_.resize(static_cast<size_t>(T) * static_cast<size_t>(hidden));
      KC_RETURN_IF_ERROR(to_host(host_x_.data(), x, residual_bytes));
    }
    KC_RETURN_IF_ERROR(rmsnorm_rows(x, nullptr, T, hidden, lw.input_norm, eps, at(layout_.h), act, stream, pdl));
    KC_RETURN_IF_ERROR(linear(at(layout_.h), lw.qkv, at(layout_.qkv), T, (H + 2 * G) * d, hidden, act, act, false));
    AttentionInputsArgs args;
    args.qkv = at(layout_.qkv);
    args.positions = d_ints + off_positions_;
    args.slots = d_ints + off_slots_;
    args.q_norm = lw.q_norm;
    args.k_norm = lw.k_norm;
    args.norm_eps = eps;
    args.inv_freq = w.inv_freq();
    args.attention_scaling = model_->rope().attention_scaling;
    args.q_out = at(layout_.q);
    args.k_cache = k_cache(l);
    args.v_cache = v_cache(l);
    KC_RETURN_IF_ERROR(attention_inputs(shape, args, stream, pdl));
    kv.k = k_cache(l);
    kv.v = v_cache(l);
    Status s = host_policy_ ? host_attention(l, q, kv, params, out) : policy_->attention(l, q, kv, params, out);
    if (!s.ok()) return s.with_context("layer " + std::to_string(l));
    KC_RETURN_IF_ERROR(linear(at(layout_.attn), lw.o_proj, x, T, hidden, H * d, act, DType::kF32, true));
    if (observer_ != nullptr) {
      // The attention block output: the residual after o_proj minus the one before.
      host_attn_.resize(host_x_.size());
      KC_RETURN_IF_ERROR(to_host(host_attn_.data(), x, residual_bytes));
      for (size_t i = 0; i < host_attn_.size(); ++i) host_attn_[i] -= host_x_[i];
      Status observed = observer_->on_attention(l, host_x_.data(), host_attn_.data(), T);
      if (!observed.ok()) return observed.with_context("layer observer, layer " + std::to_string(l));
    }
    KC_RETURN_IF_ERROR(rmsnorm_rows(x, nullptr, T, hidden, lw.post_norm, eps, at(layout_.h), act, stream, pdl));
    KC_RETURN_IF_ERROR(linear(at(layout_.h), lw.gate_up, at(layout_.gate_up), T, 2 * inter, hidden, act, act, false));
    KC_RETURN_IF_ERROR(silu_mul(at(layout_.gate_up), T, inter, at(layout_.mlp), act, stream, pdl));
    KC_RETURN_IF_ERROR(linear(at(layout_.mlp), lw.down_proj, x, T, hidden, inter, act, DType::kF32, true));
  }
  return ok_status();
}

Status CudaSession::linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k, DType in_dtype,
                           DType out_dtype, bool accumulate) {
  if (small_m_linear_ && small_m_linear_supports(x, w, m, n, k, in_dtype, out_dtype))
    return small_m_linear(x, w, y, m, n, k, in_dtype, out_dtype, accumulate, model_->stream(),
                          model_->options().programmatic_launch);
  return model_->cublas().linear(x, w, y, m, n, k, in_dtype, out_dtype, accumulate);
}

Status CudaSession::to_host(void* dst, const void* src, size_t bytes) {
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, model_->stream()));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(model_->stream()));
  return ok_status();
}

Status CudaSession::host_attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const AttentionOutput& out) {
  const size_t q_bytes = static_cast<size_t>(q.total_q) * static_cast<size_t>(q.num_heads) *
                         static_cast<size_t>(q.head_dim) * dtype_size(q.dtype);
  host_q_.resize(q_bytes);
  host_k_.resize(kv_layer_bytes_);
  host_v_.resize(kv_layer_bytes_);
  host_out_.assign(q_bytes, 0);
  KC_RETURN_IF_ERROR(to_host(host_q_.data(), q.q, q_bytes));
  KC_RETURN_IF_ERROR(to_host(host_k_.data(), kv.k, kv_layer_bytes_));
  KC_RETURN_IF_ERROR(to_host(host_v_.data(), kv.v, kv_layer_bytes_));
  QueryBatch host_q = q;
  host_q.q = host_q_.data();
  host_q.cu_q_lens = host_ints_.data() + off_cu_;
  PagedKv host_kv = kv;
  host_kv.k = host_k_.data();
  host_kv.v = host_v_.data();
  host_kv.block_table = host_ints_.data() + off_table_;
  host_kv.kv_lens = host_ints_.data() + off_kv_lens_;
  const AttentionOutput host_out{host_out_.data(), out.dtype, nullptr};
  KC_RETURN_IF_ERROR(policy_->attention(layer, host_q, host_kv, params, host_out));
  // Pageable source: staged before the call returns, so host_out_ may change after.
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.o, host_out_.data(), q_bytes, cudaMemcpyHostToDevice, model_->stream()));
  return ok_status();
}

Status CudaSession::enqueue_call_end(int slot, int64_t token_rows) {
  const cudaStream_t stream = model_->stream();
  CallSlot& s = slots_[slot];
  if (token_rows > 0)
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.tokens, at(layout_.tokens_out),
                                            static_cast<size_t>(token_rows) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                            stream));
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.error, at(layout_.error), sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  KC_RETURN_IF_ERROR(model_->backend()->enqueue_error_check(slot));
  KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.end, stream));
  return ok_status();
}

Status CudaSession::finish_call(int slot) {
  // The embedding's error word and every error word of the attention backend were copied into
  // pinned memory behind the call: one wait for its end event reads them all.
  CallSlot& s = slots_[slot];
  const Status synced = cuda_status(cudaEventSynchronize(s.end), "cudaEventSynchronize");
  const Status backend_errors = model_->backend()->finish_error_check(slot);  // always: it ends the pending check
  KC_RETURN_IF_ERROR(synced);
  if (profiling_) {
    profiling_ = false;
    KC_CUDA_RETURN_IF_ERROR(cudaProfilerStop());
  }
  if (s.timed) {
    float ms = 0.0f;
    KC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, s.begin, s.end));
    timings_.device_s += 1e-3 * static_cast<double>(ms);
    s.timed = false;
  }
  if (*s.error != 0) return out_of_range("cuda session: the embedding met a token id outside the vocabulary");
  return backend_errors;
}

void CudaSession::commit_lengths(const std::vector<runtime::CallItem>& items) {
  for (const runtime::CallItem& item : items) lengths_[item.sequence] += static_cast<int64_t>(item.tokens.size());
}

Status CudaSession::step(ForwardMode mode, const std::vector<runtime::CallItem>& items, std::vector<float>* logits) {
  KC_CHECK_ARG(logits != nullptr, "cuda session: logits is null");
  KC_CHECK_ARG(in_flight_.empty(), "cuda session: step while ", in_flight_.size(),
               " pipelined decode call(s) are in flight; collect them first");
  const auto start = Clock::now();
  Call call;
  slot_ = 0;
  last_sequences_.clear();  // tokens_out is overwritten: nothing can be fed from the last submitted call
  KC_RETURN_IF_ERROR(prepare(mode, items, nullptr, &call));
  KC_RETURN_IF_ERROR(forward(call, nullptr));
  const size_t count = static_cast<size_t>(call.rows) * static_cast<size_t>(model_->config().vocab_size);
  logits->resize(count);
  if (count > 0)
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits->data(), at(layout_.logits), count * sizeof(float),
                                            cudaMemcpyDeviceToHost, model_->stream()));
  KC_RETURN_IF_ERROR(enqueue_call_end(0, 0));
  KC_RETURN_IF_ERROR(finish_call(0));
  commit_lengths(items);
  timings_.other_s += std::chrono::duration<double>(Clock::now() - start).count();
  return ok_status();
}

Status CudaSession::step_sample(ForwardMode mode, const std::vector<runtime::CallItem>& items,
                                const SamplerConfig& sampler, std::span<const double> uniforms,
                                std::vector<int32_t>* tokens) {
  KC_CHECK_ARG(tokens != nullptr, "cuda session: tokens is null");
  KC_CHECK_ARG(in_flight_.empty(), "cuda session: step_sample while ", in_flight_.size(),
               " pipelined decode call(s) are in flight; collect them first");
  KC_ASSIGN_OR_RETURN(const int64_t expected, runtime::count_sampled_rows(items, uniforms.size()));
  const auto start = Clock::now();
  const SampleStep sample{SamplingParams{sampler.temperature, sampler.top_k, sampler.top_p}, uniforms};
  Call call;
  slot_ = 0;
  last_sequences_.clear();  // tokens_out is overwritten: nothing can be fed from the last submitted call
  KC_RETURN_IF_ERROR(prepare(mode, items, &sample, &call));
  if (call.rows != expected) return internal_error("cuda session: ", call.rows, " logit rows, expected ", expected);
  KC_RETURN_IF_ERROR(forward(call, call.rows > 0 ? &sample : nullptr));
  KC_RETURN_IF_ERROR(enqueue_call_end(0, call.rows));
  KC_RETURN_IF_ERROR(finish_call(0));
  commit_lengths(items);
  tokens->assign(slots_[0].tokens, slots_[0].tokens + call.rows);
  for (size_t i = 0; i < tokens->size(); ++i)
    if ((*tokens)[i] < 0) return out_of_range("cuda session: the logits of sampled row ", i, " hold a NaN");
  timings_.other_s += std::chrono::duration<double>(Clock::now() - start).count();
  return ok_status();
}

Status CudaSession::submit_decode(const std::vector<runtime::DecodeItem>& items, const SamplerConfig& sampler,
                                  std::span<const double> uniforms) {
  KC_CHECK_ARG(in_flight_.size() < static_cast<size_t>(kCallSlots), "cuda session: submit_decode with ",
               in_flight_.size(), " decode calls in flight already; collect one first");
  KC_CHECK_ARG(!host_policy_ && observer_ == nullptr,
               "cuda session: pipelined decode needs a device policy and no layer observer (they synchronise per layer)");
  const auto start = Clock::now();
  const int slot = in_flight_.empty() ? 0 : 1 - in_flight_.back().slot;
  // Host tokens, placeholders (0) for the fed ones, whose device copies come in runs of consecutive rows.
  std::vector<int32_t> tokens(items.size(), 0);  // prepare copies them into the call description
  std::vector<FeedRun> runs;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].fed) {
      tokens[i] = items[i].token;
      continue;
    }
    KC_ASSIGN_OR_RETURN(const int64_t src, runtime::fed_row(last_sequences_, items[i].sequence, "cuda session"));
    const int64_t dst = static_cast<int64_t>(i);
    if (!runs.empty() && runs.back().dst + runs.back().count == dst && runs.back().src + runs.back().count == src) {
      ++runs.back().count;
    } else {
      runs.push_back({dst, src, 1});
    }
  }
  std::vector<runtime::CallItem> call_items(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    call_items[i] = {items[i].sequence, std::span<const int32_t>(&tokens[i], 1), 0};
  KC_ASSIGN_OR_RETURN(const int64_t expected, runtime::count_sampled_rows(call_items, uniforms.size()));
  const SampleStep sample{SamplingParams{sampler.temperature, sampler.top_k, sampler.top_p}, uniforms};
  Call call;
  slot_ = slot;
  KC_RETURN_IF_ERROR(prepare(ForwardMode::kDecode, call_items, &sample, &call));
  if (call.rows != expected) return internal_error("cuda session: ", call.rows, " logit rows, expected ", expected);
  feed_runs_ = std::move(runs);
  const Status launched = forward(call, &sample);
  feed_runs_.clear();
  KC_RETURN_IF_ERROR(launched);
  KC_RETURN_IF_ERROR(enqueue_call_end(slot, call.rows));
  commit_lengths(call_items);  // the next call's positions follow this one's
  last_sequences_.clear();
  for (const runtime::DecodeItem& item : items) last_sequences_.push_back(item.sequence);
  in_flight_.push_back({slot, call.rows});
  timings_.other_s += std::chrono::duration<double>(Clock::now() - start).count();
  return ok_status();
}

Status CudaSession::collect_decode(std::vector<int32_t>* tokens) {
  KC_CHECK_ARG(tokens != nullptr, "cuda session: tokens is null");
  KC_CHECK_ARG(!in_flight_.empty(), "cuda session: collect_decode with no decode call in flight");
  const auto start = Clock::now();
  const InFlight call = in_flight_.front();
  in_flight_.erase(in_flight_.begin());
  KC_RETURN_IF_ERROR(finish_call(call.slot));
  tokens->assign(slots_[call.slot].tokens, slots_[call.slot].tokens + call.rows);
  for (size_t i = 0; i < tokens->size(); ++i)
    if ((*tokens)[i] < 0) return out_of_range("cuda session: the logits of sampled row ", i, " hold a NaN");
  timings_.other_s += std::chrono::duration<double>(Clock::now() - start).count();
  return ok_status();
}

}  // namespace kascade::cuda
