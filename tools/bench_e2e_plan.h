// tools/bench_e2e_plan.h — the host-side half of `kascade bench e2e` (tools/cmd_bench.cpp), kept
// apart so it is tested without a GPU: the flag grammar (prompt lengths "32k,128k"; batch lists per
// length "1,8/1,4"), the matrix of cells (policy × prompt length × batch), the built-in
// Llama-3.1-8B config.json, the device memory plan of one cell (runtime/gpu_memory_plan.h: weights,
// paged KV cache, activations of a prefill chunk, sampler, reserve), and the results: the table,
// the kascade/dense ratios and the JSON document.
// Tested by tests/unit/tools/test_bench_e2e_plan.cpp (hand-computed sizes and ratios, refusals).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "kascade/model_config.h"
#include "kascade/status.h"
#include "runtime/gpu_memory_plan.h"

namespace kascade::tools {

// "32768", "32k" / "32K" (x 1024), "1m" / "1M" (x 1024^2); >= 1.
Result<int64_t> parse_token_count(const std::string& text);
// Comma-separated token counts: "32k,128k".
Result<std::vector<int64_t>> parse_token_counts(const std::string& text);
// Batch lists: one comma-separated list per prompt length, separated by '/' ("1,8/1,4"); a single
// list applies to every length. Every batch >= 1.
Result<std::vector<std::vector<int32_t>>> parse_batch_groups(const std::string& text, size_t num_lengths);
// Comma-separated names or integers ("dense,kascade", "0,2,8,13,14").
std::vector<std::string> split_list(const std::string& text);

// The config.json of Llama-3.1-8B (32 layers, 32 / 8 heads of dim 128, hidden 4096, FFN 14336,
// vocab 128256, llama3 RoPE), which `bench e2e` runs with dummy weights.
std::string llama31_8b_config_json();

struct BenchCell {
  std::string policy;
  int64_t prompt_tokens = 0;
  int32_t batch = 0;
};
// Policies outermost (one runtime policy at a time), then lengths, then batches, in flag order.
std::vector<BenchCell> bench_matrix(const std::vector<std::string>& policies, const std::vector<int64_t>& lengths,
                                    const std::vector<std::vector<int32_t>>& batches);

// The device memory a cell plans (what CudaSession::create checks), sampler CUB scratch excluded
// (inside the reserve): batch sequences of prompt + decode_steps + 1 tokens, prefill chunks of
// `chunk` tokens per sequence, one logit row per sequence.
Result<runtime::GpuMemoryPlan> bench_memory_plan(const ModelConfig& config, DType act, const BenchCell& cell,
                                                 int64_t decode_steps, int32_t chunk, int32_t page_size,
                                                 int64_t max_context);

struct CellResult {
  BenchCell cell;
  double ttft_ms = 0;                   // prefill of the batch up to the first sampled tokens
  double decode_tokens_per_s = 0;       // tokens of all sequences per second over the decode steps
  double decode_ms_per_step = 0;       // wall clock
  double decode_gpu_ms_per_step = 0;   // the device's share (CUDA events from each step's first
                                       // upload to its last download); the rest is host time
  int64_t decode_steps = 0;
  size_t planned_bytes = 0;             // GpuMemoryPlan::total() of the cell
  size_t measured_peak_bytes = 0;       // largest (total - free) seen during the run (cudaMemGetInfo)
  std::string decode_path;              // tools/runtime_flags.h format_cuda_graph_line
};

struct CellRatio {
  std::string policy;  // the non-dense policy
  int64_t prompt_tokens = 0;
  int32_t batch = 0;
  double ttft_speedup = 0;    // dense TTFT / policy TTFT
  double decode_speedup = 0;  // policy decode tokens/s / dense decode tokens/s
};
// One ratio per non-dense result whose (length, batch) has a dense result.
std::vector<CellRatio> bench_ratios(const std::vector<CellResult>& results);

// The human-readable table (one row per cell, then the ratios) and the JSON document.
std::string format_bench_table(const std::vector<CellResult>& results, const std::vector<CellRatio>& ratios);
nlohmann::json bench_json(const std::vector<CellResult>& results, const std::vector<CellRatio>& ratios);

}  // namespace kascade::tools
