#include "rendezvous/init_method.hpp"

#include <charconv>

#include "comm/error.hpp"
#include "rendezvous/multicast_discovery.hpp"

namespace comm {
namespace {

constexpr const char* kForms =
    "expected env://, tcp://HOST:PORT (IPv6 as tcp://[ADDRESS]:PORT) or file:///ABSOLUTE/PATH, "
    "optionally followed by ?rank=R&world_size=N";

[[noreturn]] void reject(const std::string& url, const std::string& problem) {
  throw InvalidArgumentError("init_method '" + url + "': " + problem + "; " + kForms,
                             ErrorContext{.op = "init_process_group"});
}

std::optional<long long> parse_integer(const std::string& text) {
  long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

void parse_query(const std::string& url, const std::string& query, InitMethod& method) {
  std::size_t at = 0;
  while (at <= query.size()) {
    std::size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(at, end - at);
    at = end + 1;
    if (pair.empty()) continue;
    auto equals = pair.find('=');
    if (equals == std::string::npos) reject(url, "query part '" + pair + "' has no '='");
    std::string name = pair.substr(0, equals);
    auto value = parse_integer(pair.substr(equals + 1));
    if (!value || *value < -1 || *value > 1 << 24) reject(url, "'" + pair + "' is not a whole number in range");
    if (name == "rank") {
      method.rank = static_cast<int>(*value);
    } else if (name == "world_size") {
      method.world_size = static_cast<int>(*value);
    } else {
      reject(url, "unknown query parameter '" + name + "' (only rank and world_size)");
    }
  }
}

}  // namespace

std::uint16_t parse_port(const std::string& text, const std::string& what) {
  auto value = parse_integer(text);
  if (!value || *value < 1 || *value > 65535) {
    throw InvalidArgumentError(what + " '" + text + "' is not a TCP port (1..65535)",
                               ErrorContext{.op = "init_process_group"});
  }
  return static_cast<std::uint16_t>(*value);
}

InitMethod parse_init_method(const std::string& url) {
  InitMethod method;
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) reject(url, "no scheme");
  std::string scheme = url.substr(0, scheme_end);
  std::string rest = url.substr(scheme_end + 3);
  if (auto question = rest.find('?'); question != std::string::npos) {
    parse_query(url, rest.substr(question + 1), method);
    rest.resize(question);
  }
  if (scheme == "env") {
    if (!rest.empty()) reject(url, "env:// takes no address (it reads MASTER_ADDR and MASTER_PORT)");
    method.kind = InitMethod::Kind::Environment;
  } else if (scheme == "tcp") {
    method.kind = InitMethod::Kind::Tcp;
    if (!rest.empty() && rest.back() == '/') rest.pop_back();
    std::string port_text;
    if (!rest.empty() && rest.front() == '[') {
      auto close = rest.find(']');
      if (close == std::string::npos) reject(url, "'[' without ']' around the IPv6 address");
      method.host = rest.substr(1, close - 1);
      if (close + 1 >= rest.size() || rest[close + 1] != ':') reject(url, "no :PORT after the IPv6 address");
      port_text = rest.substr(close + 2);
    } else {
      auto colon = rest.rfind(':');
      if (colon == std::string::npos) reject(url, "no :PORT");
      method.host = rest.substr(0, colon);
      if (method.host.find(':') != std::string::npos) reject(url, "an IPv6 address must be in brackets");
      port_text = rest.substr(colon + 1);
    }
    if (method.host.empty()) reject(url, "no host");
    try {
      method.port = parse_port(port_text, "port");
    } catch (const InvalidArgumentError& error) {
      reject(url, error.message());
    }
    if (is_multicast_address(method.host)) method.kind = InitMethod::Kind::Multicast;
  } else if (scheme == "file") {
    method.kind = InitMethod::Kind::File;
    if (rest.empty() || rest.front() != '/') reject(url, "the path must be absolute (three slashes: file:///tmp/x)");
    if (rest.back() == '/') reject(url, "the path names a directory, not a file");
    method.path = rest;
  } else {
    reject(url, "unknown scheme '" + scheme + "'");
  }
  return method;
}

}  // namespace comm
