// tools/runtime_flags.h — the runtime flags that `kascade generate`, `eval` and `calibrate` share
// (one definition, so the commands cannot drift apart): the model, the device (--device cpu|cuda
// and its CUDA settings), dummy weights, the context and prefill chunk, and the Top-k budget.
// add_*_flags registers them on a CLI11 app; to_runtime_options turns them into RuntimeOptions
// (validating the dtypes and the device name). Used by tools/cmd_*.cpp; the library behind them is
// tested in tests/unit/runtime/.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <string>

#include "kascade/runtime.h"
#include "kascade/status.h"
#include "runtime/policy_setup.h"

namespace kascade::tools {

struct RuntimeFlags {
  std::string model;
  std::string device = "cpu";
  int32_t cuda_device = 0;
  std::string cuda_dtype = "bf16";
  int32_t max_batch = 8;
  bool dummy_weights = false;
  std::string dummy_dtype = "bf16";
  uint64_t dummy_seed = 0;
  int64_t max_context = 0;
  int32_t chunk = 512;
  bool no_cuda_graph = false;
  bool pipelined_decode = true;
  bool small_m_linear = false;
  bool programmatic_launch = false;
};

struct BudgetFlags {
  double topk_fraction = 0.10;
  int64_t k_min = 128;
  int32_t tile = 32;
};

// -m/--model (required), --device, --cuda-device, --cuda-dtype, --max-batch, --dummy-weights,
// --dummy-dtype, --dummy-seed, --max-context, --chunk, --no-cuda-graph, --[no-]pipelined-decode, --small-m-linear.
void add_runtime_flags(CLI::App& app, RuntimeFlags& flags);
// --topk-fraction, --k-min, --tile.
void add_budget_flags(CLI::App& app, BudgetFlags& flags);

// model_dir_of, default_calibration_file: src/runtime/policy_setup.h (the C interface uses them too).
using runtime::default_calibration_file;
using runtime::model_dir_of;

// One line saying how the decode steps ran on the GPU ("decode: CUDA graph, 2 captured, 61
// replayed, 1 eager" or "decode: eager (<reason>)"), for the closing report of --device cuda.
std::string format_cuda_graph_line(const CudaGraphStats& stats);

// RuntimeOptions from the flags (attention policy left at its default; the budget when given).
Result<RuntimeOptions> to_runtime_options(const RuntimeFlags& flags, const BudgetFlags* budget);

}  // namespace kascade::tools
