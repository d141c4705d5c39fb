#include "transport/tcp/socket_tuning.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "libcomm/base/environment.hpp"

namespace comm::transport {
namespace {

constexpr double kUnknownLinkBytesPerSecond = 10e9 / 8;
constexpr double kDefaultReceiveBufferMax = 6 * 1024 * 1024;  // Linux's net.ipv4.tcp_rmem maximum

// The interface's speed in bytes per second, from /sys (Mbit/s there; -1 or absent: unknown).
std::optional<double> interface_speed(const std::string& interface) {
  if (interface.empty() || interface.find('/') != std::string::npos) return std::nullopt;
  std::ifstream file("/sys/class/net/" + interface + "/speed");
  long long megabits = -1;
  if (!(file >> megabits) || megabits <= 0) return std::nullopt;
  return static_cast<double>(megabits) * 1e6 / 8;
}

// The largest receive buffer TCP's autotuning may give a connection in this network namespace.
double receive_buffer_max() {
  std::ifstream file("/proc/sys/net/ipv4/tcp_rmem");
  long long low = 0, initial = 0, high = 0;
  if (file >> low >> initial >> high && high > 0) return static_cast<double>(high);
  return kDefaultReceiveBufferMax;
}

}  // namespace

std::optional<int> requested_streams() {
  auto count = environment::get_integer_in("COMM_SOCKET_STREAMS", 1, kMaxSocketStreams,
                                           "TCP connections per peer on another host");
  if (!count) return std::nullopt;
  return static_cast<int>(*count);
}

std::optional<long long> requested_socket_buffer() {
  return environment::get_integer_in("COMM_SOCKET_BUFFER", kMinimumSocketBuffer, std::int64_t{1} << 30,
                                     "bytes of SO_SNDBUF and SO_RCVBUF for data sockets");
}

int streams_for(double bytes_per_second, double round_trip_seconds, double window_bytes) {
  if (!(window_bytes > 0) || !(bytes_per_second > 0) || !(round_trip_seconds > 0)) return 1;
  double needed = std::ceil(bytes_per_second * round_trip_seconds / window_bytes);
  return static_cast<int>(std::clamp(needed, 1.0, static_cast<double>(kMaxAutomaticStreams)));
}

StreamPlan plan_streams(int fd, const std::string& interface) {
  if (auto count = requested_streams()) return {*count, "COMM_SOCKET_STREAMS"};
  tcp_info info{};
  socklen_t length = sizeof info;
  double round_trip = 0;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0) round_trip = info.tcpi_rtt * 1e-6;
  std::string rate_source = "COMM_LINK_GBPS";
  auto rate = environment::link_gigabits();
  double bytes_per_second;
  if (rate) {
    bytes_per_second = *rate * 1e9 / 8;
  } else if (auto speed = interface_speed(interface)) {
    bytes_per_second = *speed;
    rate_source = interface + "'s speed";
  } else {
    bytes_per_second = kUnknownLinkBytesPerSecond;
    rate_source = "assumed";
  }
  auto buffer = requested_socket_buffer();
  double window = (buffer ? static_cast<double>(*buffer) : receive_buffer_max()) / 2;
  int count = streams_for(bytes_per_second, round_trip, window);
  return {count, fmt::format("round trip {:.0f} us x {:.2f} GB/s ({}) against a window of {:.1f} MiB per connection",
                             round_trip * 1e6, bytes_per_second / 1e9, rate_source, window / (1024 * 1024))};
}

}  // namespace comm::transport
