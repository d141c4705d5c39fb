#include "libcomm/base/environment.hpp"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "comm/error.hpp"

namespace comm::environment {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<long long> get_integer(const char* name) {
  auto text = get(name);
  if (!text) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end == text->c_str() || *end != '\0') {
    throw InvalidArgumentError("environment variable " + std::string(name) + "='" + *text +
                               "' is not an integer; unset it or give a whole number");
  }
  return value;
}

std::optional<long long> get_integer_in(const char* name, long long min, long long max, const char* why) {
  auto value = get_integer(name);
  if (value && (*value < min || *value > max)) {
    throw InvalidArgumentError("environment variable " + std::string(name) + "=" + std::to_string(*value) +
                               " is out of range: give a value from " + std::to_string(min) + " to " +
                               std::to_string(max) + " (" + why + "), or unset it for the default");
  }
  return value;
}

std::optional<double> get_number_in(const char* name, double min, double max, const char* why) {
  auto text = get(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text->c_str(), &end);
  if (errno != 0 || end == text->c_str() || *end != '\0' || !(value >= min && value <= max)) {
    std::ostringstream range;  // shortest form: 0.01, not 0.010000
    range << min << " to " << max;
    throw InvalidArgumentError("environment variable " + std::string(name) + "='" + *text + "' is not a number from " +
                               range.str() + " (" + why + "); unset it for the default");
  }
  return value;
}

std::optional<Found> first_integer(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = get_integer(name)) return Found{name, *value};
  }
  return std::nullopt;
}

std::optional<double> link_gigabits() {
  return get_number_in("COMM_LINK_GBPS", 0.001, 100000.0, "the link between hosts in gigabits per second, each way");
}

std::chrono::milliseconds timeout_or(std::chrono::milliseconds fallback) {
  auto text = get("COMM_TIMEOUT");
  if (!text) return fallback;
  char* end = nullptr;
  double seconds = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || *end != '\0' || !(seconds > 0)) {
    throw InvalidArgumentError("COMM_TIMEOUT='" + *text +
                               "' is not a positive number of seconds; unset it or give e.g. 60");
  }
  // Deadlines are steady-clock times: a huge timeout would overflow them and expire at once.
  if (seconds < kShortestTimeoutSeconds || seconds > kLongestTimeoutSeconds) {
    throw InvalidArgumentError("COMM_TIMEOUT='" + *text + "' is out of range: give seconds from 0.001 to 604800 " +
                               "(a week); unset it for the default");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

}  // namespace comm::environment
