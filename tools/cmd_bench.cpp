// tools/cmd_bench.cpp — `kascade bench e2e`: the end-to-end benchmark of the GPU runtime (issue 7);
// `kascade bench prefill` and `kascade bench decode` (the kernel benchmarks) are bench_kernels.h.
//
//   kascade bench e2e                                   # the full matrix (below)
//   kascade bench e2e --lengths 8k --batches 1,2 --decode-steps 16 --json e2e.json   # a short run
//
// It builds the Llama-3.1-8B shape (built-in config.json, or --model DIR|config.json) with dummy
// bf16 weights on the GPU, then for every policy (--policies, default dense,kascade), prompt length
// (--lengths, default 32k,128k) and batch (--batches, one list per length, default 1,8/1,4):
// random prompts (seeded), chunked prefill (--chunk tokens per sequence per call), then
// --decode-steps greedy decode steps (CUDA graph replay unless --no-cuda-graph). Kascade runs at
// --topk-fraction 0.1 with anchors 0,2,8,13,14 and identity head maps unless --calibration or
// --anchors says otherwise. Each cell is preceded by a short warm-up generate of the same batch
// (plans, cuBLAS heuristics, graph capture) unless --no-warmup.
// Reported per cell: TTFT (prefill of the whole batch up to its first sampled tokens), decode
// tokens/s (all sequences) and ms per step (wall clock, and the GPU's share of it: CUDA events
// around each step, the rest being host work between launches), the device memory planned (weights + KV cache +
// activations + sampler + reserve, runtime/gpu_memory_plan.h) and the peak measured with
// cudaMemGetInfo during the run (total − free, whole device), the decode path (graph or eager);
// then the ratios of each policy to dense. Before anything runs, every cell's plan is checked
// against the device's free memory and refused with the numbers when it does not fit.
// stdout: the table; stderr: the model line and a progress line; --json FILE: the results.
// Exit codes: 0, 1 on an error ("kascade bench: error: ..."), 2 on bad usage.
// The host-side half (flags, matrix, plan, ratios, formatting) is tools/bench_e2e_plan.h, tested
// by tests/unit/tools/test_bench_e2e_plan.cpp; the GPU run itself is measured by the lead on the
// H200 (docs/perf.md).
#include <CLI/CLI.hpp>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_e2e_plan.h"
#include "bench_kernels.h"
#include "commands.h"
#include "kascade/runtime.h"
#include "policy/cpu_backend.h"
#include "policy/policy_program.h"
#include "runtime/policy_setup.h"
#include "runtime_flags.h"
#include "status_line.h"
#ifdef KASCADE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/model/cuda_model.h"
#endif

namespace kascade::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct E2eArgs {
  std::string model;  // empty: the built-in Llama-3.1-8B config
  std::string lengths = "32k,128k";
  std::string batches = "1,8/1,4";
  std::string policies = "dense,kascade";
  double topk_fraction = 0.10;
  int64_t k_min = 128;
  std::string anchors = "0,2,8,13,14";
  std::string calibration;
  int32_t decode_steps = 64;
  int32_t chunk = 2048;
  int32_t page_size = 128;  // as RuntimeOptions (the TMA prefill kernels need pages of >= 128 keys)
  int32_t cuda_device = 0;
  std::string dtype = "bf16";
  uint64_t seed = 0;
  bool no_cuda_graph = false;
  bool pipelined_decode = true;
  bool small_m_linear = false;
  bool programmatic_launch = false;
  bool no_warmup = false;
  std::string json;
};

// The device's free and total memory (0, 0 without CUDA).
struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
Result<MemoryInfo> memory_info(int32_t device) {
#ifdef KASCADE_HAVE_CUDA
  KC_RETURN_IF_ERROR(cuda::cuda_device_usable(device).with_context("kascade bench e2e"));
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return internal_error("kascade bench e2e: cudaSetDevice(", device, "): ", cudaGetErrorString(e));
  KC_ASSIGN_OR_RETURN(const cuda::DeviceMemoryInfo info, cuda::device_memory_info());
  return MemoryInfo{info.free_bytes, info.total_bytes};
#else
  (void)device;
  return unsupported("kascade bench e2e needs a build with CUDA (-DKASCADE_CUDA=ON) and a GPU");
#endif
}

std::string device_name(int32_t device) {
#ifdef KASCADE_HAVE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) return prop.name;
  (void)cudaGetLastError();
#else
  (void)device;
#endif
  return "unknown";
}

