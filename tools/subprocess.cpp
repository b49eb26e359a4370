// tools/subprocess.cpp — posix_spawn without a shell, and the file lookups of subprocess.h.
#include "subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace kascade::tools {

namespace fs = std::filesystem;

namespace {

// The kascade executable's folder (empty when /proc/self/exe cannot be read).
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

Result<std::string> first_file(const std::vector<fs::path>& candidates, const std::string& what,
                               const std::string& hint) {
  std::error_code ec;
  std::string looked;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return p.string();
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  return not_found("cannot find ", what, " (looked in ", looked, "; ", hint, ")");
}

}  // namespace

Result<std::string> find_repo_file(const std::string& relative) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("KASCADE_REPO_DIR")) candidates.push_back(fs::path(dir) / relative);
  fs::path dir = executable_dir();
  for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
    candidates.push_back(dir / relative);
    if (dir == dir.root_path()) break;
  }
  std::error_code ec;
  candidates.push_back(fs::current_path(ec) / relative);
  return first_file(candidates, relative, "set KASCADE_REPO_DIR to the repository's folder");
}

Result<std::string> find_sibling_binary(const std::string& name) {
  const fs::path dir = executable_dir();
  std::vector<fs::path> candidates;
  if (!dir.empty()) {
    candidates = {dir / name, dir.parent_path() / "bench" / name, dir.parent_path() / "bench" / "prefill" / name};
  }
  return first_file(candidates, name, "it is built with the CUDA backend: cmake -DKASCADE_CUDA=ON");
}

Result<int> run_program(const std::string& program, const std::vector<std::string>& args,
                        const std::string& stdout_file) {
  std::vector<std::string> argv_storage = {program};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const bool has_slash = program.find('/') != std::string::npos;
  const int spawned = has_slash ? posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ)
                                : posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return io_error("cannot start ", program, " (", std::strerror(spawned), ")");
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    return internal_error(program, " did not exit normally");
  }
  return WEXITSTATUS(status);
}

}  // namespace kascade::tools
