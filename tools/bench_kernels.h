// tools/bench_kernels.h — `kascade bench prefill` and `kascade bench decode`: the kernel benchmarks
// of issues 6 and 5 as one command each. A subcommand runs the benchmark binary built beside the CLI
// (kascade_bench_prefill / kascade_bench_decode, CUDA builds), then the cuDNN SDPA baseline of the
// same device session (bench/prefill/cudnn_prefill.py / bench/cudnn_decode.py, PyTorch) and the
// report that joins both (prefill_report.py / decode_report.py) into OUT/table.md, which it prints.
// The options it is given are forwarded to the binary and, where the script takes them, to the
// baseline; the rest keep the binary's defaults. Tested by tests/scripts/test_bench_kernels.sh
// (a stand-in binary and scripts: what is run, with what, and the errors); the GPU figures are in
// docs/perf.md.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "kascade/status.h"

namespace kascade::tools {

struct KernelBench {
  std::string name;           // "prefill" | "decode"
  std::string binary;         // benchmark executable beside the CLI
  std::string cudnn_script;   // repository path of the cuDNN baseline
  std::string report_script;  // repository path of the report
  std::vector<std::string> cudnn_flags;  // the forwarded options the baseline takes
  std::map<std::string, std::string> values;  // option -> value, forwarded when not empty
  std::string out;
  bool no_cudnn = false;
  CLI::App* command = nullptr;
};

// The two benchmarks with their options, registered as subcommands of `bench`.
void add_kernel_benches(CLI::App& bench, KernelBench& prefill, KernelBench& decode);

// Runs one: the binary, the baseline unless no_cudnn, the report.
Status run_kernel_bench(const KernelBench& b);

}  // namespace kascade::tools
