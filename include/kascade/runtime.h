// kascade/runtime.h — the runtime, on the CPU or on a CUDA GPU (RuntimeOptions::device): load a Hugging Face Llama / Qwen3 checkpoint (or dummy
// weights for any config.json), run batches of prompts through chunked prefill and decode with a
// paged KV cache and any attention policy of DESIGN.md §2.4, sample, stream tokens, report speed
// and the fraction of keys attended.
//
//   auto rt = Runtime::create(options);                 // config, weights, policy, limits
//   auto result = (*rt)->generate(prompts, gen, callbacks);
//   auto logits = (*rt)->teacher_forced(inputs);        // parity tests, evaluation
//
// Calls and modes: prefill feeds every sequence with prompt tokens left up to `chunk_size` of them
// per forward call (a batch of prompts of different lengths is one varlen call; sequences whose
// prompt is done wait), then decode feeds one token per unfinished sequence per call. The policy
// sees ForwardMode::kPrefill for prefill calls and kDecode for decode calls. Chunks that are
// multiples of the tile size keep chunked prefill equal to one-shot prefill (DESIGN.md §2.3).
//
// Limits: a prompt longer than max_context is refused (InvalidArgument naming both numbers);
// generation stops when prompt + generated tokens reach max_context (FinishReason::kContext).
// The KV cache of a call is sized for its own prompts (Σ min(prompt + max_new, max_context)) and
// refused with ResourceExhausted when it cannot be allocated.
//
// Devices: kCpu runs the fp32 forward pass of src/model/forward.h; kCuda (a build with CUDA and a
// GPU) runs src/cuda/model (bf16 / fp16 activations with fp32 accumulation, fp32 residual stream,
// paged KV cache in device memory, the CUDA attention backend, sampling on the device) behind the
// same generate / teacher_forced calls. On kCuda: the KV cache takes the activation dtype
// (kv_dtype is ignored), at most max_batch sequences run together, memory is planned before each
// call and a batch × context that does not fit is refused (ResourceExhausted naming the numbers);
// set_policy remakes a make_policy policy over the CUDA backend, and keeps any other policy
// (calibration's recording policy) as a host policy: each layer's q and KV cache are copied to the
// host for it and its output back (slow, for calibration); the layer observer gets host copies of
// the residual stream and the attention output (src/cuda/model/cuda_session.h). Decode steps are
// captured in CUDA graphs (RuntimeOptions::cuda_graph, CudaGraphStats). Without CUDA built in, or
// without a GPU, kCuda is refused with Unsupported.
// Implementation: src/runtime/ (runtime.cpp, session.cpp, cache_attention.cpp, kv_cache.cpp,
// sampler.cpp, policy_setup.cpp, report.cpp, forward_session.h, gpu_memory_plan.h) over the forward
// pass of src/model/forward.h, and src/cuda/model/ for kCuda.
// Tested by tests/unit/runtime/ (Hugging Face parity of every policy at a saturating budget,
// generation, sampling, KV cache, reports).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/model_config.h"
#include "kascade/policy.h"
#include "kascade/status.h"

