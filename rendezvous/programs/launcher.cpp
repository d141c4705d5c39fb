// One poll loop watches every rank's stdout and stderr pipes and a signalfd; SIGCHLD tells it
// when a rank exits. Each rank runs in its own process group (so a rank's children are
// signalled with it) and dies with commrun (PR_SET_PDEATHSIG), so no process outlives a job.
#include "rendezvous/programs/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

extern char** environ;

#include "rendezvous/programs/file_descriptor.hpp"

namespace comm::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int number : kForwardedSignals) sigaddset(&set, number);
  sigaddset(&set, SIGCHLD);
  return set;
}

// One of a rank's output streams, re-emitted line by line with the rank's prefix.
struct OutputStream {
  FileDescriptor pipe;
  int target = STDOUT_FILENO;
  std::string pending;  // an unfinished line

  void emit(const std::string& prefix, std::string_view text) const {
    std::string line = prefix;
    line.append(text);
    line.push_back('\n');
    for (std::size_t done = 0; done < line.size();) {
      ssize_t n = ::write(target, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // our own output is gone (closed pipe): drop, keep supervising
      done += static_cast<std::size_t>(n);
    }
  }
  // Reads what is available; false at end of file.
  bool drain(const std::string& prefix) {
    char buffer[65536];
    ssize_t n = ::read(pipe.get(), buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      if (!pending.empty()) emit(prefix, pending);
      pending.clear();
      pipe.reset();
      return false;
    }
    pending.append(buffer, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t newline; (newline = pending.find('\n', start)) != std::string::npos; start = newline + 1) {
      emit(prefix, std::string_view(pending).substr(start, newline - start));
    }
    pending.erase(0, start);
    return true;
  }
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  std::optional<int> exit_status;
  OutputStream out, err;
  std::string prefix;
};

std::pair<FileDescriptor, FileDescriptor> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  return {FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

std::vector<std::string> environment_for(const RankSpec& spec) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    if (!spec.environment.contains(text.substr(0, text.find('=')))) entries.push_back(std::move(text));
  }
  for (const auto& [name, value] : spec.environment) entries.push_back(name + "=" + value);
  return entries;
}

void start(Rank& rank, const RankSpec& spec, const std::vector<std::string>& command, bool prefix) {
  auto [out_read, out_write] = make_pipe();
  auto [err_read, err_write] = make_pipe();
  // Everything exec needs is built before fork: after it only async-signal-safe calls are made.
  std::vector<std::string> environment = environment_for(spec);
  std::vector<char*> env_pointers, arg_pointers;
  for (auto& entry : environment) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> arguments = command;
  for (auto& argument : arguments) arg_pointers.push_back(argument.data());
  arg_pointers.push_back(nullptr);
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (spec.cpu >= 0) {
      cpu_set_t cpus;
      CPU_ZERO(&cpus);
      CPU_SET(spec.cpu, &cpus);
      ::sched_setaffinity(0, sizeof cpus, &cpus);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // commrun died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(out_write.get(), STDOUT_FILENO);
    ::dup2(err_write.get(), STDERR_FILENO);
    // Nothing of commrun's but stdio: not the store's listening socket, its clients, or the
    // other ranks' pipes.
    ::close_range(3, ~0U, 0);
    ::execvpe(arg_pointers[0], arg_pointers.data(), env_pointers.data());
    int error = errno;
    const char* reason = std::strerror(error);
    const char* head = "commrun: cannot execute '";
    (void)!::write(STDERR_FILENO, head, std::strlen(head));
    (void)!::write(STDERR_FILENO, arg_pointers[0], std::strlen(arg_pointers[0]));
    (void)!::write(STDERR_FILENO, "': ", 3);
    (void)!::write(STDERR_FILENO, reason, std::strlen(reason));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(error == ENOENT ? 127 : 126);
  }
  ::setpgid(pid, pid);  // also here, so signalling the group works before the child ran
  rank.rank = spec.rank;
  rank.pid = pid;
  rank.prefix = prefix ? "[" + std::to_string(spec.rank) + "] " : "";
  rank.out.pipe = std::move(out_read);
  rank.out.target = STDOUT_FILENO;
  rank.err.pipe = std::move(err_read);
  rank.err.target = STDERR_FILENO;
}

void signal_all(std::vector<Rank>& ranks, int number) {
  for (auto& rank : ranks) {
    if (!rank.exit_status) ::kill(-rank.pid, number);
  }
}

int decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void block_forwarded_signals() {
  sigset_t set = forwarded_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

// Shared-memory segments are unlinked as soon as every rank has mapped them, but a rank stopped
// (SIGTERM, SIGKILL) in the middle of setting them up leaves its own behind. libcomm names them
// after their creator's pid ("comm-<token>-<pid>-<rank>-<peer>", "comm-arena-<pid>-<n>"), and
// these ranks are dead: what carries their pids is theirs, and nobody else's.
void remove_shared_memory_of(const std::vector<Rank>& ranks) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("comm-", 0) != 0) continue;
    // The creator's pid is the third dash-separated field.
    std::size_t first = name.find('-'), second = name.find('-', first + 1), third = name.find('-', second + 1);
    if (second == std::string::npos || third == std::string::npos) continue;
    std::string pid = name.substr(second + 1, third - second - 1);
    for (const auto& rank : ranks) {
      if (pid == std::to_string(rank.pid)) ::shm_unlink(("/" + name).c_str());
    }
  }
}

// How long a rank that exited with a failing status waits to be named, in case a rank killed by
// a signal (the likely cause) is reaped meanwhile.
constexpr auto kBlameWindow = std::chrono::milliseconds(500);

int run(const LaunchPlan& plan) {
  sigset_t set = forwarded_set();
  FileDescriptor signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (signals.get() < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));

  std::vector<Rank> ranks(plan.ranks.size());
  ranks.reserve(plan.ranks.size() + static_cast<std::size_t>(plan.restarts));  // pointers into it stay valid
  std::vector<std::size_t> spec_of(plan.ranks.size());  // the RankSpec each process was started from
  for (std::size_t i = 0; i < spec_of.size(); ++i) spec_of[i] = i;
  int restarts_used = 0;
  bool continuing = plan.continue_on_failure || plan.restarts > 0;
  std::optional<int> first_failure;
  std::optional<Clock::time_point> kill_at;  // set once the job is being stopped
  // With dump_before_stop, a stop is SIGUSR2 first and the signal after that wait.
  std::optional<Clock::time_point> stop_at;
  int stop_signal = SIGTERM;
  auto stop_job = [&](int signal_number) {
    if (plan.dump_before_stop.count() > 0 && !kill_at) {
      if (!stop_at) {
        signal_all(ranks, SIGUSR2);
        stop_at = Clock::now() + plan.dump_before_stop;
        stop_signal = signal_number;
      }
      return;
    }
    signal_all(ranks, signal_number);
    if (!kill_at) kill_at = Clock::now() + plan.grace_period;
  };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    try {
      start(ranks[i], plan.ranks[i], plan.command, plan.prefix_output);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "commrun: cannot start rank %d: %s\n", plan.ranks[i].rank, error.what());
      ranks.resize(i);
      first_failure = 1;
      stop_job(SIGTERM);
      break;
    }
  }

  auto running = [&] {
    for (auto& rank : ranks) {
      if (!rank.exit_status) return true;
    }
    return false;
  };
  std::optional<Clock::time_point> drain_until;  // after the last exit: wait briefly for output
  const Rank* culprit = nullptr;                 // the failed rank to name, once it is decided
  bool culprit_signalled = false;
  std::optional<Clock::time_point> blame_by;  // when a rank that exited with a status is named
  while (true) {
    bool open_pipes = false;
    std::vector<pollfd> watched{{signals.get(), POLLIN, 0}};
    std::vector<OutputStream*> streams;
    for (auto& rank : ranks) {
      for (OutputStream* stream : {&rank.out, &rank.err}) {
        if (stream->pipe.get() < 0) continue;
        watched.push_back({stream->pipe.get(), POLLIN, 0});
        streams.push_back(stream);
        open_pipes = true;
      }
    }
    if (!running()) {
      if (!open_pipes) break;
      // Output still open after every rank exited: a grandchild holds it. Do not wait forever.
      if (!drain_until) drain_until = Clock::now() + std::chrono::seconds(2);
      if (Clock::now() >= *drain_until) break;
    }
    int timeout_ms = culprit != nullptr ? 20 : 200;  // deciding whom to name: look again soon
    if (::poll(watched.data(), watched.size(), timeout_ms) < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (std::size_t i = 1; i < watched.size(); ++i) {
      if (watched[i].revents == 0) continue;
      for (auto& rank : ranks) {
        if (&rank.out == streams[i - 1] || &rank.err == streams[i - 1]) streams[i - 1]->drain(rank.prefix);
      }
    }
    if (watched[0].revents != 0) {
      signalfd_siginfo info{};
      while (::read(signals.get(), &info, sizeof info) == sizeof info) {
        int number = static_cast<int>(info.ssi_signo);
        if (number == SIGCHLD) continue;  // reaped below
        bool stopping = number == SIGINT || number == SIGTERM || number == SIGHUP || number == SIGQUIT;
        if (stopping && plan.dump_before_stop.count() > 0) {
          stop_job(number);
          continue;
        }
        signal_all(ranks, number);
        if (stopping && !kill_at) kill_at = Clock::now() + plan.grace_period;
      }
    }
    // Reap every rank that exited. Several failures close together are usually one death and the
    // ranks that failed because of it: a rank killed by a signal is the cause, not the
    // lowest-numbered rank that failed, nor the first one reaped (a survivor that saw the death
    // can exit before the killed rank's own teardown ends). So a rank that exits with a status
    // is named only if no rank killed by a signal is reaped within kBlameWindow.
    std::vector<std::size_t> to_replace;
    for (std::size_t index = 0; index < ranks.size(); ++index) {
      Rank& rank = ranks[index];
      if (rank.exit_status) continue;
      int status = 0;
      if (::waitpid(rank.pid, &status, WNOHANG) != rank.pid) continue;
      rank.exit_status = decode(status);
      if (*rank.exit_status == 0) continue;
      if (continuing && restarts_used < plan.restarts && !kill_at && !stop_at) {
        ++restarts_used;
        to_replace.push_back(index);
        std::fprintf(stderr, "commrun: rank %d %s %d; starting replacement %d of %d (--restart)\n", rank.rank,
                     WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                     WIFSIGNALED(status) ? *rank.exit_status - 128 : *rank.exit_status, restarts_used, plan.restarts);
        continue;
      }
      if (continuing) {
        if (WIFSIGNALED(status)) {
          std::fprintf(stderr, "commrun: rank %d was killed by signal %d; the others go on (--on-failure continue)\n",
                       rank.rank, *rank.exit_status - 128);
        } else {
          std::fprintf(stderr, "commrun: rank %d exited with status %d; the others go on (--on-failure continue)\n",
                       rank.rank, *rank.exit_status);
          if (!first_failure) first_failure = *rank.exit_status;
        }
        continue;
      }
      if (first_failure) continue;
      bool signalled = WIFSIGNALED(status);
      if (culprit == nullptr || (signalled && !culprit_signalled)) {
        culprit = &rank;
        culprit_signalled = signalled;
        if (!blame_by) blame_by = Clock::now() + kBlameWindow;
      }
    }
    // Replacements join the running job: the survivors let them in with grow().
    for (std::size_t index : to_replace) {
      RankSpec spec = plan.ranks[spec_of[index]];
      spec.environment["COMM_JOIN"] = plan.restart_group;
      spec.environment["COMM_REPLACEMENT"] = std::to_string(restarts_used);
      ranks.emplace_back();
      spec_of.push_back(spec_of[index]);
      try {
        start(ranks.back(), spec, plan.command, plan.prefix_output);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "commrun: cannot start a replacement for rank %d: %s\n", spec.rank, error.what());
        ranks.pop_back();
        spec_of.pop_back();
        if (!first_failure) first_failure = 1;
      }
    }
    if (culprit != nullptr && (culprit_signalled || Clock::now() >= *blame_by || !running())) {
      first_failure = *culprit->exit_status;
      const char* then = running() ? "; stopping the other ranks" : "";
      if (culprit_signalled) {
        std::fprintf(stderr, "commrun: rank %d was killed by signal %d%s\n", culprit->rank, *culprit->exit_status - 128,
                     then);
      } else {
        std::fprintf(stderr, "commrun: rank %d exited with status %d%s\n", culprit->rank, *culprit->exit_status, then);
      }
      culprit = nullptr;
      stop_job(SIGTERM);
    }
    if (stop_at && Clock::now() >= *stop_at) {
      stop_at.reset();
      signal_all(ranks, stop_signal);
      if (!kill_at) kill_at = Clock::now() + plan.grace_period;
    }
    if (kill_at && Clock::now() >= *kill_at && running()) signal_all(ranks, SIGKILL);
  }
  // Whatever a rank left in its process group goes with it.
  for (auto& rank : ranks) ::kill(-rank.pid, SIGKILL);
  remove_shared_memory_of(ranks);
  return first_failure.value_or(0);
}

}  // namespace comm::launcher
