// Collectives on GPU buffers, run under commrun on the GPU machine: through CUDA IPC by default,
// staged through pinned host memory under COMM_CUDA_PATH=staging or COMM_TRANSPORT=tcp.
// all_reduce: every dtype x op at several counts against the reference computed from every
// rank's input, bitwise-identical results on every rank, and stream ordering (a kernel writes
// the input just before the call and another reads the output just after, with no
// synchronisation between). reduce and reduce_scatter: every dtype x op too. broadcast, reduce,
// gather, scatter, all_gather, reduce_scatter and all_to_all: every root, in and out of place,
// a few dtypes and ops. send/recv, isend/irecv, any-source, the list form of all_gather.
//   commrun -n 3 build/tests/gpu_collectives        exit 0: all correct, 1: wrong, 77: no GPU
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "algorithms/reduce.hpp"
#include "comm/comm.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"
#include "tests/support/reduce_reference.hpp"

using namespace comm::testing;
namespace cuda = comm::cuda;

int main() {
  auto status = cuda::device_status();
  if (status.device_count == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
    return 77;
  }
  auto group = comm::init_process_group();
  int rank = group->rank(), size = group->size();
  const int device = 0;  // every rank on the one GPU, as users test multi-rank code
  cuda::Stream stream(device);
  group->set_cuda_stream(stream.handle());
  std::int64_t failures = 0, checked = 0;
  auto fail = [&](const std::string& what) {
    ++failures;
    std::fprintf(stderr, "[rank %d] FAIL %s\n", rank, what.c_str());
  };

  unsigned salt = 0;
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!comm::algorithms::supports(dtype, op)) continue;
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1003}, std::size_t{1000003}}) {
        if (count > 1003 && !(op == ReduceOp::Sum && (dtype == DType::Float32 || dtype == DType::BFloat16))) continue;
        auto inputs = all_inputs(size, dtype, count, ++salt);
        std::size_t bytes = count * comm::element_size(dtype);
        cuda::DeviceMemory buffer(bytes, device);
        cuda::copy(buffer.data(), inputs[static_cast<std::size_t>(rank)].data(), bytes, device);
        group->all_reduce(comm::Buffer(buffer.data(), count, dtype, {comm::Device::Kind::Cuda, device}), op);
        std::vector<std::uint8_t> result(bytes);
        cuda::copy(result.data(), buffer.data(), bytes, device);
        std::string what =
            std::string(comm::to_string(dtype)) + " " + comm::to_string(op) + " x " + std::to_string(count);
        if (count_wrong(result, inputs, dtype, op, count) != 0) fail(what + ": wrong values");
        // Bitwise identical: everyone's result against rank 0's, gathered on the CPU.
        std::vector<std::uint8_t> everyone(bytes * static_cast<std::size_t>(size));
        group->all_gather(comm::Buffer(everyone.data(), everyone.size(), DType::UInt8),
                          comm::Buffer(result.data(), bytes, DType::UInt8));
        for (int r = 1; r < size; ++r) {
          if (std::memcmp(everyone.data(), everyone.data() + static_cast<std::size_t>(r) * bytes, bytes) != 0) {
            fail(what + ": rank " + std::to_string(r) + " differs from rank 0");
          }
        }
        ++checked;
      }
    }
  }

  // broadcast, reduce, all_gather, reduce_scatter
  const comm::Device gpu{comm::Device::Kind::Cuda, device};

  // reduce (to the last rank) and reduce_scatter (out of place): every dtype x op, as all_reduce.
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!comm::algorithms::supports(dtype, op)) continue;
      std::size_t element = comm::element_size(dtype);
      for (std::size_t count : {std::size_t{7}, std::size_t{1003}}) {
        std::string what =
            std::string(comm::to_string(dtype)) + " " + comm::to_string(op) + " x " + std::to_string(count);
        int root = size - 1;
        auto inputs = all_inputs(size, dtype, count, ++salt);
        std::size_t bytes = count * element;
        cuda::DeviceMemory data(bytes, device);
        cuda::copy(data.data(), inputs[static_cast<std::size_t>(rank)].data(), bytes, device);
        group->reduce(comm::Buffer(data.data(), count, dtype, gpu), root, op);
        std::vector<std::uint8_t> result(bytes);
        cuda::copy(result.data(), data.data(), bytes, device);
        if (rank == root ? count_wrong(result, inputs, dtype, op, count) != 0
                         : result != inputs[static_cast<std::size_t>(rank)]) {
          fail("reduce " + what);
        }
        auto n_blocks = static_cast<std::size_t>(size);
        auto wholes = all_inputs(size, dtype, n_blocks * count, ++salt);
        std::vector<std::vector<std::uint8_t>> mine;
        auto me_block = static_cast<std::size_t>(rank);
        for (auto& whole : wholes) {
          mine.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(me_block * bytes),
                            whole.begin() + static_cast<std::ptrdiff_t>((me_block + 1) * bytes));
        }
        cuda::DeviceMemory input(n_blocks * bytes, device), output(bytes, device);
        cuda::copy(input.data(), wholes[me_block].data(), n_blocks * bytes, device);
        group->reduce_scatter(comm::Buffer(output.data(), count, dtype, gpu),
                              comm::Buffer(input.data(), n_blocks * count, dtype, gpu), op);
        cuda::copy(result.data(), output.data(), bytes, device);
        if (count_wrong(result, mine, dtype, op, count) != 0) fail("reduce_scatter " + what);
        checked += 2;
      }
    }
  }
  auto upload = [&](const std::vector<std::uint8_t>& host) {
    cuda::DeviceMemory memory(host.size(), device);
    cuda::copy(memory.data(), host.data(), host.size(), device);
    return memory;
  };
  auto download = [&](const void* from, std::size_t bytes) {
    std::vector<std::uint8_t> host(bytes);
    cuda::copy(host.data(), from, bytes, device);
    return host;
  };
  auto me = static_cast<std::size_t>(rank);
  auto n = static_cast<std::size_t>(size);
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64, DType::UInt8}) {
    std::size_t element = comm::element_size(dtype);
    for (std::size_t count : {std::size_t{1}, std::size_t{1003}, std::size_t{300007}}) {
      std::string what = std::string(comm::to_string(dtype)) + " x " + std::to_string(count);
      for (int root = 0; root < size; ++root) {
        auto inputs = all_inputs(size, dtype, count, ++salt);
        auto data = upload(inputs[me]);
        group->broadcast(comm::Buffer(data.data(), count, dtype, gpu), root);
        if (download(data.data(), count * element) != inputs[static_cast<std::size_t>(root)]) {
          fail("broadcast " + what + " root " + std::to_string(root));
        }
        ReduceOp op = root % 2 == 0 ? ReduceOp::Sum : ReduceOp::Max;
        data = upload(inputs[me]);
        group->reduce(comm::Buffer(data.data(), count, dtype, gpu), root, op);
        auto result = download(data.data(), count * element);
        if (rank == root ? count_wrong(result, inputs, dtype, op, count) != 0 : result != inputs[me]) {
          fail("reduce " + what + " root " + std::to_string(root));
        }
        checked += 2;
      }
      for (bool in_place : {false, true}) {
        std::string form = in_place ? " in place" : " out of place";
        // all_gather: block r of every output is rank r's input
        auto inputs = all_inputs(size, dtype, count, ++salt);
        std::vector<std::uint8_t> expected;
        for (auto& input : inputs) expected.insert(expected.end(), input.begin(), input.end());
        cuda::DeviceMemory output(n * count * element, device);
        auto input = upload(inputs[me]);
        void* input_at = input.data();
        if (in_place) {
          cuda::copy(static_cast<std::uint8_t*>(output.data()) + me * count * element, inputs[me].data(),
                     count * element, device);
          input_at = static_cast<std::uint8_t*>(output.data()) + me * count * element;
        }
        group->all_gather(comm::Buffer(output.data(), n * count, dtype, gpu),
                          comm::Buffer(input_at, count, dtype, gpu));
        if (download(output.data(), n * count * element) != expected) fail("all_gather " + what + form);
        // reduce_scatter: block r of the reduction of every input lands on rank r
        auto blocks = all_inputs(size, dtype, n * count, ++salt);
        std::vector<std::vector<std::uint8_t>> mine;
        for (auto& block : blocks) {
          mine.emplace_back(block.begin() + static_cast<std::ptrdiff_t>(me * count * element),
                            block.begin() + static_cast<std::ptrdiff_t>((me + 1) * count * element));
        }
        auto whole = upload(blocks[me]);
        cuda::DeviceMemory separate(count * element, device);
        void* output_at = in_place ? static_cast<std::uint8_t*>(whole.data()) + me * count * element : separate.data();
        group->reduce_scatter(comm::Buffer(output_at, count, dtype, gpu),
                              comm::Buffer(whole.data(), n * count, dtype, gpu), ReduceOp::Sum);
        if (count_wrong(download(output_at, count * element), mine, dtype, ReduceOp::Sum, count) != 0) {
          fail("reduce_scatter " + what + form);
        }
        checked += 2;
      }
      for (int root = 0; root < size; ++root) {
        // gather: the root's outputs[r] hold rank r's input
        auto inputs = all_inputs(size, dtype, count, ++salt);
        auto input = upload(inputs[me]);
        std::vector<cuda::DeviceMemory> outputs;
        std::vector<comm::Buffer> output_views;
        for (int r = 0; r < size; ++r) {
          outputs.emplace_back(count * element, device);
          output_views.emplace_back(outputs.back().data(), count, dtype, gpu);
        }
        group->gather(comm::Buffer(input.data(), count, dtype, gpu), output_views, root);
        if (rank == root) {
          for (int r = 0; r < size; ++r) {
            if (download(outputs[static_cast<std::size_t>(r)].data(), count * element) !=
                inputs[static_cast<std::size_t>(r)]) {
              fail("gather " + what + " root " + std::to_string(root) + " block " + std::to_string(r));
            }
          }
        }
        // scatter: rank r receives the root's inputs[r] (here: the r-th of every rank's inputs)
        std::vector<comm::Buffer> input_views;
        std::vector<cuda::DeviceMemory> sources;
        for (int r = 0; r < size; ++r) {
          sources.push_back(upload(inputs[static_cast<std::size_t>(r)]));
          input_views.emplace_back(sources.back().data(), count, dtype, gpu);
        }
        cuda::DeviceMemory received(count * element, device);
        group->scatter(comm::Buffer(received.data(), count, dtype, gpu), input_views, root);
        if (download(received.data(), count * element) != inputs[me])
          fail("scatter " + what + " root " + std::to_string(root));
        checked += 2;
      }
      for (bool in_place : {false, true}) {
        // all_to_all: block j of rank s's input lands in block s of rank j's output
        auto inputs = all_inputs(size, dtype, n * count, ++salt);
        std::vector<std::uint8_t> expected;
        for (auto& input : inputs) {
          expected.insert(expected.end(), input.begin() + static_cast<std::ptrdiff_t>(me * count * element),
                          input.begin() + static_cast<std::ptrdiff_t>((me + 1) * count * element));
        }
        auto input = upload(inputs[me]);
        cuda::DeviceMemory separate(n * count * element, device);
        void* output_at = in_place ? input.data() : separate.data();
        group->all_to_all(comm::Buffer(output_at, n * count, dtype, gpu),
                          comm::Buffer(input.data(), n * count, dtype, gpu));
        if (download(output_at, n * count * element) != expected) {
          fail("all_to_all " + what + (in_place ? " in place" : " out of place"));
        }
        ++checked;
      }
    }
  }

  // send/recv: pairs (0,1), (2,3), ... exchange, both ways, at an odd offset inside an allocation
  if (size > 1 && rank < size - size % 2) {
    int partner = rank ^ 1;
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, (std::size_t{1} << 20) + 3}) {
      auto mine_bytes = all_inputs(size, DType::UInt8, bytes, ++salt);
      cuda::DeviceMemory outgoing(bytes + 16, device), incoming(bytes + 16, device);
      auto* send_at = static_cast<std::uint8_t*>(outgoing.data()) + 5;
      auto* recv_at = static_cast<std::uint8_t*>(incoming.data()) + 3;
      if (bytes > 0) cuda::copy(send_at, mine_bytes[me].data(), bytes, device);
      comm::Buffer out(send_at, bytes, DType::UInt8, gpu), in(recv_at, bytes, DType::UInt8, gpu);
      if (rank % 2 == 0) {
        group->send(out, partner, 3);
        group->recv(in, partner, 3);
      } else {
        group->recv(in, partner, 3);
        group->send(out, partner, 3);
      }
      if (download(recv_at, bytes) != mine_bytes[static_cast<std::size_t>(partner)]) {
        fail("send/recv of " + std::to_string(bytes) + " GPU bytes");
      }
      ++checked;
    }
    // A receive buffer too small for the message: both sides get an error, nothing is copied.
    // (1 MiB: a small staged message leaves as a host message does, before the refusal comes.)
    const std::size_t big_bytes = std::size_t{1} << 20;
    cuda::DeviceMemory big(big_bytes, device), small(16, device);
    bool threw = false;
    try {
      if (rank % 2 == 0)
        group->send(comm::Buffer(big.data(), big_bytes, DType::UInt8, gpu), partner, 4);
      else
        group->recv(comm::Buffer(small.data(), 16, DType::UInt8, gpu), partner, 4);
    } catch (const comm::Error& error) {
      std::string message = error.what();
      threw = message.find("16 bytes") != std::string::npos || message.find("holds 16") != std::string::npos;
      if (!threw) std::fprintf(stderr, "[rank %d] the error says: %s\n", rank, message.c_str());
    }
    if (!threw) fail("a too small GPU receive buffer is not an error on both sides");
    ++checked;
  }

  // isend/irecv: partners post a receive and three sends to each other, all before waiting;
  // the messages (same tag) arrive in the order sent.
  if (size > 1 && rank < size - size % 2) {
    int partner = rank ^ 1;
    const std::size_t bytes = 300007;
    auto patterns = all_inputs(2 * size * 3, DType::UInt8, bytes, 91);  // [3 x sender + k]
    auto pattern = [&](int sender, int k) { return patterns[static_cast<std::size_t>(3 * sender + k)]; };
    std::vector<cuda::DeviceMemory> outgoing, incoming;
    std::vector<std::shared_ptr<comm::Work>> works;
    for (int k = 0; k < 3; ++k) {
      incoming.emplace_back(bytes, device);
      works.push_back(group->irecv(comm::Buffer(incoming.back().data(), bytes, DType::UInt8, gpu), partner, 8));
    }
    for (int k = 0; k < 3; ++k) {
      outgoing.push_back(upload(pattern(rank, k)));
      works.push_back(group->isend(comm::Buffer(outgoing.back().data(), bytes, DType::UInt8, gpu), partner, 8));
    }
    for (auto& work : works) work->wait();
    for (int k = 0; k < 3; ++k) {
      if (download(incoming[static_cast<std::size_t>(k)].data(), bytes) != pattern(partner, k)) {
        fail("irecv " + std::to_string(k) + " of GPU bytes: wrong or out of order");
      }
      if (works[static_cast<std::size_t>(k)]->bytes() != bytes ||
          works[static_cast<std::size_t>(k)]->source_rank() != partner) {
        fail("irecv of GPU bytes reports " + std::to_string(works[static_cast<std::size_t>(k)]->bytes()) +
             " bytes from " + std::to_string(works[static_cast<std::size_t>(k)]->source_rank()));
      }
    }
    checked += 3;
  }

  // The list form of all_gather: block r lands in outputs[r].
  for (std::size_t count : {std::size_t{0}, std::size_t{5}, std::size_t{70001}}) {
    auto inputs = all_inputs(size, DType::Float32, count, 93);
    auto input = upload(inputs[me]);
    std::vector<cuda::DeviceMemory> outputs;
    std::vector<comm::Buffer> views;
    for (int r = 0; r < size; ++r) {
      outputs.emplace_back(count * 4, device);
      views.emplace_back(outputs.back().data(), count, DType::Float32, gpu);
    }
    group->all_gather(views, comm::Buffer(input.data(), count, DType::Float32, gpu));
    for (int r = 0; r < size; ++r) {
      if (download(outputs[static_cast<std::size_t>(r)].data(), count * 4) != inputs[static_cast<std::size_t>(r)]) {
        fail("all_gather (list) of " + std::to_string(count) + " floats, block " + std::to_string(r));
      }
    }
    ++checked;
  }

  // Any-source receives of GPU buffers: staged, rank 0 hears from every other rank in whatever
  // order they arrive; through IPC, a clear error on the receiving rank.
  const char* path = std::getenv("COMM_CUDA_PATH");
  bool staged = size > 1 &&
                ((path != nullptr && std::string(path) == "staging") || std::string(group->transport_name()) != "shm");
  if (size > 1) {
    const std::size_t bytes = 1000;
    auto patterns = all_inputs(size, DType::UInt8, bytes, 77);  // not salt: ranks skipped different cases
    cuda::DeviceMemory memory(bytes, device);
    comm::Buffer view(memory.data(), bytes, DType::UInt8, gpu);
    if (!staged) {
      if (rank == 0) {
        bool refused = false;
        try {
          group->recv(view, comm::kAnySource, 6);
        } catch (const comm::InvalidArgumentError& error) {
          refused = std::string(error.what()).find("kAnySource") != std::string::npos;
        }
        if (!refused) fail("an any-source GPU receive through IPC is not refused by name");
      }
    } else if (rank == 0) {
      std::vector<bool> heard(n, false);
      for (int i = 1; i < size; ++i) {
        int source = group->recv(view, comm::kAnySource, 6);
        if (source < 1 || source >= size || heard[static_cast<std::size_t>(source)]) {
          fail("any-source GPU receive reported source " + std::to_string(source));
          continue;
        }
        heard[static_cast<std::size_t>(source)] = true;
        if (download(memory.data(), bytes) != patterns[static_cast<std::size_t>(source)]) {
          fail("any-source GPU receive from rank " + std::to_string(source) + ": wrong bytes");
        }
      }
    } else {
      cuda::copy(memory.data(), patterns[me].data(), bytes, device);
      group->send(view, 0, 6);
    }
    ++checked;
  }

  // Buffers freed and allocated anew between calls, growing, so new allocations cover memory
  // peers have mapped under older handles (cudaErrorAlreadyMapped unless imports are reopened).
  for (int round = 0; round < 8; ++round) {
    const std::size_t count = (std::size_t{1} << (12 + round)) + 7;
    std::vector<float> values(count, static_cast<float>(rank + 1));
    cuda::DeviceMemory data(count * 4, device);
    cuda::copy(data.data(), values.data(), count * 4, device);
    group->all_reduce(comm::Buffer(data.data(), count, DType::Float32, {comm::Device::Kind::Cuda, device}));
    cuda::copy(values.data(), data.data(), count * 4, device);
    float want = static_cast<float>(size * (size + 1) / 2);
    std::size_t wrong = 0;
    for (float value : values) wrong += value != want;
    if (wrong != 0) fail("all_reduce into a reallocated buffer, round " + std::to_string(round));
    ++checked;
  }

  // Stream ordering: ones + rank written by a kernel just before, read by a kernel just after.
  {
    const std::size_t count = 1 << 20;
    std::vector<float> rank_values(count, static_cast<float>(rank)), ones(count, 1.0f);
    cuda::DeviceMemory data(count * 4, device), one(count * 4, device), out(count * 4, device);
    cuda::copy(data.data(), rank_values.data(), count * 4, device);
    cuda::copy(one.data(), ones.data(), count * 4, device);
    cuda::reduce(data.data(), data.data(), one.data(), count, DType::Float32, ReduceOp::Sum, device, stream.handle());
    group->iall_reduce(comm::Buffer(data.data(), count, DType::Float32, {comm::Device::Kind::Cuda, device}))->wait();
    cuda::reduce(out.data(), data.data(), one.data(), count, DType::Float32, ReduceOp::Sum, device, stream.handle());
    stream.synchronize();
    std::vector<float> result(count);
    cuda::copy(result.data(), out.data(), count * 4, device);
    float want = static_cast<float>(size * (size + 1) / 2 + 1);  // sum of (r + 1), then + 1
    std::size_t wrong = 0;
    for (float value : result) wrong += value != want;
    if (wrong != 0) fail("stream ordering: " + std::to_string(wrong) + " wrong elements");
    ++checked;
  }

  std::vector<std::int64_t> total{failures};
  group->all_reduce(total);
  if (rank == 0) {
    std::printf("gpu_collectives: %d ranks, %s, %lld cases per rank, %lld failures\n", size,
                size == 1 ? "alone"
                : staged  ? "staged through pinned host memory"
                          : "through CUDA IPC",
                static_cast<long long>(checked), static_cast<long long>(total[0]));
  }
  return total[0] == 0 ? 0 : 1;
}
