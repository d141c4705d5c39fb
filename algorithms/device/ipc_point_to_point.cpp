#include "algorithms/device/ipc_point_to_point.hpp"

#include <unistd.h>

#include <string>

#include "comm/error.hpp"
#include "cuda/memory.hpp"

namespace comm::algorithms {
namespace {

// A process cannot open its own IPC handles (CUDA refuses with "invalid device context"), so a
// transfer between two ranks of one process (a send to itself, or NCCL's several ranks driven by
// one process) also names the buffer and the event by address, which the peer uses when it is
// the same process.
struct InProcess {
  std::uint64_t process;  // getpid() of the side that wrote it
  std::uint64_t address;  // of the buffer (announcement) or unused (answer)
  std::uint64_t event;    // address of the cuda::InterprocessEvent
};

InProcess in_process(const void* data, const cuda::InterprocessEvent& event) {
  return {static_cast<std::uint64_t>(::getpid()), reinterpret_cast<std::uint64_t>(data),
          reinterpret_cast<std::uint64_t>(&event)};
}

bool same_process(const InProcess& other) { return other.process == static_cast<std::uint64_t>(::getpid()); }

const cuda::InterprocessEvent& event_at(const InProcess& other) {
  return *reinterpret_cast<const cuda::InterprocessEvent*>(other.event);
}

struct TransferAnnouncement {
  cuda::IpcMemoryHandle allocation;
  std::uint64_t offset;
  std::uint64_t bytes;
  cuda::IpcEventHandle ready;
  InProcess local;
};

struct Answer {
  cuda::IpcEventHandle done;
  std::uint64_t capacity;  // the receiver's buffer; smaller than the message: nothing was copied
  InProcess local;
};

void wait(const std::shared_ptr<detail::Completion>& transfer, std::chrono::milliseconds timeout, int peer,
          const char* op) {
  if (transfer->wait_for(timeout)) return;
  throw TimeoutError(std::string(op) + " of a GPU buffer waited " + std::to_string(timeout.count()) +
                         " ms for transport rank " + std::to_string(peer) +
                         "; the peer must call the matching send/recv with a GPU buffer too",
                     ErrorContext{.peer = peer, .op = op});
}

std::vector<unsigned char> key_of(const auto& handle) { return {handle.bytes.begin(), handle.bytes.end()}; }

}  // namespace

IpcPointToPoint::IpcPointToPoint(int device) : device_(device), ready_(device), done_(device) {}

IpcPointToPoint::~IpcPointToPoint() = default;

cuda::InterprocessEvent& IpcPointToPoint::imported(int peer, const cuda::IpcEventHandle& handle) {
  auto& event = events_[peer][key_of(handle)];
  if (!event) event = std::make_unique<cuda::InterprocessEvent>(handle, device_);
  return *event;
}

void IpcPointToPoint::send(transport::Transport& transport, int peer, const void* data, std::size_t bytes,
                           std::uint64_t tag, void* stream, std::chrono::milliseconds timeout) {
  TransferAnnouncement announcement{};
  if (bytes > 0) {
    cuda::AllocationRange range = cuda::allocation_range(data, device_);
    announcement.allocation = cuda::export_memory(range.base, device_);
    announcement.offset = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(data) -
                                                     static_cast<const std::uint8_t*>(range.base));
  }
  announcement.bytes = bytes;
  announcement.ready = ready_.handle();
  announcement.local = in_process(data, ready_);
  ready_.record(stream);
  Answer answer{};
  auto answered = transport.irecv(peer, &answer, sizeof answer, tag | kGpuDoneTagBit);
  wait(transport.isend(peer, &announcement, sizeof announcement, tag | kGpuAnnounceTagBit), timeout, peer, "send");
  wait(answered, timeout, peer, "send");
  if (answer.capacity < bytes) {
    throw InvalidArgumentError("the GPU send of " + std::to_string(bytes) +
                                   " bytes did not fit the receiver's buffer of " + std::to_string(answer.capacity) +
                                   " bytes",
                               ErrorContext{.peer = peer, .op = "send"});
  }
  // The buffer is the caller's again once the peer has copied it.
  (same_process(answer.local) ? event_at(answer.local) : imported(peer, answer.done)).wait(stream);
  cuda::Stream::synchronize_handle(stream, device_);
}

std::size_t IpcPointToPoint::recv(transport::Transport& transport, int peer, void* data, std::size_t capacity,
                                  std::uint64_t tag, void* stream, std::chrono::milliseconds timeout) {
  TransferAnnouncement announcement{};
  wait(transport.irecv(peer, &announcement, sizeof announcement, tag | kGpuAnnounceTagBit), timeout, peer, "recv");
  Answer answer{};
  answer.done = done_.handle();
  answer.capacity = capacity;
  answer.local = in_process(data, done_);
  bool fits = announcement.bytes <= capacity;
  if (fits && announcement.bytes > 0) {
    if (same_process(announcement.local)) {
      event_at(announcement.local).wait(stream);
      cuda::copy_async(data, reinterpret_cast<const void*>(announcement.local.address), announcement.bytes, device_,
                       stream);
    } else {
      auto* source = static_cast<std::uint8_t*>(opened_[peer].open(announcement.allocation, device_));
      imported(peer, announcement.ready).wait(stream);
      cuda::copy_async(data, source + announcement.offset, announcement.bytes, device_, stream);
    }
  }
  done_.record(stream);
  wait(transport.isend(peer, &answer, sizeof answer, tag | kGpuDoneTagBit), timeout, peer, "recv");
  if (!fits) {
    throw InvalidArgumentError("the GPU message of " + std::to_string(announcement.bytes) +
                                   " bytes does not fit the receive buffer of " + std::to_string(capacity) +
                                   " bytes (nothing was copied)",
                               ErrorContext{.peer = peer, .op = "recv"});
  }
  cuda::Stream::synchronize_handle(stream, device_);
  return announcement.bytes;
}

}  // namespace comm::algorithms