namespace kascade {

// Next-token sampling (applied in Hugging Face's order: temperature, top-k, top-p). temperature 0
// is greedy (argmax, ties to the lower id). Each sequence of a batch draws from its own stream
// (its index in the batch) of a generator seeded with `seed`.
struct SamplerConfig {
  float temperature = 0.0f;  // 0 → greedy; otherwise > 0
  int32_t top_k = 0;         // 0 → off
  float top_p = 1.0f;        // in (0, 1]; 1 → off
  uint64_t seed = 0;
};

struct AttentionOptions {
  std::string policy = "dense";     // one of policy_names() (kascade/policy.h)
  std::string calibration_file;     // kascade variants: anchors and head maps from `kascade calibrate`
  int32_t num_anchors = 0;          // with a calibration file: 0 → the file's default anchor count
  std::vector<int32_t> anchors;     // kascade variants without a file: these anchors, identity head map
  double topk_fraction = 0.10;      // rho of DESIGN.md §2.1, in (0, 1]
  int64_t k_min = 128;
  int32_t tile_size = 32;           // prefill tile T
  bool rolling = true;              // rolling prefill budget k(s_t)
};

enum class Device : uint8_t { kCpu = 0, kCuda = 1 };
const char* device_name(Device device);  // "cpu", "cuda"
Result<Device> parse_device(std::string_view name);  // "cpu" | "cuda"
// Whether this build has the CUDA runtime compiled in (a GPU may still be missing).
bool cuda_runtime_built();

struct RuntimeOptions {
  Device device = Device::kCpu;
  int32_t cuda_device = 0;           // kCuda: device ordinal
  DType cuda_dtype = DType::kBF16;   // kCuda: activations, linear weights and KV cache (bf16 | f16)
  int32_t max_batch = 8;             // kCuda: most sequences per generate / teacher_forced call
  bool cuda_graph = true;            // kCuda: capture each decode step in a CUDA graph and replay it
                                     // (graph-safe policies only; see CudaGraphStats)
  bool pipelined_decode = true;      // generate: launch decode step t + 1 (its tokens fed from step t's
                                     // samples) before reading step t's tokens; the same tokens and
                                     // finish reasons, with one extra row computed for a sequence
                                     // that stops on a stop token (its result is dropped). Hides the
                                     // host's share of a CUDA step (docs/perf.md GPU runtime round 8);
                                     // false: step by step. A CUDA session with a layer observer
                                     // (calibrate) or a host-memory policy runs step by step regardless
                                     // (GenerateStats::pipelined_decode says which ran)
  bool small_m_linear = false;       // kCuda: linear layers of <= 8 rows (decode) through a weight-streaming
                                     // tensor-core kernel instead of cuBLAS (src/cuda/ops/small_m_linear.h;
                                     // opt-in: 0.55 ms a step slower than cuBLAS at 128K batch 4,
                                     // docs/perf.md GPU runtime round 10)
  bool programmatic_launch = false;  // kCuda: the forward pass's own kernels launch with programmatic
                                     // dependent launch, each starting while its predecessor finishes
                                     // (sm_90+, refused below; src/cuda/common/programmatic_launch.cuh;
                                     // opt-in: same results, no gain with cuBLAS's GEMMs, 0.1-0.36 ms a
                                     // step with small_m_linear; docs/perf.md GPU runtime round 10)
  std::filesystem::path model_path;  // a model directory (config.json + safetensors) or a config.json
  bool dummy_weights = false;        // random weights of the config's shapes instead of safetensors
  DType dummy_dtype = DType::kBF16;
  uint64_t dummy_seed = 0;
  AttentionOptions attention;
  int64_t max_context = 0;           // 0 → the config's max_position_embeddings
  int32_t chunk_size = 512;          // prefill tokens per sequence per forward call (>= 1)
  int32_t page_size = 128;           // KV cache page (power of two); 128 lets the GPU prefill use
                                     // the TMA kernels (they need pages of >= 128 keys)
  DType kv_dtype = DType::kF32;      // KV cache element type (kCpu)
  int64_t widen_budget_bytes = int64_t{8} << 30;  // see src/model/model.h
};

struct GenerateOptions {
  int32_t max_new_tokens = 128;
  SamplerConfig sampler;
  bool stop_at_eos = true;             // stop a sequence at the config's eos_token_ids
  std::vector<int32_t> stop_tokens;    // further stop tokens
};

struct PrefillProgress {
  int64_t done_tokens = 0;
  int64_t total_tokens = 0;
  double elapsed_s = 0.0;
  double tokens_per_s() const { return elapsed_s > 0 ? static_cast<double>(done_tokens) / elapsed_s : 0.0; }
  // Seconds left at the current rate (0 when done or unknown).
  double eta_s() const {
    const double rate = tokens_per_s();
    return rate > 0 ? static_cast<double>(total_tokens - done_tokens) / rate : 0.0;
  }
};

struct GenerateCallbacks {
  std::function<void(int32_t sequence, int32_t token)> on_token;     // each generated token, in order
  std::function<void(const PrefillProgress&)> on_prefill_progress;  // after each prefill call
};

enum class FinishReason : uint8_t { kLength = 0, kStopToken = 1, kContext = 2 };
const char* finish_reason_name(FinishReason reason);  // "length", "stop", "context"

// Attended keys of the layers of one role (kascade/policy.h LayerRole) in one mode.
struct RoleAttended {
  LayerRole role = LayerRole::kDense;
  int32_t num_layers = 0;
  AttendedCount count;
};
struct AttendedSummary {
  std::vector<RoleAttended> prefill;  // roles that have layers, in enum order
  std::vector<RoleAttended> decode;
  AttendedCount prefill_total, decode_total;
};

// Where the time of one phase went (wall seconds inside the forward calls of that phase).
struct PhaseTimings {
  double matmul_s = 0.0;      // linear layers (sgemm)
  double matmul_flops = 0.0;  // their FLOPs, 2·m·n·k
  double attention_s = 0.0;   // K/V store + the policy's attention (selection included)
  double other_s = 0.0;       // embedding, norms, RoPE, SiLU, residual adds, logits rows
  double device_s = 0.0;      // GPU runtime: the device's time of the phase's calls, from each call's
                              // first upload to its last download (CUDA events); 0 on the CPU
  double matmul_gflops() const { return matmul_s > 0 ? matmul_flops / matmul_s / 1e9 : 0.0; }
};

// How the decode steps of one generate / teacher_forced call ran on the GPU (kCuda). With
// RuntimeOptions::cuda_graph and a graph-safe policy (dense, kascade, kascade-noremap,
// kascade-pooled, kascade-decode), the first decode step of each batch composition runs eagerly
// (it makes the attention plans), the next is captured into a CUDA graph (embedding → layers →
// LM head → sampler) and launched, and later steps of the same composition replay it with the
// new tokens, positions, lengths and selection sizes uploaded before each launch. A step is
// recaptured (the graph updated in place) when the batch composition, or the width of the decode
// index rows (max k(n) of the batch: it grows by one every 1/rho tokens), changes. The baselines
// (src/cuda/model/decode_graph.h says why each), host policies and the layer observer
// (calibration), --no-cuda-graph, and the CPU run every step eagerly; eager_reason says why.
struct CudaGraphStats {
  bool enabled = false;          // decode steps may be captured and replayed
  std::string eager_reason;      // why every decode step runs eagerly (when !enabled), or why
                                 // capture was given up (a capture that failed: the step reran eagerly)
  int64_t eager_steps = 0;       // decode steps launched op by op
  int64_t captures = 0;          // decode steps captured into a graph, then launched
  int64_t replays = 0;           // decode steps that replayed the captured graph
  int64_t trace_mismatches = 0;  // steps whose ops differed from the captured ones although their
                                 // composition and row width did not (recaptured; expected 0)
};

struct GenerateStats {
  int64_t prefill_tokens = 0;
  double prefill_s = 0.0;
  int64_t decode_tokens = 0;  // tokens fed by decode calls (one per sequence per step)
  int64_t decode_steps = 0;
  bool pipelined_decode = false;  // decode ran pipelined (RuntimeOptions::pipelined_decode, where the session can)
  double decode_s = 0.0;
  AttendedSummary attended;
  PhaseTimings prefill_timings, decode_timings;
  CudaGraphStats cuda_graph;  // kCuda: how the decode steps ran
  double prefill_tokens_per_s() const { return prefill_s > 0 ? prefill_tokens / prefill_s : 0.0; }
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0.0; }
};

