// tools/python_script.cpp — locating and running scripts/*.py (python_script.h).
#include "python_script.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace kascade::tools {

namespace fs = std::filesystem;

Result<std::string> find_script(const std::string& name) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("KASCADE_SCRIPTS_DIR")) candidates.push_back(fs::path(dir) / name);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path();
    for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
      candidates.push_back(dir / "scripts" / name);
      if (dir == dir.root_path()) break;
    }
  }
  candidates.push_back(fs::current_path(ec) / "scripts" / name);
  std::string looked;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return p.string();
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  return not_found("cannot find scripts/", name, " (looked in ", looked, "; set KASCADE_SCRIPTS_DIR)");
}

ScriptRun run_python_script(const std::string& name, const std::vector<std::string>& args) {
  ScriptRun run;
  Result<std::string> script = find_script(name);
  if (!script.ok()) {
    run.message = script.status().message();
    return run;
  }
  std::vector<std::string> argv_storage = {"python3", *script};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ);
  if (spawned != 0) {
    run.message = "cannot start python3 (is it installed?)";
    return run;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    run.message = "python3 " + name + " did not exit normally";
    return run;
  }
  run.exit_code = WEXITSTATUS(status);
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
