// tools/runtime_flags.cpp — the runtime flags shared by the CLI commands (runtime_flags.h).
#include "runtime_flags.h"

#include <string>

namespace kascade::tools {

void add_runtime_flags(CLI::App& app, RuntimeFlags& f) {
  app.add_option("-m,--model", f.model, "model directory (config.json, safetensors, tokenizer.json)")->required();
  app.add_option("--device", f.device, "where the model runs: cpu | cuda");
  app.add_option("--cuda-device", f.cuda_device, "CUDA device ordinal (--device cuda)")->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-dtype", f.cuda_dtype, "activation / weight / KV dtype on the GPU: bf16 | f16");
  app.add_option("--max-batch", f.max_batch, "most sequences per batch on the GPU (plans the attention backend)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--dummy-weights", f.dummy_weights, "random weights of the config's shapes instead of safetensors");
  app.add_option("--dummy-dtype", f.dummy_dtype, "dtype of dummy weights: f32, f16, bf16");
  app.add_option("--dummy-seed", f.dummy_seed, "seed of the dummy weights");
  app.add_option("--max-context", f.max_context, "longest prompt + generation (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--chunk", f.chunk, "prefill chunk: tokens per sequence per forward call")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-cuda-graph", f.no_cuda_graph,
               "run every decode step op by op instead of replaying it as a CUDA graph (--device cuda)");
  app.add_flag("--pipelined-decode,!--no-pipelined-decode", f.pipelined_decode,
               "launch decode step t + 1 before reading step t's tokens (the default; the same tokens; "
               "RuntimeOptions::pipelined_decode); --no-pipelined-decode: step by step");
  app.add_flag("--small-m-linear", f.small_m_linear,
               "decode linear layers (<= 8 rows) through the weight-streaming kernel instead of cuBLAS "
               "(--device cuda; RuntimeOptions::small_m_linear)");
  app.add_flag("--pdl", f.programmatic_launch,
               "launch the forward pass's own kernels with programmatic dependent launch, each starting while its "
               "predecessor finishes (--device cuda, sm_90+; RuntimeOptions::programmatic_launch)");
}

void add_budget_flags(CLI::App& app, BudgetFlags& f) {
  app.add_option("--topk-fraction", f.topk_fraction, "Top-k fraction rho of the keys (DESIGN.md §2.1)");
  app.add_option("--k-min", f.k_min, "minimum Top-k budget")->check(CLI::NonNegativeNumber);
  app.add_option("--tile", f.tile, "prefill tile size T")->check(CLI::PositiveNumber);
}

Result<RuntimeOptions> to_runtime_options(const RuntimeFlags& f, const BudgetFlags* budget) {
  RuntimeOptions o;
  o.model_path = f.model;
  KC_ASSIGN_OR_RETURN(o.device, parse_device(f.device));
  o.cuda_device = f.cuda_device;
  KC_ASSIGN_OR_RETURN(o.cuda_dtype, parse_dtype(f.cuda_dtype));
  o.max_batch = f.max_batch;
  o.dummy_weights = f.dummy_weights;
  KC_ASSIGN_OR_RETURN(o.dummy_dtype, parse_dtype(f.dummy_dtype));
  o.dummy_seed = f.dummy_seed;
  o.max_context = f.max_context;
  o.chunk_size = f.chunk;
  o.cuda_graph = !f.no_cuda_graph;
  o.pipelined_decode = f.pipelined_decode;
  o.small_m_linear = f.small_m_linear;
  o.programmatic_launch = f.programmatic_launch;
  if (budget != nullptr) {
    o.attention.topk_fraction = budget->topk_fraction;
    o.attention.k_min = budget->k_min;
    o.attention.tile_size = budget->tile;
  }
  return o;
}

std::string format_cuda_graph_line(const CudaGraphStats& stats) {
  std::string line = "decode: ";
  if (stats.captures + stats.replays > 0) {
    line += "CUDA graph, " + std::to_string(stats.captures) + " captured, " + std::to_string(stats.replays) +
            " replayed, " + std::to_string(stats.eager_steps) + " eager";
    if (stats.trace_mismatches > 0) line += ", " + std::to_string(stats.trace_mismatches) + " unexpected recaptures";
    if (!stats.eager_reason.empty()) line += " (then eager: " + stats.eager_reason + ")";
    return line;
  }
  line += "eager, " + std::to_string(stats.eager_steps) + " steps";
  if (!stats.eager_reason.empty()) line += " (" + stats.eager_reason + ")";
  return line;
}

}  // namespace kascade::tools