Result<std::vector<int32_t>> parse_anchor_list(const std::string& text) {
  std::vector<int32_t> anchors;
  for (const std::string& part : split_list(text)) {
    KC_CHECK_ARG(part.find_first_not_of("0123456789") == std::string::npos && part.size() <= 6, "--anchors '", text,
                 "': '", part, "' is not a layer index");
    anchors.push_back(std::stoi(part));
  }
  return anchors;
}

Result<AttentionOptions> attention_for(const std::string& policy, const E2eArgs& a) {
  AttentionOptions o;
  o.policy = policy;
  o.topk_fraction = a.topk_fraction;
  o.k_min = a.k_min;
  if (policy::policy_uses_schedule(policy)) {
    if (!a.calibration.empty()) {
      o.calibration_file = a.calibration;
    } else {
      KC_ASSIGN_OR_RETURN(o.anchors, parse_anchor_list(a.anchors));
    }
  }
  return o;
}

// The built-in Llama-3.1-8B config.json in a directory of this process (two benches may run at once),
// removed when the bench ends.
class BuiltInConfigDir {
 public:
  BuiltInConfigDir() : dir_(fs::temp_directory_path() / ("kascade_bench_e2e_llama31_8b_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << llama31_8b_config_json();
  }
  ~BuiltInConfigDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  BuiltInConfigDir(const BuiltInConfigDir&) = delete;
  BuiltInConfigDir& operator=(const BuiltInConfigDir&) = delete;
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

// Random prompts of `length` ids in [0, vocab), one stream per sequence.
std::vector<std::vector<int32_t>> random_prompts(int32_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
  for (int32_t s = 0; s < batch; ++s) {
    std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(s));
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
    prompts[s].resize(static_cast<size_t>(length));
    for (auto& t : prompts[s]) t = token(rng);
  }
  return prompts;
}

Status run_e2e(const E2eArgs& a) {
  KC_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, parse_token_counts(a.lengths));
  KC_ASSIGN_OR_RETURN(const auto batches, parse_batch_groups(a.batches, lengths.size()));
  const std::vector<std::string> policies = split_list(a.policies);
  KC_CHECK_ARG(!policies.empty(), "--policies: no policy given");
  KC_CHECK_ARG(a.decode_steps >= 1, "--decode-steps ", a.decode_steps, " must be >= 1");
  const std::vector<BenchCell> cells = bench_matrix(policies, lengths, batches);
  KC_ASSIGN_OR_RETURN(const MemoryInfo before, memory_info(a.cuda_device));

  // The model: the built-in config in a temporary directory unless --model names one.
  std::optional<BuiltInConfigDir> built_in;
  std::string model_path = a.model;
  if (model_path.empty()) model_path = built_in.emplace().path();
  KC_ASSIGN_OR_RETURN(const ModelConfig config, load_model_config(model_path));
  KC_ASSIGN_OR_RETURN(const DType dtype, parse_dtype(a.dtype));
  int64_t longest = 0;
  int32_t widest = 1;
  for (const BenchCell& c : cells) {
    longest = std::max(longest, c.prompt_tokens);
    widest = std::max(widest, c.batch);
  }
  const int64_t max_context = longest + a.decode_steps + 1;

  // Memory first: every cell must fit in what is free now (the weights are not resident yet).
  std::vector<size_t> planned(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    KC_ASSIGN_OR_RETURN(const runtime::GpuMemoryPlan plan,
                        bench_memory_plan(config, dtype, cells[i], a.decode_steps, a.chunk, a.page_size, max_context));
    planned[i] = plan.total();
    Status fits = runtime::check_gpu_memory(plan, 0, before.free_bytes,
                                            cells[i].policy + " at batch " + std::to_string(cells[i].batch) + " x " +
                                                std::to_string(cells[i].prompt_tokens) + " tokens");
    if (!fits.ok()) return fits.with_context("kascade bench e2e, memory plan (nothing ran)");
  }

