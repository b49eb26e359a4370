// tools/commands.h — the subcommands of the `kascade` CLI. Each lives in its own tools/cmd_<name>.cpp,
// parses its own options (CLI11) and returns the process exit code: 0 on success, 1 on a failed
// Status (printed as "kascade <name>: error: <message>"), 2 on bad usage.
#pragma once

namespace kascade::tools {

int run_generate(int argc, char** argv);
int run_tasks(int argc, char** argv);
int run_calibrate(int argc, char** argv);
int run_eval(int argc, char** argv);
int run_bench(int argc, char** argv);

}  // namespace kascade::tools
