#include "libcomm/src/trace_dump.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/error.hpp"
#include "comm/trace.hpp"
#include "comm/call.hpp"
#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"
#include "libcomm/base/collective_traits.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"

namespace comm::trace {

namespace {

void append_escaped(std::string& out, const std::string& text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char code[8];
          std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += code;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string quoted(const std::string& text) {
  std::string out;
  append_escaped(out, text);
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

const char* dtype_name(std::int8_t dtype) {
  if (dtype < 0) return nullptr;
  return to_string(static_cast<DType>(dtype));
}

// The world rank this process dumps as: its first world group's (id 0), else none (-1).
const GroupInfo* world_of(const std::vector<GroupInfo>& groups) {
  for (const auto& group : groups) {
    if (group.id == 0 && group.rank >= 0) return &group;
  }
  return nullptr;
}

// An entry's operation by name ("all_reduce", "send", "new_group").
const char* operation_name(std::uint8_t operation) {
  switch (operation) {
    case static_cast<std::uint8_t>(Event::NewGroup): return "new_group";
    case static_cast<std::uint8_t>(Event::Shrink): return "shrink";
    case static_cast<std::uint8_t>(Event::Grow): return "grow";
    default:
      if (operation <= static_cast<std::uint8_t>(Operation::Recv)) return to_string(static_cast<Operation>(operation));
      return "unknown";
  }
}


std::string render(const FlightRecorder::Copy& copy, const char* reason) {
  const GroupInfo* world = world_of(copy.groups);
  auto nanoseconds = [&](std::int64_t ticks) { return copy.scale.nanoseconds(ticks); };
  std::int64_t now_wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  std::string out = "{\n";
  out += "\"format\": \"libcomm-trace\",\n\"version\": 1,\n";
  out += "\"job\": " + quoted(world ? world->job : std::string()) + ",\n";
  out += "\"host\": " + quoted(host_name()) + ",\n";
  out += "\"rank\": " + std::to_string(world ? world->rank : -1) + ",\n";
  out += "\"world_size\": " + std::to_string(world ? world->size : 0) + ",\n";
  out += "\"pid\": " + std::to_string(::getpid()) + ",\n";
  out += "\"reason\": " + quoted(reason) + ",\n";
  out += "\"dumped_at_wall_ns\": " + std::to_string(now_wall) + ",\n";
  out += "\"dumped_at_steady_ns\": " + std::to_string(detail::steady_nanoseconds()) + ",\n";
  out += "\"clock\": {\"wall_anchor_ns\": " + std::to_string(copy.wall_anchor_ns) +
         ", \"steady_anchor_ns\": " + std::to_string(copy.steady_anchor_ns) + ", \"source\": \"" +
         (detail::ticks_are_counter() ? "tsc" : "steady") + "\"" +
         (copy.clock_offset_known ? ", \"offset_to_rank0_ns\": " + std::to_string(copy.clock_offset_ns) +
                                        ", \"offset_error_ns\": " + std::to_string(copy.clock_error_ns)
                                  : std::string()) +
         "},\n";
  out += "\"capacity\": " + std::to_string(copy.capacity) + ",\n";
  out += "\"groups\": [";
  for (std::size_t index = 0; index < copy.groups.size(); ++index) {
    const GroupInfo& group = copy.groups[index];
    out += index == 0 ? "\n" : ",\n";
    out += "  {\"index\": " + std::to_string(index) + ", \"id\": " + std::to_string(group.id) +
           ", \"name\": " + quoted(group.name) + ", \"rank\": " + std::to_string(group.rank) +
           ", \"size\": " + std::to_string(group.size) + ", \"medium\": " + quoted(group.medium) + ", \"ranks\": [";
    for (int member = 0; member < group.size; ++member) {
      int world_rank = group.world_ranks.empty() ? member : group.world_ranks[static_cast<std::size_t>(member)];
      out += (member == 0 ? "" : ", ") + std::to_string(world_rank);
    }
    out += "], \"in_call\": " + std::string(group.live.in_call ? "true" : "false");
    if (group.live.in_call) {
      out += ", \"call_sequence\": " + std::to_string(group.live.call_sequence) +
             ", \"waiting_peer\": " + std::to_string(group.live.waiting_peer);
    }
    out += "}";
  }
  out += "\n],\n\"entries\": [";
  std::map<std::uint64_t, const std::string*> failures;
  for (const auto& [id, why] : copy.failures) failures[id] = &why;
  bool first = true;
  for (const Recorded& entry : copy.entries) {
    std::uint64_t id = entry.id;
    std::uint64_t finish = entry.finish;
    auto state = static_cast<State>(finish & 3);
    bool collective = entry.operation < static_cast<std::uint8_t>(Operation::Send);
    bool transfer = entry.operation == static_cast<std::uint8_t>(Operation::Send) ||
                    entry.operation == static_cast<std::uint8_t>(Operation::Recv);
    out += first ? "\n" : ",\n";
    first = false;
    out += "  {\"id\": " + std::to_string(id) + ", \"group\": " + std::to_string(entry.group) + ", \"op\": \"" +
           operation_name(entry.operation) + "\"";
    out += std::string(transfer ? ", \"tag\": " : ", \"sequence\": ") + std::to_string(entry.sequence);
    if (const char* dtype = dtype_name(entry.dtype)) {
      out += ", \"dtype\": \"" + std::string(dtype) + "\", \"count\": " + std::to_string(entry.count) +
             ", \"bytes\": " + std::to_string(entry.count * element_size(static_cast<DType>(entry.dtype)));
    } else if (!collective && !transfer) {
      out += ", \"count\": " + std::to_string(entry.count);
    }
    if (collective) {
      out += ", \"algorithm\": \"" + std::string(to_string(static_cast<Algorithm>(entry.algorithm))) + "\"";
      // An uneven form's count is this rank's own; whether the ranks' counts agree (the tools
      // compare sizes only where they must).
      CollectiveTraits::Counts counts = traits_of(static_cast<Collective>(entry.operation)).counts;
      if (counts != CollectiveTraits::Counts::Even)
        out += std::string(", \"counts\": \"") + (counts == CollectiveTraits::Counts::Shared ? "shared" : "per_pair") + "\"";
    }
    if (entry.peer >= 0) out += std::string(transfer ? ", \"peer\": " : ", \"root\": ") + std::to_string(entry.peer);
    if (transfer && entry.peer < 0) out += ", \"peer\": -1";
    std::int64_t queued = nanoseconds(entry.queued);
    std::int64_t started_ticks = entry.started;
    out += ", \"queued_ns\": " + std::to_string(queued);
    if ((entry.flags & kStartedQueued) != 0) {
      out += ", \"started_ns\": " + std::to_string(queued);
    } else if (started_ticks != 0) {
      out += ", \"started_ns\": " + std::to_string(nanoseconds(started_ticks));
    }
    if (finish != 0) out += ", \"completed_ns\": " + std::to_string(nanoseconds(static_cast<std::int64_t>(finish >> 2)));
    out += ", \"state\": \"" + std::string(to_string(finish == 0 ? State::Running : state)) + "\"";
    if (auto found = failures.find(id); found != failures.end()) out += ", \"error\": " + quoted(*found->second);
    if (finish == 0 && entry.group < copy.groups.size()) {
      const GroupInfo& group = copy.groups[entry.group];
      if (transfer) {
        out += ", \"waiting_on\": " + std::to_string(entry.peer);
      } else if (collective && group.live.in_call && group.live.call_sequence == entry.sequence &&
                 group.live.waiting_peer >= 0) {
        out += ", \"waiting_on\": " + std::to_string(group.live.waiting_peer);
      }
    }
    out += "}";
  }
  out += "\n]\n}\n";
  return out;
}

std::string default_directory() {
  if (auto dir = environment::get("COMM_TRACE_DIR")) return *dir;
  if (auto temporary = environment::get("TMPDIR")) return *temporary;
  return "/tmp";
}

std::mutex& dump_mutex() {
  static std::mutex mutex;
  return mutex;
}

void write_whole(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    throw Error(ErrorCode::Io, "cannot write the trace dump " + temporary + ": " + std::strerror(errno) +
                                       "; give a directory this process may write (COMM_TRACE_DIR)");
  }
  std::size_t written = 0;
  while (written < text.size()) {
    ssize_t now = ::write(fd, text.data() + written, text.size() - written);
    if (now < 0 && errno == EINTR) continue;
    if (now <= 0) {
      int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw Error(ErrorCode::Io, "cannot write the trace dump " + temporary + ": " + std::strerror(saved));
    }
    written += static_cast<std::size_t>(now);
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temporary.c_str());
    throw Error(ErrorCode::Io, "cannot rename the trace dump to " + path + ": " + std::strerror(saved));
  }
}

// SIGUSR2: the handler only writes a byte to a pipe; a thread of its own reads it and dumps.
int signal_pipe[2] = {-1, -1};

void on_signal(int) {
  int saved = errno;
  char byte = 1;
  [[maybe_unused]] auto ignored = ::write(signal_pipe[1], &byte, 1);
  errno = saved;
}

void install_signal_dump() {
  struct sigaction current {};
  if (::sigaction(SIGUSR2, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;  // the program's own
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  // The reading end blocks; the handler's end must not.
  ::fcntl(signal_pipe[0], F_SETFL, 0);
  std::thread([] {
    for (;;) {
      char byte;
      ssize_t got = ::read(signal_pipe[0], &byte, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return;
      try {
        std::string path = dump("", "signal");
        log::get(log::Subsystem::Group).warn("SIGUSR2: flight recorder written to {}", path);
      } catch (const std::exception& error) {
        log::get(log::Subsystem::Group).warn("SIGUSR2: the flight recorder could not be written: {}", error.what());
      }
    }
  }).detach();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &action, nullptr);
}

}  // namespace

FlightRecorder& start() {
  static FlightRecorder& recorder = []() -> FlightRecorder& {
    FlightRecorder& made = FlightRecorder::instance();
    if (FlightRecorder::active() != nullptr) {
      install_signal_dump();
      if (environment::get("COMM_TRACE_DIR")) std::atexit([] { dump_after("exit"); });
    }
    return made;
  }();
  return recorder;
}

std::string dump(const std::string& dir, const char* reason) {
  FlightRecorder* recorder = FlightRecorder::active();
  if (recorder == nullptr) {
    throw InvalidArgumentError(
        "the flight recorder is off (COMM_TRACE=0, or no process group was made yet): nothing to dump");
  }
  std::string directory = dir.empty() ? default_directory() : dir;
  std::lock_guard lock(dump_mutex());
  auto copy = recorder->copy();
  const GroupInfo* world = world_of(copy.groups);
  std::string name = world ? "comm_trace_rank" + std::to_string(world->rank) : "comm_trace_pid" + std::to_string(::getpid());
  std::string path = directory + "/" + name + ".json";
  write_whole(path, render(copy, reason));
  return path;
}

void dump_after(const char* reason) noexcept {
  try {
    if (FlightRecorder::active() == nullptr || !environment::get("COMM_TRACE_DIR")) return;
    std::string path = dump("", reason);
    log::get(log::Subsystem::Group).warn("flight recorder written to {} ({})", path, reason);
  } catch (const std::exception& error) {
    try {
      log::get(log::Subsystem::Group).warn("the flight recorder could not be written ({}): {}", reason, error.what());
    } catch (...) {
    }
  }
}

void end_with_error(const Handle& handle, const std::exception& error) noexcept {
  if (!handle) return;
  try {
    const auto* comm_error = dynamic_cast<const Error*>(&error);
    bool revoked = comm_error != nullptr && comm_error->code() == ErrorCode::Revoked;
    handle.fail(revoked ? State::Revoked : State::Failed, error.what());
  } catch (...) {
  }
  dump_after("error");
}

}  // namespace comm::trace

namespace comm {

std::string dump_trace(const std::string& dir) { return trace::dump(dir, "call"); }

}  // namespace comm