  RuntimeOptions o;
  o.model_path = model_path;
  o.device = Device::kCuda;
  o.cuda_device = a.cuda_device;
  o.cuda_dtype = dtype;
  o.max_batch = widest;
  o.dummy_weights = true;
  o.dummy_dtype = dtype;
  o.dummy_seed = a.seed;
  o.max_context = max_context;
  o.chunk_size = a.chunk;
  o.page_size = a.page_size;
  o.cuda_graph = !a.no_cuda_graph;
  o.pipelined_decode = a.pipelined_decode;
  o.small_m_linear = a.small_m_linear;
  o.programmatic_launch = a.programmatic_launch;
  KC_ASSIGN_OR_RETURN(o.attention, attention_for(policies.front(), a));
  std::fprintf(stderr, "kascade bench e2e: %s, generating dummy %s weights and uploading them...\n",
               device_name(a.cuda_device).c_str(), dtype_name(dtype));
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(o));
  std::fprintf(stderr, "%s\n", rt->describe().c_str());

  StatusLine status(true, 10.0);
  const auto bench_start = Clock::now();
  const auto elapsed = [&bench_start] { return std::chrono::duration<double>(Clock::now() - bench_start).count(); };
  std::vector<CellResult> results;
  std::string current_policy = policies.front();
  for (size_t i = 0; i < cells.size(); ++i) {
    const BenchCell& cell = cells[i];
    if (cell.policy != current_policy) {
      KC_ASSIGN_OR_RETURN(const AttentionOptions attention, attention_for(cell.policy, a));
      KC_ASSIGN_OR_RETURN(const runtime::PolicySetup setup, runtime::build_policy_config(config, attention));
      KC_ASSIGN_OR_RETURN(auto policy, make_policy(setup.config, make_cpu_backend()));
      KC_RETURN_IF_ERROR(rt->set_policy(std::move(policy)));
      current_policy = cell.policy;
    }
    const std::string what = "[" + std::to_string(i + 1) + "/" + std::to_string(cells.size()) + "] " + cell.policy +
                             ", batch " + std::to_string(cell.batch) + " x " + std::to_string(cell.prompt_tokens);
    GenerateOptions g;
    g.stop_at_eos = false;
    if (!a.no_warmup) {
      status.update(what + ": warm-up", elapsed(), false);
      g.max_new_tokens = 4;
      const int64_t warm_length = std::min<int64_t>(cell.prompt_tokens, 2 * static_cast<int64_t>(a.chunk));
      KC_ASSIGN_OR_RETURN(const GenerateResult warm,
                          rt->generate(random_prompts(cell.batch, warm_length, config.vocab_size, a.seed + 1), g));
      (void)warm;
    }
    size_t peak = 0;
    const auto sample_memory = [&peak, &a] {
      auto info = memory_info(a.cuda_device);
      if (info.ok()) peak = std::max(peak, info->total_bytes - info->free_bytes);
    };
    GenerateCallbacks callbacks;
    callbacks.on_prefill_progress = [&](const PrefillProgress& p) {
      sample_memory();
      char text[160];
      std::snprintf(text, sizeof(text), ": prefill %.0f%% (%.0f tok/s, ETA %s)",
                    100.0 * static_cast<double>(p.done_tokens) / static_cast<double>(std::max<int64_t>(p.total_tokens, 1)),
                    p.tokens_per_s(), format_duration(p.eta_s()).c_str());
      status.update(what + text, elapsed(), false);
    };
    int64_t tokens_seen = 0;
    callbacks.on_token = [&](int32_t, int32_t) {
      ++tokens_seen;
      if (tokens_seen % (16 * cell.batch) == 0) {
        sample_memory();
        status.update(what + ": decode " + std::to_string(tokens_seen / cell.batch) + " / " +
                          std::to_string(a.decode_steps + 1) + " tokens per sequence",
                      elapsed(), false);
      }
    };
    g.max_new_tokens = a.decode_steps + 1;  // the first comes from the prefill
    KC_ASSIGN_OR_RETURN(const GenerateResult result,
                        rt->generate(random_prompts(cell.batch, cell.prompt_tokens, config.vocab_size, a.seed + 2 + i),
                                     g, callbacks));
    sample_memory();
    CellResult r;
    r.cell = cell;
    r.ttft_ms = result.stats.prefill_s * 1e3;
    r.decode_tokens_per_s = result.stats.decode_tokens_per_s();
    r.decode_steps = result.stats.decode_steps;
    r.decode_ms_per_step = r.decode_steps > 0 ? result.stats.decode_s * 1e3 / static_cast<double>(r.decode_steps) : 0;
    r.decode_gpu_ms_per_step =
        r.decode_steps > 0 ? result.stats.decode_timings.device_s * 1e3 / static_cast<double>(r.decode_steps) : 0;
    r.planned_bytes = planned[i];
    r.measured_peak_bytes = peak;
    r.decode_path = format_cuda_graph_line(result.stats.cuda_graph);
    results.push_back(r);
    char done[200];
    std::snprintf(done, sizeof(done), ": TTFT %.1f ms, decode %.1f tok/s", r.ttft_ms, r.decode_tokens_per_s);
    status.update(what + done, elapsed(), true);
  }
  const std::vector<CellRatio> ratios = bench_ratios(results);
  std::printf("%s", format_bench_table(results, ratios).c_str());
  std::fflush(stdout);
  if (!a.json.empty()) {
    nlohmann::json j = bench_json(results, ratios);
    j["gpu"] = device_name(a.cuda_device);
    j["gpu_total_bytes"] = before.total_bytes;
    j["model"] = rt->describe();
    j["dtype"] = dtype_name(dtype);
    j["chunk"] = a.chunk;
    j["decode_steps"] = a.decode_steps;
    j["cuda_graph"] = !a.no_cuda_graph;
    j["pipelined_decode"] = a.pipelined_decode;
    j["small_m_linear"] = a.small_m_linear;
    j["programmatic_launch"] = a.programmatic_launch;
    j["topk_fraction"] = a.topk_fraction;
    j["k_min"] = a.k_min;
    j["anchors"] = a.calibration.empty() ? a.anchors : "from " + a.calibration;
    std::ofstream out(a.json);
    if (!out) return io_error("cannot write '", a.json, "'");
    out << j.dump(2) << "\n";
    if (!out) return io_error("writing '", a.json, "' failed");
  }
  return ok_status();
}

}  // namespace

