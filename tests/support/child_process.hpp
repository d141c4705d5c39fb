// Test support: child processes that can never outlive the test that started them, and
// scratch directories that are removed afterwards.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace comm::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the test's environment plus `environment`; stdout and stderr
  // go to a file read back by output().
  ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> environment = {});
  ~ChildProcess();  // SIGKILLs the whole process group if still running, then reaps it
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code (128 + signal for a signal death), or nothing if still running at the timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  void signal(int number) const;
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path output_path_;
};

class TemporaryDirectory {
 public:
  TemporaryDirectory();
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Where the build put a program (from the environment meson's test() passes, e.g. COMMRUN).
std::string program_path(const char* variable);

// True while a process with this pid exists (and is not a zombie).
bool process_alive(pid_t pid);

// A port that was free a moment ago (bound to 0, read back, released).
std::uint16_t free_port();

}  // namespace comm::testing
