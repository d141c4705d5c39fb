#include "rendezvous/slurm_nodelist.hpp"

#include <charconv>

#include "comm/error.hpp"

namespace comm {
namespace {

// Far beyond any cluster: a list that expands further is a mistake, not a job.
constexpr std::size_t kMaximumHosts = 1 << 20;

[[noreturn]] void reject(const std::string& list, const std::string& problem) {
  throw InvalidArgumentError(
      "Slurm host list '" + list + "': " + problem + " (expected forms like node1,node2 or gpu[01-04,07])",
      ErrorContext{.op = "init_process_group"});
}

unsigned long long number(const std::string& list, const std::string& text) {
  unsigned long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value > 1'000'000'000ULL) {
    reject(list, "'" + text + "' in brackets is not a number");
  }
  return value;
}

// "01-04,07" -> 01 02 03 04 07
std::vector<std::string> bracket_values(const std::string& list, const std::string& inside) {
  std::vector<std::string> values;
  if (inside.empty()) reject(list, "empty brackets");
  for (std::size_t at = 0; at <= inside.size();) {
    std::size_t comma = inside.find(',', at);
    if (comma == std::string::npos) comma = inside.size();
    std::string item = inside.substr(at, comma - at);
    at = comma + 1;
    std::size_t dash = item.find('-');
    std::string low_text = item.substr(0, dash);
    std::string high_text = dash == std::string::npos ? low_text : item.substr(dash + 1);
    auto low = number(list, low_text), high = number(list, high_text);
    if (high < low) reject(list, "range '" + item + "' runs backwards");
    if (high - low >= kMaximumHosts) reject(list, "range '" + item + "' is too long");
    std::size_t width = low_text.size();
    for (auto value = low; value <= high; ++value) {
      std::string text = std::to_string(value);
      if (text.size() < width) text.insert(0, width - text.size(), '0');
      values.push_back(std::move(text));
    }
  }
  return values;
}

// One host expression: text with any number of bracket sets, expanded left bracket slowest.
void expand_expression(const std::string& list, const std::string& expression, std::vector<std::string>& hosts) {
  std::vector<std::string> partial{""};
  std::size_t at = 0;
  while (at < expression.size()) {
    std::size_t open = expression.find('[', at);
    std::string literal = expression.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (literal.find(']') != std::string::npos) reject(list, "']' without '['");
    for (auto& prefix : partial) prefix += literal;
    if (open == std::string::npos) break;
    std::size_t close = expression.find(']', open);
    if (close == std::string::npos) reject(list, "'[' without ']'");
    auto values = bracket_values(list, expression.substr(open + 1, close - open - 1));
    if (partial.size() * values.size() > kMaximumHosts) reject(list, "too many hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * values.size());
    for (const auto& prefix : partial) {
      for (const auto& value : values) next.push_back(prefix + value);
    }
    partial = std::move(next);
    at = close + 1;
  }
  for (auto& host : partial) {
    if (host.empty()) reject(list, "an empty host name");
    hosts.push_back(std::move(host));
  }
  if (hosts.size() > kMaximumHosts) reject(list, "too many hosts");
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> hosts;
  if (list.find_first_of(" \t\n") != std::string::npos) reject(list, "white space in it");
  // Split on commas outside brackets: "a[1,3],b" is two expressions.
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t at = 0; at <= list.size(); ++at) {
    if (at < list.size() && list[at] == '[') ++depth;
    if (at < list.size() && list[at] == ']') --depth;
    if (depth < 0) reject(list, "']' without '['");
    if (depth > 1) reject(list, "nested brackets");
    if (at == list.size() || (list[at] == ',' && depth == 0)) {
      std::string expression = list.substr(start, at - start);
      if (expression.empty()) reject(list, "an empty host name");
      expand_expression(list, expression, hosts);
      start = at + 1;
    }
  }
  return hosts;
}

}  // namespace comm
