// store_perf: how fast the TcpStore answers.
//   1. set+get round trips of small values from 1, 8 and 64 concurrent clients: requests per
//      second, and the p50/p99 latency of one set+get pair;
//   2. a rendezvous: N connected clients each add 1 to a counter and wait until it reaches N
//      (the shape of init_process_group), time until the last one is released.
//
//   store_perf [--clients 1,8,64] [--seconds 2] [--value-bytes 64] [--rendezvous 1024] [--csv]
//              [--server HOST:PORT]   (default: a server in this process on a free port)
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/store.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> clients{1, 8, 64};
  double seconds = 2.0;
  std::size_t value_bytes = 64;
  int rendezvous = 1024;
  bool csv = false;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "store_perf: %s\nusage: store_perf [--clients 1,8,64] [--seconds 2] [--value-bytes 64] "
               "[--rendezvous 1024] [--csv] [--server HOST:PORT]\n",
               problem);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--clients") {
      options.clients.clear();
      std::string list = value();
      for (std::size_t at = 0; at < list.size();) {
        std::size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        options.clients.push_back(std::atoi(list.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
    } else if (arg == "--seconds") {
      options.seconds = std::atof(value().c_str());
    } else if (arg == "--value-bytes") {
      options.value_bytes = static_cast<std::size_t>(std::atoll(value().c_str()));
    } else if (arg == "--rendezvous") {
      options.rendezvous = std::atoi(value().c_str());
    } else if (arg == "--csv") {
      options.csv = true;
    } else if (arg == "--server") {
      std::string address = value();
      auto colon = address.rfind(':');
      if (colon == std::string::npos) usage("--server needs HOST:PORT");
      options.host = address.substr(0, colon);
      options.port = static_cast<std::uint16_t>(std::atoi(address.substr(colon + 1).c_str()));
    } else {
      usage(("unknown option " + arg).c_str());
    }
  }
  for (int count : options.clients) {
    if (count < 1) usage("client counts must be >= 1");
  }
  return options;
}

double percentile(std::vector<double>& values, double fraction) {
  if (values.empty()) return 0;
  auto at = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

std::unique_ptr<comm::TcpStore> connect(const Options& options) {
  return std::make_unique<comm::TcpStore>(options.host, options.port,
                                          comm::TcpStoreOptions{.timeout = std::chrono::minutes(2)});
}

void round_trips(const Options& options, int clients) {
  std::vector<std::unique_ptr<comm::TcpStore>> stores;
  for (int i = 0; i < clients; ++i) stores.push_back(connect(options));
  comm::Bytes value(options.value_bytes, 0x5A);
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::string key = "bench/" + std::to_string(i);
      latencies[i].reserve(1 << 16);
      while (!go) std::this_thread::yield();
      while (!stop) {
        auto start = Clock::now();
        stores[i]->set(key, value);
        auto got = stores[i]->get(key);
        latencies[i].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        if (got.size() != value.size()) std::abort();
      }
    });
  }
  auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
  stop = true;
  for (auto& thread : threads) thread.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& list : latencies) all.insert(all.end(), list.begin(), list.end());
  double requests_per_second = 2.0 * static_cast<double>(all.size()) / elapsed;
  double p50 = percentile(all, 0.50), p99 = percentile(all, 0.99);
  if (options.csv) {
    std::printf("set_get,%d,%zu,%.0f,%.1f,%.1f,%.1f\n", clients, options.value_bytes, requests_per_second, p50, p99,
                elapsed * 1000);
  } else {
    std::printf("%8d %12zu %14.0f %16.1f %16.1f\n", clients, options.value_bytes, requests_per_second, p50, p99);
  }
}

void rendezvous(const Options& options, int clients) {
  std::vector<std::unique_ptr<comm::TcpStore>> stores(clients);
  auto connect_start = Clock::now();
  {
    // Connect from several threads at once, as ranks starting together would.
    std::vector<std::thread> connectors;
    constexpr int kConnectors = 16;
    for (int c = 0; c < kConnectors; ++c) {
      connectors.emplace_back([&, c] {
        for (int i = c; i < clients; i += kConnectors) stores[i] = connect(options);
      });
    }
    for (auto& thread : connectors) thread.join();
  }
  double connect_ms = std::chrono::duration<double, std::milli>(Clock::now() - connect_start).count();
  std::string round = std::to_string(Clock::now().time_since_epoch().count());
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (!go) std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (stores[i]->add("rendezvous/" + round + "/count", 1) == clients)
        stores[i]->set("rendezvous/" + round + "/done", "1");
      stores[i]->wait({"rendezvous/" + round + "/done"});
    });
  }
  while (ready < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = Clock::now();
  go = true;
  for (auto& thread : threads) thread.join();
  double rendezvous_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (options.csv) {
    std::printf("connect,%d,0,,,,%.1f\n", clients, connect_ms);
    std::printf("rendezvous,%d,0,,,,%.1f\n", clients, rendezvous_ms);
  } else {
    std::printf("rendezvous of %d clients: connect all %.1f ms, add+wait until all released %.1f ms\n", clients,
                connect_ms, rendezvous_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  // Each client is a socket here and one on the server side.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  try {
    std::unique_ptr<comm::TcpStoreServer> server;
    if (options.port == 0) {
      server = std::make_unique<comm::TcpStoreServer>(0, options.host);
      options.port = server->port();
    }
    if (options.csv) {
      std::printf("test,clients,value_bytes,requests_per_s,p50_us,p99_us,total_ms\n");
    } else {
      std::printf("# TcpStore set+get round trips, %.1f s per row (latency: one set plus one get)\n", options.seconds);
      std::printf("%8s %12s %14s %16s %16s\n", "clients", "value_bytes", "requests/s", "p50_us(set+get)",
                  "p99_us(set+get)");
    }
    for (int clients : options.clients) round_trips(options, clients);
    if (options.rendezvous > 0) rendezvous(options, options.rendezvous);
  } catch (const comm::Error& error) {
    std::fprintf(stderr, "store_perf: %s\n", error.what());
    return 1;
  }
  return 0;
}
