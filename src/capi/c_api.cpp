// src/capi/c_api.cpp — the C interface of include/kascade/c_api.h over the C++ backends
// (kascade/backends.h), policies (kascade/policy.h) and runtime (kascade/runtime.h, with the model
// directory's tokenizer): handles own the C++ objects; every entry point checks its pointers, converts
// the C views to the C++ ones, turns a Status into its code plus a thread-local message, and catches
// every exception (a C caller — or Python's ctypes — must never see one). Built as the shared library
// libkascade_c. Tested by tests/python/test_c_api.py (through python/kascade: dense against numpy,
// Kascade on planted needles, calibration files, the runtime against transformers' logits and the
// `tokenizers` library, every refusal), tests/python/test_c_api_cuda.py (the CUDA backend on torch
// tensors, CUDA graphs, the runtime on the GPU) and tests/scripts/test_install.sh (examples/c_decode.c).
#include "kascade/c_api.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kascade/backends.h"
#include "kascade/policy.h"
#include "kascade/runtime.h"
#include "kascade/tokenizer.h"
#include "runtime/policy_setup.h"

#include "cuda/backend/graph_pass.h"  // GraphPass: plain C++; the passes themselves need the CUDA backend
#ifdef KASCADE_HAVE_CUDA
#include "cuda/backend/cuda_backend.h"
#endif

struct kascade_backend {
  std::shared_ptr<kascade::AttentionBackend> backend;
};
struct kascade_policy {
  std::unique_ptr<kascade::AttentionPolicy> policy;
};
struct kascade_runtime {
  std::unique_ptr<kascade::Runtime> runtime;
  kascade::Tokenizer tokenizer;
  std::string description;
  kascade::GenerateStats last_stats;
};

namespace {

using kascade::Status;

thread_local std::string last_error;

int32_t report(const Status& status) {
  last_error = status.ok() ? std::string() : status.to_string();
  return static_cast<int32_t>(status.code());
}

// Runs `body` (returning a Status), reporting its result; an exception becomes KASCADE_INTERNAL.
template <typename Body>
int32_t guarded(const char* function, Body&& body) {
  try {
    Status status = body();
    if (!status.ok()) status.with_context(function);
    return report(status);
  } catch (const std::exception& e) {
    return report(kascade::internal_error(function, ": ", e.what()));
  } catch (...) {
    return report(kascade::internal_error(function, ": an unknown exception"));
  }
}

kascade::Result<kascade::DType> dtype_of(int32_t dtype, const char* what) {
  if (dtype < KASCADE_F32 || dtype > KASCADE_BF16)
    return kascade::invalid_argument(what, " dtype is ", dtype, "; expected 0 (f32), 1 (f16) or 2 (bf16)");
  return static_cast<kascade::DType>(dtype);
}

kascade::Result<kascade::ForwardMode> mode_of(int32_t mode) {
  if (mode != KASCADE_PREFILL && mode != KASCADE_DECODE)
    return kascade::invalid_argument("mode is ", mode, "; expected 0 (prefill) or 1 (decode)");
  return static_cast<kascade::ForwardMode>(mode);
}

kascade::Result<kascade::PolicyConfig> policy_config_of(const kascade_policy_config& c) {
  KC_CHECK_ARG(c.name != nullptr, "config.name is NULL");
  kascade::PolicyConfig config;
  config.name = c.name;
  config.num_layers = c.num_layers;
  config.num_heads = c.num_heads;
  config.num_kv_heads = c.num_kv_heads;
  config.head_dim = c.head_dim;
  KC_ASSIGN_OR_RETURN(config.budget.rho_ppm, kascade::fraction_to_ppm(c.topk_fraction));
  config.budget.k_min = c.k_min;
  config.tile_size = c.tile_size;
  config.rolling = c.rolling != 0;
  KC_CHECK_ARG(c.num_anchors >= 0, "config.num_anchors is ", c.num_anchors);
  KC_CHECK_ARG(c.num_anchors == 0 || c.anchors != nullptr, "config.anchors is NULL with num_anchors ", c.num_anchors);
  kascade::runtime::ScheduleRequest request;
  request.file_option = "config.calibration_file";
  request.anchors_option = "config.anchors";
  request.num_anchors_option = "config.calibration_num_anchors";
  if (c.calibration_file != nullptr) request.calibration_file = c.calibration_file;
  request.num_anchors = c.calibration_num_anchors;
  request.anchors.assign(c.anchors, c.anchors + c.num_anchors);
  if (c.head_map != nullptr) {
    KC_CHECK_ARG(c.num_layers >= 1 && c.num_kv_heads >= 1, "config.num_layers ", c.num_layers,
                 " and config.num_kv_heads ", c.num_kv_heads, " must be positive");
    request.head_map.assign(c.head_map, c.head_map + static_cast<size_t>(c.num_layers) * c.num_kv_heads);
  }
  KC_ASSIGN_OR_RETURN(config.schedule,
                      kascade::runtime::choose_schedule(config.name, {c.num_layers, c.num_heads, c.num_kv_heads,
                                                                      c.head_dim},
                                                        request, nullptr));
  KC_RETURN_IF_ERROR(kascade::validate_policy_config(config));
  return config;
}

// Runs `op` on the handle's CUDA backend (graph passes exist only there), kUnsupported for any other backend
// or a build without CUDA. `op` is a generic lambda, so a build without CUDA never instantiates it.
template <typename Op>
Status with_cuda_backend(kascade_backend* backend, Op&& op) {
  KC_CHECK_ARG(backend != nullptr, "backend is NULL");
#ifdef KASCADE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<kascade::CudaBackend*>(backend->backend.get())) return op(*cuda);
#endif
  return kascade::unsupported("CUDA graph passes need the CUDA backend; this is the ", backend->backend->name(),
                              " backend");
}

}  // namespace

