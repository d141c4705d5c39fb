// Reading configuration from environment variables, with errors that name the variable.
#pragma once

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>

namespace comm::environment {

// The variable's value, or nothing when it is unset or empty.
std::optional<std::string> get(const char* name);

// An integer variable; throws InvalidArgumentError naming the variable when it is not one.
std::optional<long long> get_integer(const char* name);

// An integer variable that must lie in [min, max]; throws InvalidArgumentError naming the
// variable, the range and `why` the range is what it is otherwise. Tuning variables use this,
// so a typo or a harmful value is an error at init_process_group, never silently a default.
std::optional<long long> get_integer_in(const char* name, long long min, long long max, const char* why);

// The same for a decimal number (e.g. COMM_LINK_GBPS=2.5).
std::optional<double> get_number_in(const char* name, double min, double max, const char* why);

// The first of several spellings that is set (e.g. RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID),
// with the name that supplied it.
struct Found {
  std::string name;
  long long value;
};
std::optional<Found> first_integer(std::initializer_list<const char*> names);

// COMM_LINK_GBPS: the link between hosts in gigabits per second, each way, when given (read by
// the tuner's cost model and by the TCP transport's choice of connections per peer, alike).
std::optional<double> link_gigabits();

// COMM_TIMEOUT in seconds when set, else the fallback; a value outside [0.001, 604800] (a week)
// is refused at once.
inline constexpr double kShortestTimeoutSeconds = 0.001;
inline constexpr double kLongestTimeoutSeconds = 604800;
std::chrono::milliseconds timeout_or(std::chrono::milliseconds fallback);

}  // namespace comm::environment
