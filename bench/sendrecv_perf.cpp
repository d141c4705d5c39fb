// sendrecv_perf: point-to-point between ranks 0 and 1 (others idle), per size:
//   pingpong  rank 0 sends, rank 1 sends back; time = one round trip
//   sendrecv  rank 0 streams a window of messages to rank 1, which acknowledges the window;
//             time = per message, algbw = one direction's bandwidth
//   exchange  both send a window to each other at once; time = per message pair,
//             algbw = one direction, busbw = both directions together
//   commrun -n 2 build/bench/sendrecv_perf -b 8 -e 256M
#include <chrono>
#include <cstring>

#include "harness.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using comm::Buffer;
using comm::DType;

double since_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

int window_for(std::size_t bytes) { return bytes <= 64 * 1024 ? 64 : (bytes <= (4u << 20) ? 8 : 2); }

void fill(std::vector<std::uint8_t>& data, int seed) {
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 13 + seed * 101 + (i >> 9));
}

long long count_wrong(const std::vector<std::uint8_t>& data, int seed) {
  long long wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i)
    wrong += data[i] != static_cast<std::uint8_t>(i * 13 + seed * 101 + (i >> 9));
  return wrong;
}

// Rank 1's count of wrong bytes, told to rank 0 (whose row is printed).
long long gather_wrong(comm::ProcessGroup& group, long long mine) {
  if (group.rank() == 1) group.send(Buffer(&mine, 1, DType::Int64), 0, 99);
  if (group.rank() == 0) group.recv(Buffer(&mine, 1, DType::Int64), 1, 99);
  return mine;
}

comm::bench::Measurement pingpong(const comm::bench::BenchContext& context) {
  auto& group = context.group;
  comm::bench::Measurement row{"pingpong", "direct", false, context.bytes, {}, 1.0, 2.0, 0, "pingpong"};
  std::vector<std::uint8_t> out(context.bytes), in(context.bytes);
  fill(out, group.rank());
  Buffer send_buffer(out.data(), out.size(), DType::UInt8), receive_buffer(in.data(), in.size(), DType::UInt8);
  int peer = 1 - group.rank();
  for (int i = 0; i < context.options.warmup + context.iterations; ++i) {
    auto start = Clock::now();
    if (group.rank() == 0) {
      group.send(send_buffer, peer, 1);
      group.recv(receive_buffer, peer, 1);
    } else {
      group.recv(receive_buffer, peer, 1);
      group.send(send_buffer, peer, 1);
    }
    if (i >= context.options.warmup) row.times_us.push_back(since_us(start));
  }
  long long wrong = context.options.check ? count_wrong(in, peer) : 0;
  row.wrong = gather_wrong(group, wrong) + (group.rank() == 0 ? wrong : 0);
  return row;
}

comm::bench::Measurement stream(const comm::bench::BenchContext& context, bool both_ways) {
  auto& group = context.group;
  int window = window_for(context.bytes);
  comm::bench::Measurement row{
      both_ways ? "exchange" : "sendrecv", "direct", false, context.bytes, {}, both_ways ? 2.0 : 1.0, 1.0, 0,
      both_ways ? "exchange" : "sendrecv"};
  std::vector<std::vector<std::uint8_t>> out(window, std::vector<std::uint8_t>(context.bytes)),
      in(window, std::vector<std::uint8_t>(context.bytes));
  for (int w = 0; w < window; ++w) fill(out[w], group.rank() * 1000 + w);
  int peer = 1 - group.rank();
  bool sends = both_ways || group.rank() == 0, receives = both_ways || group.rank() == 1;
  std::vector<std::shared_ptr<comm::Work>> works;
  works.reserve(2 * window);
  std::uint8_t ack = 0;
  for (int i = 0; i < context.options.warmup + context.iterations; ++i) {
    auto start = Clock::now();
    works.clear();
    for (int w = 0; w < window && receives; ++w)
      works.push_back(group.irecv(Buffer(in[w].data(), context.bytes, DType::UInt8), peer, 2));
    for (int w = 0; w < window && sends; ++w)
      works.push_back(group.isend(Buffer(out[w].data(), context.bytes, DType::UInt8), peer, 2));
    for (auto& work : works) work->wait();
    if (!both_ways) {  // the window counts once the receiver has it all
      if (group.rank() == 1) group.send(Buffer(&ack, 1, DType::UInt8), 0, 3);
      if (group.rank() == 0) group.recv(Buffer(&ack, 1, DType::UInt8), 1, 3);
    }
    if (i >= context.options.warmup) row.times_us.push_back(since_us(start) / window);
  }
  long long wrong = 0;
  if (context.options.check && receives) {
    for (int w = 0; w < window; ++w) wrong += count_wrong(in[w], peer * 1000 + w);
  }
  row.wrong = gather_wrong(group, wrong) + (group.rank() == 0 ? wrong : 0);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  comm::bench::BenchDescriptor bench;
  bench.name = "sendrecv_perf";
  bench.min_ranks = 2;
  bench.run = [](const comm::bench::BenchContext& context) -> std::vector<comm::bench::Measurement> {
    if (context.group.rank() > 1) return {};
    std::vector<comm::bench::Measurement> rows;
    if (context.options.runs("pingpong")) rows.push_back(pingpong(context));
    if (context.options.runs("sendrecv")) rows.push_back(stream(context, false));
    if (context.options.runs("exchange")) rows.push_back(stream(context, true));
    return rows;
  };
  return comm::bench::run_bench(argc, argv, bench);
}
