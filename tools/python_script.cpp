// tools/python_script.cpp — locating and running scripts/*.py (python_script.h).
#include "python_script.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "subprocess.h"

namespace kascade::tools {

Result<std::string> find_script(const std::string& name) {
  if (const char* dir = std::getenv("KASCADE_SCRIPTS_DIR")) {
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return find_repo_file("scripts/" + name);
}

ScriptRun run_python_script(const std::string& name, const std::vector<std::string>& args) {
  ScriptRun run;
  Result<std::string> script = find_script(name);
  if (!script.ok()) {
    run.message = script.status().message();
    return run;
  }
  std::vector<std::string> script_args = {*script};
  script_args.insert(script_args.end(), args.begin(), args.end());
  const Result<int> exit_code = run_program("python3", script_args);
  if (!exit_code.ok()) {
    run.message = exit_code.status().message();
    return run;
  }
  run.exit_code = *exit_code;
  run.outcome = run.exit_code == 0   ? ScriptOutcome::kOk
                : run.exit_code == 3 ? ScriptOutcome::kMissingMatplotlib
                                     : ScriptOutcome::kFailed;
  if (run.outcome == ScriptOutcome::kFailed)
    run.message = "python3 " + name + " exited with status " + std::to_string(run.exit_code);
  return run;
}

bool plot_with_script(const char* who, const std::string& name, const std::vector<std::string>& args,
                      const std::string& what) {
  const ScriptRun run = run_python_script(name, args);
  switch (run.outcome) {
    case ScriptOutcome::kOk: return true;
    case ScriptOutcome::kMissingMatplotlib:
      std::fprintf(stderr, "%s: matplotlib is not installed (pip install matplotlib); %s not written\n", who,
                   what.c_str());
      return false;
    case ScriptOutcome::kFailed:
      std::fprintf(stderr, "%s: warning: %s not written: %s\n", who, what.c_str(), run.message.c_str());
      return false;
  }
  return false;
}

}  // namespace kascade::tools