int run_bench(int argc, char** argv) {
  CLI::App app{"Benchmarks of the runtime"};
  app.name("kascade bench");
  app.require_subcommand(1);
  E2eArgs a;
  CLI::App* e2e = app.add_subcommand(
      "e2e", "end-to-end: Llama-3.1-8B shape, dummy weights on the GPU, TTFT and decode tokens/s per policy");
  e2e->add_option("-m,--model", a.model, "model directory or config.json (default: built-in Llama-3.1-8B config)");
  e2e->add_option("--lengths", a.lengths, "prompt lengths, comma-separated (k = x1024)");
  e2e->add_option("--batches", a.batches, "batch sizes: one comma-separated list per length, '/'-separated");
  e2e->add_option("--policies", a.policies, "attention policies, comma-separated (dense first for the ratios)");
  e2e->add_option("--topk-fraction", a.topk_fraction, "Top-k fraction rho of the sparse policies");
  e2e->add_option("--k-min", a.k_min, "minimum Top-k budget")->check(CLI::NonNegativeNumber);
  e2e->add_option("--anchors", a.anchors, "kascade anchors (identity head maps) when no --calibration is given");
  e2e->add_option("--calibration", a.calibration, "calibration file of the kascade variants (instead of --anchors)");
  e2e->add_option("--decode-steps", a.decode_steps, "decode steps measured per cell")->check(CLI::PositiveNumber);
  e2e->add_option("--chunk", a.chunk, "prefill chunk: tokens per sequence per forward call")->check(CLI::PositiveNumber);
  e2e->add_option("--page-size", a.page_size, "KV cache page size")->check(CLI::PositiveNumber);
  e2e->add_option("--cuda-device", a.cuda_device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  e2e->add_option("--dtype", a.dtype, "weights, activations and KV cache: bf16 | f16");
  e2e->add_option("--seed", a.seed, "seed of the dummy weights and the random prompts");
  e2e->add_flag("--no-cuda-graph", a.no_cuda_graph, "decode op by op instead of replaying CUDA graphs");
  e2e->add_flag("--pipelined-decode,!--no-pipelined-decode", a.pipelined_decode,
                "launch decode step t + 1 before reading step t's tokens (the default); --no-pipelined-decode: "
                "step by step");
  e2e->add_flag("--small-m-linear", a.small_m_linear,
                "decode linear layers (<= 8 rows) through the weight-streaming kernel instead of cuBLAS");
  e2e->add_flag("--pdl", a.programmatic_launch,
                "launch the forward pass's own kernels with programmatic dependent launch (sm_90+)");
  e2e->add_flag("--no-warmup", a.no_warmup, "skip the short warm-up run before each cell");
  e2e->add_option("--json", a.json, "also write the results as JSON to this file");
  KernelBench prefill, decode;
  add_kernel_benches(app, prefill, decode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const Status s = prefill.command->parsed()  ? run_kernel_bench(prefill)
                   : decode.command->parsed() ? run_kernel_bench(decode)
                                              : run_e2e(a);
  if (!s.ok()) {
    std::fprintf(stderr, "kascade bench: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kascade::tools