extern "C" {

int32_t kascade_c_api_version(void) { return KASCADE_C_API_VERSION; }
int32_t kascade_has_cuda(void) { return kascade::cuda_runtime_built() ? 1 : 0; }
const char* kascade_last_error(void) { return last_error.c_str(); }

int32_t kascade_backend_cpu(kascade_backend** out) {
  return guarded("kascade_backend_cpu", [&]() -> Status {
    KC_CHECK_ARG(out != nullptr, "out is NULL");
    *out = new kascade_backend{kascade::make_cpu_backend()};
    return kascade::ok_status();
  });
}

int32_t kascade_backend_cuda(int32_t device, void* stream, int32_t max_batch, int32_t max_seq_len,
                             kascade_backend** out) {
  return guarded("kascade_backend_cuda", [&]() -> Status {
    KC_CHECK_ARG(out != nullptr, "out is NULL");
    kascade::CudaBackendOptions options;
    options.device = device;
    options.stream = stream;
    options.max_batch = max_batch;
    options.max_seq_len = max_seq_len;
    KC_ASSIGN_OR_RETURN(std::shared_ptr<kascade::AttentionBackend> backend, kascade::make_cuda_backend(options));
    *out = new kascade_backend{std::move(backend)};
    return kascade::ok_status();
  });
}

void kascade_backend_destroy(kascade_backend* backend) { delete backend; }

int32_t kascade_backend_begin_graph_pass(kascade_backend* backend, int32_t pass) {
  return guarded("kascade_backend_begin_graph_pass", [&]() -> Status {
    KC_CHECK_ARG(pass == KASCADE_GRAPH_CAPTURE || pass == KASCADE_GRAPH_CHECK, "pass is ", pass,
                 "; expected 1 (capture) or 2 (check)");
    const auto graph_pass = pass == KASCADE_GRAPH_CAPTURE ? kascade::cuda::GraphPass::kCapture
                                                          : kascade::cuda::GraphPass::kCheck;
    return with_cuda_backend(backend, [&](auto& cuda) { return cuda.begin_graph_pass(graph_pass); });
  });
}

int32_t kascade_backend_end_graph_pass(kascade_backend* backend, int32_t* result) {
  return guarded("kascade_backend_end_graph_pass", [&]() -> Status {
    KC_CHECK_ARG(result != nullptr, "result is NULL");
    return with_cuda_backend(backend, [&](auto& cuda) -> Status {
      KC_ASSIGN_OR_RETURN(const bool kept, cuda.end_graph_pass());
      *result = kept ? 1 : 0;
      return kascade::ok_status();
    });
  });
}

void kascade_backend_abort_graph_pass(kascade_backend* backend) {
  (void)with_cuda_backend(backend, [](auto& cuda) {  // no CUDA backend: no pass to abort
    cuda.abort_graph_pass();
    return kascade::ok_status();
  });
}

int32_t kascade_backend_upload_graph_inputs(kascade_backend* backend) {
  return guarded("kascade_backend_upload_graph_inputs", [&]() -> Status {
    return with_cuda_backend(backend, [](auto& cuda) { return cuda.upload_graph_inputs(); });
  });
}

void kascade_policy_config_init(kascade_policy_config* config) {
  if (config == nullptr) return;
  *config = kascade_policy_config{};
  const kascade::PolicyConfig defaults;
  config->name = "dense";
  config->topk_fraction = static_cast<double>(defaults.budget.rho_ppm) / 1e6;
  config->k_min = defaults.budget.k_min;
  config->tile_size = defaults.tile_size;
  config->rolling = defaults.rolling ? 1 : 0;
}

int32_t kascade_policy_create(kascade_backend* backend, const kascade_policy_config* config, kascade_policy** out) {
  return guarded("kascade_policy_create", [&]() -> Status {
    KC_CHECK_ARG(backend != nullptr && config != nullptr && out != nullptr, "backend, config or out is NULL");
    KC_ASSIGN_OR_RETURN(kascade::PolicyConfig policy_config, policy_config_of(*config));
    KC_ASSIGN_OR_RETURN(std::unique_ptr<kascade::AttentionPolicy> policy,
                        kascade::make_policy(policy_config, backend->backend));
    *out = new kascade_policy{std::move(policy)};
    return kascade::ok_status();
  });
}

void kascade_policy_destroy(kascade_policy* policy) { delete policy; }

int32_t kascade_policy_begin_forward(kascade_policy* policy, int32_t mode, int32_t batch, const int32_t* q_lens,
                                     const int32_t* kv_lens) {
  return guarded("kascade_policy_begin_forward", [&]() -> Status {
    KC_CHECK_ARG(policy != nullptr && q_lens != nullptr && kv_lens != nullptr, "policy, q_lens or kv_lens is NULL");
    KC_ASSIGN_OR_RETURN(const kascade::ForwardMode forward_mode, mode_of(mode));
    return policy->policy->begin_forward({forward_mode, batch, q_lens, kv_lens});
  });
}

int32_t kascade_policy_attention(kascade_policy* policy, int32_t layer, const kascade_query* q,
                                 const kascade_paged_kv* kv, float scale, void* o, float* lse) {
  return guarded("kascade_policy_attention", [&]() -> Status {
    KC_CHECK_ARG(policy != nullptr && q != nullptr && kv != nullptr && o != nullptr, "policy, q, kv or o is NULL");
    KC_ASSIGN_OR_RETURN(const kascade::DType q_dtype, dtype_of(q->dtype, "q"));
    KC_ASSIGN_OR_RETURN(const kascade::DType kv_dtype, dtype_of(kv->dtype, "kv"));
    const kascade::QueryBatch query{q->q, q_dtype, q->batch, q->total_q, q->num_heads, q->head_dim, q->cu_q_lens};
    const kascade::PagedKv cache{kv->k,         kv->v,          kv_dtype,          kv->num_pages,
                                 kv->page_size, kv->num_kv_heads, kv->head_dim,    kv->block_table,
                                 kv->max_pages_per_seq, kv->kv_lens};
    const kascade::AttentionOutput output{o, q_dtype, lse};
    return policy->policy->attention(layer, query, cache, {scale}, output);
  });
}

int32_t kascade_policy_layer_role(const kascade_policy* policy, int32_t layer, int32_t mode, int32_t* role) {
  return guarded("kascade_policy_layer_role", [&]() -> Status {
    KC_CHECK_ARG(policy != nullptr && role != nullptr, "policy or role is NULL");
    KC_ASSIGN_OR_RETURN(const kascade::ForwardMode forward_mode, mode_of(mode));
    KC_ASSIGN_OR_RETURN(const kascade::LayerRole layer_role, policy->policy->role(layer, forward_mode));
    *role = static_cast<int32_t>(layer_role);
    return kascade::ok_status();
  });
}

int32_t kascade_policy_keys_attended(const kascade_policy* policy, int32_t mode, int32_t layer, int64_t* attended,
                                     int64_t* causal) {
  return guarded("kascade_policy_keys_attended", [&]() -> Status {
    KC_CHECK_ARG(policy != nullptr && attended != nullptr && causal != nullptr, "policy, attended or causal is NULL");
    KC_ASSIGN_OR_RETURN(const kascade::ForwardMode forward_mode, mode_of(mode));
    const int32_t layers = policy->policy->config().num_layers;
    KC_CHECK_ARG(layer >= -1 && layer < layers, "layer is ", layer, "; expected -1 (all) or 0..", layers - 1);
    const kascade::AttendedStatistics& statistics = policy->policy->statistics();
    const kascade::AttendedCount count =
        layer < 0 ? statistics.total(forward_mode) : statistics.layer(forward_mode, layer);
    *attended = count.attended;
    *causal = count.causal;
    return kascade::ok_status();
  });
}

void kascade_runtime_options_init(kascade_runtime_options* options) {
  if (options == nullptr) return;
  *options = kascade_runtime_options{};
  const kascade::RuntimeOptions defaults;
  options->device = 0;  // the CPU
  options->cuda_dtype = static_cast<int32_t>(defaults.cuda_dtype);
  options->max_batch = defaults.max_batch;
  options->policy = "dense";
  options->topk_fraction = defaults.attention.topk_fraction;
}

int32_t kascade_runtime_create(const kascade_runtime_options* options, kascade_runtime** out) {
  return guarded("kascade_runtime_create", [&]() -> Status {
    KC_CHECK_ARG(options != nullptr && out != nullptr, "options or out is NULL");
    KC_CHECK_ARG(options->model_path != nullptr, "options.model_path is NULL");
    KC_CHECK_ARG(options->policy != nullptr, "options.policy is NULL");
    KC_CHECK_ARG(options->device == 0 || options->device == 1, "options.device is ", options->device,
                 "; expected 0 (CPU) or 1 (CUDA)");
    KC_ASSIGN_OR_RETURN(const kascade::DType cuda_dtype, dtype_of(options->cuda_dtype, "options.cuda"));
    kascade::RuntimeOptions o;
    o.model_path = options->model_path;
    o.device = options->device == 1 ? kascade::Device::kCuda : kascade::Device::kCpu;
    o.cuda_device = options->cuda_device;
    o.cuda_dtype = cuda_dtype;
    o.max_batch = options->max_batch;
    o.max_context = options->max_context;
    o.attention.policy = options->policy;
    o.attention.num_anchors = options->num_anchors;
    o.attention.topk_fraction = options->topk_fraction;
    if (options->calibration_file != nullptr) o.attention.calibration_file = options->calibration_file;
    kascade::runtime::use_default_calibration_file(o.attention, options->model_path);
    // The runtime first: its errors name the model path as given (a missing directory, config.json, weights).
    KC_ASSIGN_OR_RETURN(std::unique_ptr<kascade::Runtime> runtime, kascade::Runtime::create(o));
    const std::filesystem::path tokenizer_path =
        kascade::runtime::model_dir_of(options->model_path) / "tokenizer.json";
    KC_ASSIGN_OR_RETURN(kascade::Tokenizer tokenizer, kascade::Tokenizer::from_file(tokenizer_path.string()));
    std::string description = runtime->describe();
    *out = new kascade_runtime{std::move(runtime), std::move(tokenizer), std::move(description), {}};
    return kascade::ok_status();
  });
}

void kascade_runtime_destroy(kascade_runtime* runtime) { delete runtime; }

const char* kascade_runtime_describe(kascade_runtime* runtime) {
  return runtime == nullptr ? "" : runtime->description.c_str();
}

int32_t kascade_runtime_encode(kascade_runtime* runtime, const char* text, int32_t add_special_tokens, int32_t* ids,
                               int64_t capacity, int64_t* count) {
  return guarded("kascade_runtime_encode", [&]() -> Status {
    KC_CHECK_ARG(runtime != nullptr && text != nullptr && count != nullptr, "runtime, text or count is NULL");
    KC_CHECK_ARG(capacity >= 0 && (capacity == 0 || ids != nullptr), "ids is NULL with capacity ", capacity);
    KC_ASSIGN_OR_RETURN(const std::vector<int32_t> encoded, runtime->tokenizer.encode(text, add_special_tokens != 0));
    *count = static_cast<int64_t>(encoded.size());
    if (*count > capacity)
      return kascade::out_of_range("the text has ", *count, " tokens; ids holds ", capacity);
    std::copy(encoded.begin(), encoded.end(), ids);
    return kascade::ok_status();
  });
}

int32_t kascade_runtime_decode(kascade_runtime* runtime, const int32_t* ids, int64_t count, char* text,
                               int64_t capacity, int64_t* length) {
  return guarded("kascade_runtime_decode", [&]() -> Status {
    KC_CHECK_ARG(runtime != nullptr && length != nullptr, "runtime or length is NULL");
    KC_CHECK_ARG(count >= 0 && (count == 0 || ids != nullptr), "ids is NULL with count ", count);
    KC_CHECK_ARG(capacity >= 0 && (capacity == 0 || text != nullptr), "text is NULL with capacity ", capacity);
    KC_ASSIGN_OR_RETURN(const std::string decoded,
                        runtime->tokenizer.decode(std::span<const int32_t>(ids, static_cast<size_t>(count)), true));
    *length = static_cast<int64_t>(decoded.size());
    if (*length + 1 > capacity)
      return kascade::out_of_range("the text has ", *length, " bytes (and a NUL); text holds ", capacity);
    std::copy(decoded.begin(), decoded.end(), text);
    text[decoded.size()] = '\0';
    return kascade::ok_status();
  });
}

int32_t kascade_runtime_generate(kascade_runtime* runtime, const int32_t* prompts, const int64_t* offsets,
                                 int32_t batch, int32_t max_new_tokens, float temperature, int32_t top_k, float top_p,
                                 uint64_t seed, int32_t* tokens, int32_t* counts) {
  return guarded("kascade_runtime_generate", [&]() -> Status {
    KC_CHECK_ARG(runtime != nullptr && prompts != nullptr && offsets != nullptr && tokens != nullptr &&
                     counts != nullptr,
                 "runtime, prompts, offsets, tokens or counts is NULL");
    KC_CHECK_ARG(batch >= 1, "batch is ", batch, "; expected >= 1");
    KC_CHECK_ARG(max_new_tokens >= 1, "max_new_tokens is ", max_new_tokens, "; expected >= 1");
    KC_CHECK_ARG(offsets[0] == 0, "offsets[0] is ", offsets[0], "; expected 0");
    std::vector<std::vector<int32_t>> batch_prompts;
    for (int32_t b = 0; b < batch; ++b) {
      KC_CHECK_ARG(offsets[b + 1] > offsets[b], "prompt ", b, " is empty (offsets ", offsets[b], " .. ",
                   offsets[b + 1], ")");
      batch_prompts.emplace_back(prompts + offsets[b], prompts + offsets[b + 1]);
    }
    kascade::GenerateOptions options;
    options.max_new_tokens = max_new_tokens;
    options.sampler.temperature = temperature;
    options.sampler.top_k = top_k;
    options.sampler.top_p = top_p;
    options.sampler.seed = seed;
    KC_ASSIGN_OR_RETURN(kascade::GenerateResult result, runtime->runtime->generate(batch_prompts, options));
    for (int32_t b = 0; b < batch; ++b) {
      const std::vector<int32_t>& generated = result.sequences[static_cast<size_t>(b)].tokens;
      int32_t* row = tokens + static_cast<int64_t>(b) * max_new_tokens;
      std::fill(row, row + max_new_tokens, -1);
      std::copy(generated.begin(), generated.end(), row);
      counts[b] = static_cast<int32_t>(generated.size());
    }
    runtime->last_stats = result.stats;
    return kascade::ok_status();
  });
}

int32_t kascade_runtime_last_stats(kascade_runtime* runtime, double* prefill_keys, double* decode_keys,
                                   double* prefill_seconds, double* decode_seconds) {
  return guarded("kascade_runtime_last_stats", [&]() -> Status {
    KC_CHECK_ARG(runtime != nullptr && prefill_keys != nullptr && decode_keys != nullptr && prefill_seconds != nullptr &&
                     decode_seconds != nullptr,
                 "runtime or an output is NULL");
    const kascade::GenerateStats& stats = runtime->last_stats;
    *prefill_keys = stats.attended.prefill_total.fraction();
    *decode_keys = stats.attended.decode_total.fraction();
    *prefill_seconds = stats.prefill_s;
    *decode_seconds = stats.decode_s;
    return kascade::ok_status();
  });
}

}  // extern "C"