struct GeneratedSequence {
  std::vector<int32_t> tokens;  // generated tokens (a stop token that ended the sequence is not included)
  FinishReason finish = FinishReason::kLength;
};

struct GenerateResult {
  std::vector<GeneratedSequence> sequences;
  GenerateStats stats;
};

// Teacher forcing: prefill `prompt`, then feed `continuation` one decode call per token.
struct TeacherForcedInput {
  std::vector<int32_t> prompt;        // >= 1 token
  std::vector<int32_t> continuation;  // may be empty
  int64_t first_logit_position = 0;   // logits of positions first .. prompt + continuation − 1
};
struct TeacherForcedOutput {
  int64_t rows = 0;
  std::vector<float> logits;  // [rows, vocab]; row r predicts the token after position first + r
};

// Per-layer observation of the residual stream (calibration's importance statistic).
// x: [tokens, hidden] fp32 entering `layer`; attn: [tokens, hidden] fp32 attention block output.
using LayerObserver = std::function<Status(int32_t layer, const float* x, const float* attn, int64_t tokens)>;

class Runtime {
 public:
  // Loads and validates everything: config, weights (or dummy weights), the policy and its schedule
  // (calibration file or anchors for the kascade variants; refused for other policies), limits.
  static Result<std::unique_ptr<Runtime>> create(const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const ModelConfig& config() const;
  const RuntimeOptions& options() const;
  int64_t max_context() const;
  // One line: architecture, size, weights dtype and widening, policy and its schedule.
  std::string describe() const;

  // Generates for a batch of prompts (each >= 1 token id).
  Result<GenerateResult> generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options,
                                  const GenerateCallbacks& callbacks = {});

  // Teacher-forced logits for a batch of sequences (prefill of the prompts, then one decode call
  // per continuation token for all sequences that still have one).
  Result<std::vector<TeacherForcedOutput>> teacher_forced(const std::vector<TeacherForcedInput>& inputs);

  // The policy (its statistics, index snapshots) and a way to replace it (a recording policy for
  // calibration); replacing validates that the new policy's config matches the model's shape.
  // kCuda: the given policy runs on its own (host) backend, so set_policy remakes it from its config()
  // over the CUDA backend (any policy of make_policy: policy_names()); others, such as calibration's
  // recording policy, run on the host with per-layer copies of q and the KV cache.
  AttentionPolicy& policy();
  Status set_policy(std::unique_ptr<AttentionPolicy> policy);
  // Observer called during every forward call (empty function: none). kCuda: host copies of the
  // residual stream and the attention output, per layer (synchronising; for calibration).
  void set_layer_observer(LayerObserver observer);
  // How the decode steps of the last generate / teacher_forced call ran (kCuda; on the CPU:
  // enabled false with its reason).
  const CudaGraphStats& last_cuda_graph_stats() const;

 private:
  struct Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kascade
