// tools/python_script.h — runs the repository's plotting scripts (scripts/*.py) from the CLI:
// finds the script (KASCADE_SCRIPTS_DIR, else a scripts/ folder above the kascade executable, else
// ./scripts) and runs it with python3 (no shell: arguments are passed as they are).
// The scripts exit with 3 when matplotlib is missing; callers report that and carry on.
// Used by `kascade calibrate --plots` and `kascade eval`; exercised by running those commands.
#pragma once

#include <string>
#include <vector>

#include "kascade/status.h"

namespace kascade::tools {

// The path of scripts/<name>, or NotFound naming the places looked in.
Result<std::string> find_script(const std::string& name);

enum class ScriptOutcome { kOk, kMissingMatplotlib, kFailed };
struct ScriptRun {
  ScriptOutcome outcome = ScriptOutcome::kFailed;
  int exit_code = -1;
  std::string message;  // why it failed, for kFailed
};

// Runs `python3 scripts/<name> args...` (its stdout/stderr go to ours).
ScriptRun run_python_script(const std::string& name, const std::vector<std::string>& args);

// Runs a plotting script and prints one line about it to stderr ("<who>: wrote ...",
// "<who>: matplotlib is not installed (pip install matplotlib); no plot written", or the failure).
// Returns whether the plot was written; never fails the command.
bool plot_with_script(const char* who, const std::string& name, const std::vector<std::string>& args,
                      const std::string& what);

}  // namespace kascade::tools
