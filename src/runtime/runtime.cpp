// src/runtime/runtime.cpp — the Runtime of include/kascade/runtime.h: loading (config, weights or
// dummy weights, model, policy), the generate loop (chunked varlen prefill, batched decode,
// sampling, streaming, stop conditions, statistics) and teacher forcing.
// Tested by tests/unit/runtime/test_runtime_*.cpp.
#include "kascade/runtime.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <set>
#include <sstream>

#include "model/dummy_weights.h"
#include "model/forward.h"
#include "model/model.h"
#include "policy/cpu_backend.h"
#include "runtime/policy_setup.h"
#include "runtime/report.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

#ifdef KASCADE_HAVE_CUDA
#include "cuda/model/cuda_model.h"
#include "cuda/model/cuda_session.h"
#endif

namespace kascade {

const char* device_name(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

Result<Device> parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return invalid_argument("unknown device '", name, "' (cpu or cuda)");
}

bool cuda_runtime_built() {
#ifdef KASCADE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStopToken: return "stop";
    case FinishReason::kContext: return "context";
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class FunctionObserver final : public ForwardObserver {
 public:
  explicit FunctionObserver(const LayerObserver* f) : f_(f) {}
  Status on_attention(int32_t layer, const float* x, const float* attn, int64_t total_q) override {
    return (*f_)(layer, x, attn, total_q);
  }

 private:
  const LayerObserver* f_;
};

// The timings accumulated between two snapshots of a session's totals.
PhaseTimings phase_between(const ForwardTimings& before, const ForwardTimings& after) {
  PhaseTimings p;
  p.matmul_s = after.matmul_s - before.matmul_s;
  p.matmul_flops = after.matmul_flops - before.matmul_flops;
  p.attention_s = after.attention_s - before.attention_s;
  p.other_s = after.other_s - before.other_s;
  p.device_s = after.device_s - before.device_s;
  return p;
}

// The pipelined decode loop (RuntimeOptions::pipelined_decode): step t + 1 is submitted, its tokens
// fed from step t's samples, before step t's tokens are collected, so the host prepares a step while
// the device runs the one before. Step t + 1 holds the sequences of step t that were going on after
// step t − 1 and go on after one more token whatever it is (continues_after_next: the length and
// context limits); a sequence that stops on a stop token at step t still has a row in step t + 1,
// whose token is dropped. The tokens, finish reasons, decode_steps and decode_tokens equal the
// step-by-step loop's (the policy's statistics count the dropped rows too). draw_uniforms(sequences)
// fills `uniforms`; accept(s, token) takes a sampled token and updates active[s].
template <typename DrawUniforms, typename Accept, typename ContinuesAfterNext>
Status decode_pipelined(runtime::ForwardSession& session, const SamplerConfig& sampler, const std::vector<bool>& active,
                        GenerateResult& result, DrawUniforms&& draw_uniforms, const std::vector<double>& uniforms,
                        Accept&& accept, ContinuesAfterNext&& continues_after_next) {
  std::deque<std::vector<int32_t>> in_flight;  // the sequences of each submitted call, oldest first
  std::vector<runtime::DecodeItem> items;
  const auto submit = [&](std::vector<int32_t> sequences) -> Status {
    if (sequences.empty()) return ok_status();
    draw_uniforms(sequences);
    KC_RETURN_IF_ERROR(session.submit_decode(items, sampler, uniforms));
    in_flight.push_back(std::move(sequences));
    return ok_status();
  };
  // The first call takes the tokens the prefill sampled, which the host has.
  std::vector<int32_t> sequences;
  for (int32_t s = 0; s < static_cast<int32_t>(active.size()); ++s) {
    if (!active[s]) continue;
    items.push_back({s, result.sequences[s].tokens.back(), false});
    sequences.push_back(s);
  }
  KC_RETURN_IF_ERROR(submit(std::move(sequences)));
  std::vector<int32_t> sampled;
  while (!in_flight.empty()) {
    if (in_flight.size() == 1) {  // the next call, fed from the one in flight
      items.clear();
      sequences.clear();
      for (int32_t s : in_flight.front()) {
        if (!active[s] || !continues_after_next(s)) continue;
        items.push_back({s, 0, true});
        sequences.push_back(s);
      }
      KC_RETURN_IF_ERROR(submit(std::move(sequences)));
    }
    KC_RETURN_IF_ERROR(session.collect_decode(&sampled));
    const std::vector<int32_t> step = std::move(in_flight.front());
    in_flight.pop_front();
    KC_CHECK_ARG(sampled.size() == step.size(), "pipelined decode: ", sampled.size(), " tokens for a call of ",
                 step.size(), " sequences");
    int64_t kept = 0;
    for (size_t i = 0; i < step.size(); ++i) {
      if (!active[step[i]]) continue;  // stopped at an earlier step: this row's token is dropped
      ++kept;
      accept(step[i], sampled[i]);
    }
    if (kept > 0) ++result.stats.decode_steps;
    result.stats.decode_tokens += kept;
  }
  return ok_status();
}

Status validate_tokens(const std::vector<int32_t>& tokens, int64_t vocab, const char* what, size_t index) {
  for (size_t i = 0; i < tokens.size(); ++i)
    KC_CHECK_ARG(tokens[i] >= 0 && tokens[i] < vocab, what, " ", index, ": token id ", tokens[i], " at position ", i,
                 " is outside the vocabulary [0, ", vocab, ")");
  return ok_status();
}

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  ModelConfig config;
  DType weights_dtype = DType::kF32;
  std::unique_ptr<Model> model;  // kCpu
#ifdef KASCADE_HAVE_CUDA
  std::unique_ptr<cuda::CudaModel> cuda_model;  // kCuda (declared before the policy: outlives it)
#endif
  std::unique_ptr<AttentionPolicy> policy;
  bool host_policy = false;  // kCuda: the policy reads host memory (set_policy of a non-make_policy policy)
  std::string schedule_note;
  int64_t max_context = 0;
  int64_t num_parameters = 0;
  LayerObserver observer;
  CudaGraphStats last_graph_stats;  // of the last generate / teacher_forced call

  ForwardObserver* forward_observer(std::unique_ptr<FunctionObserver>* holder) {
    if (!observer) return nullptr;
    *holder = std::make_unique<FunctionObserver>(&observer);
    return holder->get();
  }

  // A session on the runtime's device for sequences of at most max_tokens[s] tokens; the CUDA one
  // plans its calls for `chunk` tokens per sequence and `logit_rows` rows per call.
  Result<std::unique_ptr<runtime::ForwardSession>> make_session(const std::vector<int64_t>& max_tokens,
                                                                int64_t logit_rows,
                                                                std::unique_ptr<FunctionObserver>* holder) {
    if (options.device == Device::kCuda) {
#ifdef KASCADE_HAVE_CUDA
      cuda::CudaSessionOptions session_options;
      session_options.cuda_graph = options.cuda_graph;
      session_options.small_m_linear = options.small_m_linear;
      session_options.host_policy = host_policy;
      session_options.observer = forward_observer(holder);
      KC_ASSIGN_OR_RETURN(auto session, cuda::CudaSession::create(*cuda_model, *policy, max_tokens,
                                                                  options.chunk_size, logit_rows, session_options));
      return std::unique_ptr<runtime::ForwardSession>(std::move(session));
#else
      return unsupported("this build has no CUDA support");
#endif
    }
    KC_ASSIGN_OR_RETURN(auto session, runtime::Session::create(*model, *policy, max_tokens, options.page_size,
                                                               options.kv_dtype, forward_observer(holder)));
    return std::unique_ptr<runtime::ForwardSession>(std::move(session));
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(const RuntimeOptions& options) {
  KC_CHECK_ARG(!options.model_path.empty(), "no model path given");
  KC_CHECK_ARG(options.chunk_size >= 1, "prefill chunk size ", options.chunk_size, " must be >= 1");
  KC_CHECK_ARG(options.max_context >= 0, "max context ", options.max_context, " is negative");
  if (options.device == Device::kCuda) {
#ifdef KASCADE_HAVE_CUDA
    KC_RETURN_IF_ERROR(cuda::cuda_device_usable(options.cuda_device));
    KC_CHECK_ARG(options.max_batch >= 1, "max batch ", options.max_batch, " must be >= 1");
    KC_CHECK_ARG(options.cuda_dtype == DType::kBF16 || options.cuda_dtype == DType::kF16, "--device cuda computes in ",
                 "bf16 or f16, not ", dtype_name(options.cuda_dtype));
#else
    return unsupported("--device cuda: this build of kascade has no CUDA support (configure with -DKASCADE_CUDA=ON "
                       "on a machine with the CUDA toolkit); use --device cpu");
#endif
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  KC_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(options.model_path));
  impl->config = config;
  Result<Weights> weights = options.dummy_weights
                                ? make_dummy_weights(config, options.dummy_dtype, options.dummy_seed)
                                : load_weights(config, options.model_path);
  if (!weights.ok()) return weights.status();
  for (const NamedTensor& t : weights->tensors()) impl->num_parameters += t.view.numel();
  impl->weights_dtype = weights->embed_tokens().dtype;
  impl->max_context = options.max_context > 0 ? options.max_context : config.max_position_embeddings;
  KC_CHECK_ARG(impl->max_context >= 1, "max context ", impl->max_context, " must be >= 1");
  KC_CHECK_ARG(options.page_size > 0 && (options.page_size & (options.page_size - 1)) == 0, "KV page size ",
               options.page_size, " must be a power of two");
  KC_ASSIGN_OR_RETURN(runtime::PolicySetup setup, runtime::build_policy_config(config, options.attention));
  impl->schedule_note = setup.schedule_note;
  if (options.device == Device::kCuda) {
#ifdef KASCADE_HAVE_CUDA
    KC_CHECK_ARG(impl->max_context <= (int64_t{1} << 30), "max context ", impl->max_context,
                 " exceeds the CUDA runtime's limit of 2^30 tokens");
    cuda::CudaModelOptions cuda_options;
    cuda_options.device = options.cuda_device;
    cuda_options.act_dtype = options.cuda_dtype;
    cuda_options.max_batch = options.max_batch;
    cuda_options.max_seq_len = static_cast<int32_t>(impl->max_context);
    cuda_options.page_size = options.page_size;
    cuda_options.budget = setup.config.budget;
    cuda_options.programmatic_launch = options.programmatic_launch;
    KC_ASSIGN_OR_RETURN(impl->cuda_model, cuda::CudaModel::create(*weights, cuda_options));
    KC_ASSIGN_OR_RETURN(impl->policy, make_policy(setup.config, impl->cuda_model->backend()));
    return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
#endif
  }
  ModelOptions model_options;
  model_options.widen_budget_bytes = options.widen_budget_bytes;
  KC_ASSIGN_OR_RETURN(impl->model, Model::create(std::move(weights).value(), model_options));
  KC_ASSIGN_OR_RETURN(impl->policy, make_policy(setup.config, make_cpu_backend()));
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

const ModelConfig& Runtime::config() const { return impl_->config; }
const RuntimeOptions& Runtime::options() const { return impl_->options; }
int64_t Runtime::max_context() const { return impl_->max_context; }
AttentionPolicy& Runtime::policy() { return *impl_->policy; }
void Runtime::set_layer_observer(LayerObserver observer) { impl_->observer = std::move(observer); }
const CudaGraphStats& Runtime::last_cuda_graph_stats() const { return impl_->last_graph_stats; }

Status Runtime::set_policy(std::unique_ptr<AttentionPolicy> policy) {
  KC_CHECK_ARG(policy != nullptr, "set_policy: null policy");

  const PolicyConfig& p = policy->config();
  const ModelConfig& c = config();
  KC_CHECK_ARG(p.num_layers == c.num_hidden_layers && p.num_heads == c.num_attention_heads &&
                   p.num_kv_heads == c.num_key_value_heads && p.head_dim == c.head_dim,
               "set_policy: policy shape (", p.num_layers, " layers, ", p.num_heads, " heads, ", p.num_kv_heads,
               " KV heads, d ", p.head_dim, ") does not match the model");
  if (impl_->options.device == Device::kCuda) {
#ifdef KASCADE_HAVE_CUDA
    // The caller's policy runs on its own backend (host memory): a make_policy policy is remade
    // from its config over the CUDA backend; any other (calibration's recorder) stays a host
    // policy, which the CUDA session feeds with host copies of each layer's q and KV cache.
    const std::vector<std::string>& names = policy_names();
    if (std::find(names.begin(), names.end(), p.name) == names.end()) {
      impl_->policy = std::move(policy);
      impl_->host_policy = true;
      return ok_status();
    }
    KC_ASSIGN_OR_RETURN(impl_->policy, make_policy(p, impl_->cuda_model->backend()));
    impl_->host_policy = false;
    return ok_status();
#endif
  }
  impl_->policy = std::move(policy);
  return ok_status();
}

std::string Runtime::describe() const {
  const ModelConfig& c = config();
  std::ostringstream os;
  os << architecture_name(c.architecture) << ": " << c.num_hidden_layers << " layers, hidden " << c.hidden_size
     << ", " << c.num_attention_heads << " heads / " << c.num_key_value_heads << " KV heads of dim " << c.head_dim
     << ", vocab " << c.vocab_size << ", " << static_cast<double>(impl_->num_parameters) / 1e6 << "M parameters ("
     << (impl_->options.dummy_weights ? "dummy " : "") << dtype_name(impl_->weights_dtype) << " weights";
  if (impl_->options.device == Device::kCuda) {
    os << ", on cuda:" << impl_->options.cuda_device << " in " << dtype_name(impl_->options.cuda_dtype);
  } else if (impl_->model->widened()) {
    os << ", widened to f32";
  }
  os << ") | attention " << impl_->policy->config().name;
  if (!impl_->schedule_note.empty()) os << ", " << impl_->schedule_note;
  os << " | max context " << impl_->max_context << ", prefill chunk " << impl_->options.chunk_size;
  if (impl_->options.device == Device::kCuda) os << ", max batch " << impl_->options.max_batch;
  return os.str();
}

Result<GenerateResult> Runtime::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const GenerateOptions& options, const GenerateCallbacks& callbacks) {
  const ModelConfig& c = config();
  KC_CHECK_ARG(!prompts.empty(), "generate: no prompts");
  KC_CHECK_ARG(options.max_new_tokens >= 0, "generate: max_new_tokens ", options.max_new_tokens, " is negative");
  KC_RETURN_IF_ERROR(runtime::validate_sampler(options.sampler));
  const int64_t max_ctx = impl_->max_context;
  std::vector<int64_t> max_tokens;
  int64_t total_prompt = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    KC_CHECK_ARG(!prompts[s].empty(), "generate: prompt ", s, " is empty");
    KC_CHECK_ARG(static_cast<int64_t>(prompts[s].size()) <= max_ctx, "prompt ", s, " has ", prompts[s].size(),
                 " tokens, more than the maximum context of ", max_ctx, " tokens (--max-context)");
    KC_RETURN_IF_ERROR(validate_tokens(prompts[s], c.vocab_size, "prompt", s));
    max_tokens.push_back(std::min<int64_t>(static_cast<int64_t>(prompts[s].size()) + options.max_new_tokens, max_ctx));
    total_prompt += static_cast<int64_t>(prompts[s].size());
  }
  std::set<int32_t> stop(options.stop_tokens.begin(), options.stop_tokens.end());
  if (options.stop_at_eos)
    for (int64_t id : c.eos_token_ids) stop.insert(static_cast<int32_t>(id));

  std::unique_ptr<FunctionObserver> observer_holder;
  KC_ASSIGN_OR_RETURN(auto session, impl_->make_session(max_tokens, static_cast<int64_t>(prompts.size()), &observer_holder));
  impl_->policy->reset_statistics();
  const int32_t n = static_cast<int32_t>(prompts.size());
  std::vector<runtime::Sampler> samplers;
  for (int32_t s = 0; s < n; ++s) samplers.emplace_back(options.sampler, static_cast<uint64_t>(s));
  GenerateResult result;
  result.sequences.resize(n);
  std::vector<bool> active(n, false);

  // Appends a sampled token to sequence s and decides whether it goes on.
  const auto accept = [&](int32_t s, int32_t token) {
    GeneratedSequence& g = result.sequences[s];
    if (stop.count(token) != 0) {
      g.finish = FinishReason::kStopToken;
      active[s] = false;
      return;
    }
    g.tokens.push_back(token);
    if (callbacks.on_token) callbacks.on_token(s, token);
    const int64_t total = static_cast<int64_t>(prompts[s].size() + g.tokens.size());
    if (static_cast<int64_t>(g.tokens.size()) >= options.max_new_tokens) {
      g.finish = FinishReason::kLength;
      active[s] = false;
    } else if (total >= max_ctx) {
      g.finish = FinishReason::kContext;
      active[s] = false;
    } else {
      active[s] = true;
    }
  };
  // Whether sequence s samples after its prompt.
  const auto samples_after_prompt = [&](int32_t s) {
    if (options.max_new_tokens == 0) return false;
    if (static_cast<int64_t>(prompts[s].size()) >= max_ctx) {
      result.sequences[s].finish = FinishReason::kContext;
      return false;
    }
    return true;
  };

  // Prefill: every sequence with prompt tokens left gets up to chunk_size of them per call.
  std::vector<int64_t> next(n, 0);
  std::vector<int32_t> sampled;
  std::vector<double> uniforms;
  // The uniform of each sampling row, from its sequence's stream (what Sampler::sample would draw).
  const auto draw_uniforms = [&](const std::vector<int32_t>& sequences) {
    uniforms.clear();
    for (int32_t s : sequences)
      uniforms.push_back(options.sampler.temperature > 0.0f ? samplers[s].next_uniform() : 0.0);
  };
  int64_t done = 0;
  const auto prefill_start = Clock::now();
  while (true) {
    std::vector<runtime::CallItem> items;
    std::vector<int32_t> sampling;
    for (int32_t s = 0; s < n; ++s) {
      const int64_t left = static_cast<int64_t>(prompts[s].size()) - next[s];
      if (left == 0) continue;
      const int64_t q = std::min<int64_t>(left, impl_->options.chunk_size);
      const bool last = q == left && samples_after_prompt(s);
      items.push_back({s, std::span<const int32_t>(prompts[s].data() + next[s], static_cast<size_t>(q)), last ? q - 1 : q});
      if (last) sampling.push_back(s);
    }
    if (items.empty()) break;
    draw_uniforms(sampling);
    KC_RETURN_IF_ERROR(session->step_sample(ForwardMode::kPrefill, items, options.sampler, uniforms, &sampled));
    for (const auto& item : items) {
      next[item.sequence] += static_cast<int64_t>(item.tokens.size());
      done += static_cast<int64_t>(item.tokens.size());
    }
    for (size_t i = 0; i < sampling.size(); ++i) accept(sampling[i], sampled[i]);
    if (callbacks.on_prefill_progress)
      callbacks.on_prefill_progress(PrefillProgress{done, total_prompt, seconds_since(prefill_start)});
  }
  result.stats.prefill_tokens = total_prompt;
  result.stats.prefill_s = seconds_since(prefill_start);
  const ForwardTimings after_prefill = session->timings();
  result.stats.prefill_timings = phase_between(ForwardTimings{}, after_prefill);

  // Decode: one token per active sequence per call.
  const auto decode_start = Clock::now();
  result.stats.pipelined_decode = impl_->options.pipelined_decode && session->can_pipeline_decode();
  if (result.stats.pipelined_decode) {
    const auto continues_after_next = [&](int32_t s) {
      const int64_t generated = static_cast<int64_t>(result.sequences[s].tokens.size()) + 1;
      return generated < options.max_new_tokens && static_cast<int64_t>(prompts[s].size()) + generated < max_ctx;
    };
    KC_RETURN_IF_ERROR(decode_pipelined(*session, options.sampler, active, result, draw_uniforms, uniforms, accept,
                                        continues_after_next));
  } else {
    while (true) {
      std::vector<runtime::CallItem> items;
      std::vector<int32_t> sequences;
      for (int32_t s = 0; s < n; ++s) {
        if (!active[s]) continue;
        items.push_back({s, std::span<const int32_t>(&result.sequences[s].tokens.back(), 1), 0});
        sequences.push_back(s);
      }
      if (items.empty()) break;
      draw_uniforms(sequences);
      KC_RETURN_IF_ERROR(session->step_sample(ForwardMode::kDecode, items, options.sampler, uniforms, &sampled));
      ++result.stats.decode_steps;
      result.stats.decode_tokens += static_cast<int64_t>(items.size());
      for (size_t i = 0; i < items.size(); ++i) accept(items[i].sequence, sampled[i]);
    }
  }
  result.stats.decode_s = seconds_since(decode_start);
  result.stats.decode_timings = phase_between(after_prefill, session->timings());
  result.stats.cuda_graph = session->cuda_graph_stats();
  impl_->last_graph_stats = result.stats.cuda_graph;
  result.stats.attended = runtime::summarize_attended(impl_->policy->statistics(), static_cast<int32_t>(c.num_hidden_layers));
  return result;
}

Result<std::vector<TeacherForcedOutput>> Runtime::teacher_forced(const std::vector<TeacherForcedInput>& inputs) {
  const ModelConfig& c = config();
  KC_CHECK_ARG(!inputs.empty(), "teacher_forced: no sequences");
  const int32_t n = static_cast<int32_t>(inputs.size());
  std::vector<int64_t> max_tokens;
  size_t longest_continuation = 0;
  for (int32_t s = 0; s < n; ++s) {
    const TeacherForcedInput& in = inputs[s];
    const int64_t total = static_cast<int64_t>(in.prompt.size() + in.continuation.size());
    KC_CHECK_ARG(!in.prompt.empty(), "teacher_forced: prompt ", s, " is empty");
    KC_CHECK_ARG(total <= impl_->max_context, "teacher_forced: sequence ", s, " has ", total,
                 " tokens, more than the maximum context of ", impl_->max_context, " tokens (--max-context)");
    KC_CHECK_ARG(in.first_logit_position >= 0 && in.first_logit_position < total, "teacher_forced: sequence ", s,
                 " first_logit_position ", in.first_logit_position, " outside [0, ", total, ")");
    KC_RETURN_IF_ERROR(validate_tokens(in.prompt, c.vocab_size, "prompt", static_cast<size_t>(s)));
    KC_RETURN_IF_ERROR(validate_tokens(in.continuation, c.vocab_size, "continuation", static_cast<size_t>(s)));
    max_tokens.push_back(total);
    longest_continuation = std::max(longest_continuation, in.continuation.size());
  }
  std::unique_ptr<FunctionObserver> observer_holder;
  int64_t logit_rows = 0;  // rows of the largest call: a chunk of every sequence
  for (const TeacherForcedInput& in : inputs)
    logit_rows += std::min<int64_t>(static_cast<int64_t>(in.prompt.size()), impl_->options.chunk_size);
  KC_ASSIGN_OR_RETURN(auto session, impl_->make_session(max_tokens, logit_rows, &observer_holder));
  impl_->policy->reset_statistics();
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  std::vector<TeacherForcedOutput> out(n);
  std::vector<float> logits;
  const auto collect = [&](const std::vector<runtime::CallItem>& items) {
    size_t row = 0;
    for (const auto& item : items) {
      const size_t rows = item.tokens.size() - static_cast<size_t>(item.logits_from);
      auto& o = out[item.sequence];
      o.logits.insert(o.logits.end(), logits.begin() + row * vocab, logits.begin() + (row + rows) * vocab);
      o.rows += static_cast<int64_t>(rows);
      row += rows;
    }
  };
  std::vector<int64_t> next(n, 0);
  while (true) {
    std::vector<runtime::CallItem> items;
    for (int32_t s = 0; s < n; ++s) {
      const int64_t left = static_cast<int64_t>(inputs[s].prompt.size()) - next[s];
      if (left == 0) continue;
      const int64_t q = std::min<int64_t>(left, impl_->options.chunk_size);
      const int64_t from = std::clamp<int64_t>(inputs[s].first_logit_position - next[s], 0, q);
      items.push_back({s, std::span<const int32_t>(inputs[s].prompt.data() + next[s], static_cast<size_t>(q)), from});
    }
    if (items.empty()) break;
    KC_RETURN_IF_ERROR(session->step(ForwardMode::kPrefill, items, &logits));
    collect(items);
    for (const auto& item : items) next[item.sequence] += static_cast<int64_t>(item.tokens.size());
  }
  for (size_t i = 0; i < longest_continuation; ++i) {
    std::vector<runtime::CallItem> items;
    for (int32_t s = 0; s < n; ++s) {
      if (i >= inputs[s].continuation.size()) continue;
      const int64_t position = static_cast<int64_t>(inputs[s].prompt.size() + i);
      items.push_back({s, std::span<const int32_t>(&inputs[s].continuation[i], 1),
                       position >= inputs[s].first_logit_position ? 0 : 1});
    }
    KC_RETURN_IF_ERROR(session->step(ForwardMode::kDecode, items, &logits));
    collect(items);
  }
  impl_->last_graph_stats = session->cuda_graph_stats();
  return out;
}

}  // namespace kascade
