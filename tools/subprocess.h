// tools/subprocess.h — running other programs from the CLI without a shell (arguments passed as
// they are) and finding the repository's files and the benchmark binaries beside the kascade
// executable. Used by python_script.cpp (plots) and cmd_bench_kernels.cpp (`kascade bench prefill`
// / `decode`); tested by tests/scripts/test_bench_kernels.sh and the commands that plot.
#pragma once

#include <string>
#include <vector>

#include "kascade/status.h"

namespace kascade::tools {

// The repository file at `relative` (e.g. "bench/prefill/prefill_report.py"): under KASCADE_REPO_DIR
// when that is set, else in up to four folders above the kascade executable, else under the working
// directory; NotFound names the places.
Result<std::string> find_repo_file(const std::string& relative);

// The executable `name` built beside the CLI: the kascade executable's folder, then the build tree's
// bench/ and bench/prefill/ folders next to it; NotFound names the places.
Result<std::string> find_sibling_binary(const std::string& name);

// Runs `program args...` (a path, or a name looked up in PATH) and waits; stdout goes to
// `stdout_file` when it is not empty (created or truncated), else to ours. The exit status, or an
// error when the program cannot start or does not exit normally.
Result<int> run_program(const std::string& program, const std::vector<std::string>& args,
                        const std::string& stdout_file = "");

}  // namespace kascade::tools
