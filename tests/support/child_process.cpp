#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace comm::testing {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::filesystem::path unique_path(const char* stem) {
  static std::mt19937_64 random{std::random_device{}()};
  return std::filesystem::temp_directory_path() /
         (std::string(stem) + "-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> environment)
    : output_path_(unique_path("comm-test-output")) {
  // Build everything before fork: only async-signal-safe calls are allowed after it.
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    auto name = text.substr(0, text.find('='));
    if (!environment.contains(name)) entries.push_back(text);
  }
  for (auto& [name, value] : environment) entries.push_back(name + "=" + value);
  std::vector<char*> env_pointers, arg_pointers;
  for (auto& entry : entries) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  for (auto& arg : argv) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  int output = ::open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (output < 0) throw std::runtime_error("cannot create " + output_path_.string());

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);  // its own process group, so the destructor can kill its children too
    ::dup2(output, STDOUT_FILENO);
    ::dup2(output, STDERR_FILENO);
    ::execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  ::close(output);
}

ChildProcess::~ChildProcess() {
  if (!exit_code_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ignored;
  std::filesystem::remove(output_path_, ignored);
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exit_code_) {
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = decode_status(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_code_;
}

void ChildProcess::signal(int number) const {
  if (!exit_code_) ::kill(pid_, number);
}

std::string ChildProcess::output() const {
  std::ifstream in(output_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TemporaryDirectory::TemporaryDirectory() : path_(unique_path("comm-test")) {
  std::filesystem::create_directories(path_);
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string program_path(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr)
    throw std::runtime_error(std::string(variable) + " is not set; run the tests through meson test");
  return value;
}

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string pid_field, name, state;
  stat >> pid_field >> name >> state;
  return state != "Z" && state != "X";
}

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace comm::testing
