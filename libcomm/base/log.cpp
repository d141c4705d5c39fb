#include "libcomm/base/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace comm::log {
namespace {

struct RankLabel {
  int rank = -1;
  int world_size = -1;
};

thread_local RankLabel thread_label;
std::atomic<int> process_rank{-1};
std::atomic<int> process_world_size{-1};

// Renders "[rank r/n] " (or nothing before the rank is known) for the %* pattern flag.
class RankFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    int rank = thread_label.rank;
    int world_size = thread_label.world_size;
    if (rank < 0) {
      rank = process_rank.load(std::memory_order_relaxed);
      world_size = process_world_size.load(std::memory_order_relaxed);
    }
    if (rank < 0) return;
    std::string text = "[rank " + std::to_string(rank) + "/" + std::to_string(world_size) + "] ";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<RankFlag>(); }
};

spdlog::level::level_enum level_from_environment() {
  const char* value = std::getenv("COMM_LOG_LEVEL");
  if (value == nullptr || *value == '\0') return spdlog::level::warn;
  auto level = spdlog::level::from_str(value);  // unknown names map to off
  if (level == spdlog::level::off && std::string(value) != "off") {
    std::fprintf(stderr,
                 "libcomm: COMM_LOG_LEVEL='%s' is not one of trace, debug, info, warn, "
                 "error, off; using warn\n",
                 value);
    return spdlog::level::warn;
  }
  return level;
}

std::shared_ptr<spdlog::logger> make_logger(const char* name) {
  static auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<RankFlag>('*').set_pattern("%*%n %^%l%$: %v");
  logger->set_formatter(std::move(formatter));
  static const auto level = level_from_environment();  // read (and complained about) once
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace

spdlog::logger& get(Subsystem subsystem) {
  static std::once_flag once;
  static std::array<std::shared_ptr<spdlog::logger>, 6> loggers;
  std::call_once(once, [] {
    loggers = {make_logger("comm.rdzv"), make_logger("comm.transport"), make_logger("comm.algo"),
               make_logger("comm.cuda"), make_logger("comm.launcher"),  make_logger("comm.group")};
  });
  return *loggers[static_cast<size_t>(subsystem)];
}

void set_rank(int rank, int world_size) {
  thread_label = {rank, world_size};
  process_rank.store(rank, std::memory_order_relaxed);
  process_world_size.store(world_size, std::memory_order_relaxed);
}

}  // namespace comm::log
