// tools/main.cpp — `kascade <command> [options]`: dispatches to the subcommands of tools/commands.h.
// `kascade --help` lists them; `kascade <command> --help` shows a command's options.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "commands.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

const Command kCommands[] = {
    {"generate", "generate text from a Hugging Face Llama / Qwen3 checkpoint with any attention policy",
     kascade::tools::run_generate},
    {"tasks", "dump samples of the long-context task suite as JSONL (training and evaluation data)", kascade::tools::run_tasks},
    {"calibrate", "collect cross-layer statistics on a dev set, choose Kascade anchors and head maps",
     kascade::tools::run_calibrate},
    {"eval", "accuracy and keys attended of attention policies on the long-context task suite",
     kascade::tools::run_eval},
    {"bench", "benchmarks on the GPU: `kascade bench e2e` (Llama-3.1-8B shape, TTFT and decode speed per policy), "
              "`kascade bench prefill` / `decode` (the kernels beside cuDNN)",
     kascade::tools::run_bench},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: kascade <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`kascade <command> --help` shows the options of a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name == c.name) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "kascade: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
