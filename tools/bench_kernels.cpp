// tools/bench_kernels.cpp — `kascade bench prefill` / `kascade bench decode` (bench_kernels.h).
#include "bench_kernels.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "subprocess.h"

namespace kascade::tools {

namespace fs = std::filesystem;

namespace {

struct OptionSpec {
  const char* flag;
  const char* help;
};

void register_options(KernelBench& b, CLI::App* cmd, const std::vector<OptionSpec>& specs) {
  for (const OptionSpec& spec : specs) cmd->add_option(spec.flag, b.values[spec.flag], spec.help);
  cmd->add_option("--out", b.out, "folder of ours.json, cudnn.json and table.md");
  cmd->add_flag("--no-cudnn", b.no_cudnn, "skip the cuDNN baseline (no PyTorch): our JSON only, no ratios");
  b.command = cmd;
}

// The forwarded options (all, or only those in `only`) as flag value pairs, in flag order.
std::vector<std::string> forwarded(const KernelBench& b, const std::vector<std::string>* only) {
  std::vector<std::string> args;
  for (const auto& [flag, value] : b.values) {
    if (value.empty()) continue;
    if (only != nullptr && std::find(only->begin(), only->end(), flag) == only->end()) continue;
    args.push_back(flag);
    args.push_back(value);
  }
  return args;
}

Status run_step(const std::string& what, const std::string& program, const std::vector<std::string>& args,
                const std::string& stdout_file = "") {
  std::fprintf(stderr, "kascade bench: %s: %s", what.c_str(), program.c_str());
  for (const std::string& a : args) std::fprintf(stderr, " %s", a.c_str());
  std::fprintf(stderr, "\n");
  KC_ASSIGN_OR_RETURN(const int code, run_program(program, args, stdout_file));
  if (code != 0) return internal_error(what, " exited with status ", code);
  return ok_status();
}

}  // namespace

void add_kernel_benches(CLI::App& bench, KernelBench& prefill, KernelBench& decode) {
  prefill.name = "prefill";
  prefill.binary = "kascade_bench_prefill";
  prefill.cudnn_script = "bench/prefill/cudnn_prefill.py";
  prefill.report_script = "bench/prefill/prefill_report.py";
  prefill.cudnn_flags = {"--lens", "--dtypes", "--reps"};
  prefill.out = "bench-prefill";
  register_options(
      prefill,
      bench.add_subcommand("prefill", "prefill kernels (issue 6): dense, LSE, selection, anchors, reuse beside cuDNN "
                                      "SDPA causal prefill; Llama-3.1-8B shape"),
      {{"--lens", "sequence lengths, comma-separated (binary default 8192,32768,65536,131072)"},
       {"--dtypes", "f16,bf16"},
       {"--layouts", "contiguous,paged"},
       {"--page", "page size in keys of the paged layout"},
       {"--variants", "kernel families: mma, wgmma, ws, ws_tma, auto"},
       {"--kernels", "dense, lse, select, anchor0, anchor, reuse"},
       {"--reps", "timed repetitions (median reported)"}});
  decode.name = "decode";
  decode.binary = "kascade_bench_decode";
  decode.cudnn_script = "bench/cudnn_decode.py";
  decode.report_script = "bench/decode_report.py";
  decode.cudnn_flags = {"--shapes", "--dtypes", "--batches", "--lens", "--reps", "--mem-limit-gb", "--flush", "--warmup-ms"};
  decode.out = "bench-decode";
  register_options(
      decode,
      bench.add_subcommand("decode", "decode kernels (issue 5): dense split-KV, anchors, reuse, Top-k beside the "
                                     "read-bandwidth roof and cuDNN SDPA decode"),
      {{"--shapes", "llama (H 32, G 8, d 128), d64"},
       {"--dtypes", "f16,bf16"},
       {"--batches", "batch sizes, comma-separated"},
       {"--lens", "context lengths, comma-separated"},
       {"--layouts", "contiguous,paged"},
       {"--reps", "replays timed (median reported)"},
       {"--mem-limit-gb", "skip configurations needing more device memory"},
       {"--topk", "Top-k kernels of the anchors: auto (the plan's choice), chunked or rows"},
       {"--pool-fusion", "the anchors' pooling and Top-k: separate (two kernels, the default) or fused (one)"},
       {"--flush", "L2 flush before each timed replay: write (default; leaves dirty lines), read (clean "
                   "lines, as after a decode step's weight-streaming GEMMs) or none"},
       {"--warmup-ms", "untimed replays before each op's timed ones, at least this many milliseconds (default 50)"}});
}

Status run_kernel_bench(const KernelBench& b) {
  KC_ASSIGN_OR_RETURN(const std::string binary, find_sibling_binary(b.binary));
  std::error_code ec;
  fs::create_directories(b.out, ec);
  if (ec) return io_error("cannot create --out ", b.out, ": ", ec.message());
  const std::string ours = (fs::path(b.out) / "ours.json").string();
  const std::string cudnn = (fs::path(b.out) / "cudnn.json").string();
  const std::string table = (fs::path(b.out) / "table.md").string();
  std::vector<std::string> args = forwarded(b, nullptr);
  args.insert(args.end(), {"--json", ours});
  KC_RETURN_IF_ERROR(run_step(b.binary, binary, args));
  if (b.no_cudnn) {
    std::printf("kascade bench %s: our times in %s (--no-cudnn: no baseline, no ratios)\n", b.name.c_str(),
                ours.c_str());
    return ok_status();
  }
  KC_ASSIGN_OR_RETURN(const std::string cudnn_script, find_repo_file(b.cudnn_script));
  std::vector<std::string> cudnn_args = {cudnn_script};
  const std::vector<std::string> flags = forwarded(b, &b.cudnn_flags);
  cudnn_args.insert(cudnn_args.end(), flags.begin(), flags.end());
  cudnn_args.insert(cudnn_args.end(), {"--json", cudnn});
  Status s = run_step("the cuDNN baseline", "python3", cudnn_args);
  if (!s.ok()) {
    return s.with_context("the baseline needs PyTorch with cuDNN on a GPU (--no-cudnn runs our kernels alone)");
  }
  KC_ASSIGN_OR_RETURN(const std::string report_script, find_repo_file(b.report_script));
  KC_RETURN_IF_ERROR(run_step("the report", "python3", {report_script, ours, cudnn}, table));
  std::ifstream in(table);
  std::stringstream text;
  text << in.rdbuf();
  std::printf("%s", text.str().c_str());
  std::printf("\nkascade bench %s: %s, %s, %s\n", b.name.c_str(), ours.c_str(), cudnn.c_str(), table.c_str());
  return ok_status();
}

}  // namespace kascade::tools
