#include "libcomm/src/point_to_point.hpp"

#include "algorithms/collective_context.hpp"
#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/src/trace_dump.hpp"

namespace comm {
namespace {

bool on_gpu(const Buffer& buffer) { return buffer.device.kind == Device::Kind::Cuda; }

}  // namespace

// The callers check the arguments first.
detail::CompletionWork PointToPoint::start_send(Buffer buffer, int dst, int tag, trace::Handle entry) {
  return detail::CompletionWork(transport_.isend(layout_.transport_rank(dst), buffer.data, buffer.bytes(), tag_of(tag)),
                                timeout_, detail::WorkLabel{"send", rank_, dst, tag, buffer.bytes()}, entry);
}

detail::CompletionWork PointToPoint::start_recv(Buffer buffer, int src, int tag, trace::Handle entry) {
  return detail::CompletionWork(transport_.irecv(source_rank_of(src), buffer.data, buffer.bytes(), tag_of(tag)),
                                timeout_, detail::WorkLabel{"recv", rank_, src, tag, buffer.bytes()}, entry);
}

bool PointToPoint::send_at_once(const Buffer& buffer, int dst, int tag) {
  return transport_.send_now(layout_.transport_rank(dst), buffer.data, buffer.bytes(), tag_of(tag));
}

std::shared_ptr<Work> PointToPoint::start(const Call& call) {
  bool sending = call.operation == Operation::Send;
  const Buffer& buffer = moved(call);
  trace::Handle entry = trace_begin(call.operation, buffer, call.root, call.tag, trace::kStartedQueued);
  try {
    if (on_gpu(buffer)) return start_gpu_transfer(call, entry);
    if (sending) {
      checks_.send(buffer, call.root, call.tag);
      if (send_at_once(buffer, call.root, call.tag)) {
        entry.finish(trace::State::Completed);
        return std::make_shared<detail::CompletionWork>(
            nullptr, timeout_, detail::WorkLabel{"send", rank_, call.root, call.tag, buffer.bytes()});
      }
      return std::make_shared<detail::CompletionWork>(start_send(buffer, call.root, call.tag, entry));
    }
    checks_.recv(buffer, call.root, call.tag);
    return std::make_shared<detail::CompletionWork>(start_recv(buffer, call.root, call.tag, entry));
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
    throw;
  }
}

int PointToPoint::run(const Call& call) {
  if (call.operation == Operation::Send) {
    send(call.input, call.root, call.tag);
    return -1;
  }
  return recv(call.output, call.root, call.tag);
}

// The blocking forms keep their Work on the stack: one allocation fewer per message. A GPU
// buffer's transfer is described as a Call for its lane. A small send the transport takes at
// once is over when it returns: its flight recorder entry is written then, whole.
void PointToPoint::send(const Buffer& buffer, int dst, int tag) {
  if (!on_gpu(buffer)) [[likely]] {
    checks_.send(buffer, dst, tag);
    if (send_at_once(buffer, dst, tag)) [[likely]] {
      trace::record_done(trace_group_, static_cast<std::uint8_t>(Operation::Send), static_cast<std::uint64_t>(tag),
                         buffer.count, static_cast<std::int8_t>(buffer.dtype), dst);
      return;
    }
  }
  send_and_wait(buffer, dst, tag);
}

void PointToPoint::send_and_wait(const Buffer& buffer, int dst, int tag) {
  trace::Handle entry = trace_begin(Operation::Send, buffer, dst, tag, trace::kStartedQueued);
  try {
    if (on_gpu(buffer)) {
      run_gpu_transfer(Call{.operation = Operation::Send, .input = buffer, .root = dst, .tag = tag});
    } else {
      start_send(buffer, dst, tag, {}).wait();
    }
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
    throw;
  }
  entry.finish(trace::State::Completed);
}

int PointToPoint::recv(const Buffer& buffer, int src, int tag) {
  if (on_gpu(buffer)) [[unlikely]]
    return recv_on_gpu(buffer, src, tag);
  return wait_recv(buffer, src, tag);
}

int PointToPoint::recv_on_gpu(const Buffer& buffer, int src, int tag) {
  trace::Handle entry = trace_begin(Operation::Recv, buffer, src, tag, trace::kStartedQueued);
  try {
    int source = run_gpu_transfer(Call{.operation = Operation::Recv, .output = buffer, .root = src, .tag = tag});
    entry.finish(trace::State::Completed);
    return source;
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
    throw;
  }
}

// The blocking receive waits on a Completion on its own stack: no allocation, no reference
// counting on the path from the message's arrival to the caller. The transport never touches a
// completion after finishing it; one that times out is withdrawn first (or, if its message is
// already on its way in, waited for), so nothing refers to it once this returns.
int PointToPoint::wait_recv(Buffer buffer, int src, int tag) {
  checks_.recv(buffer, src, tag);
  int source = source_rank_of(src);
  detail::Completion completion(&transport_, source);
  trace::Handle entry = trace_begin(Operation::Recv, buffer, src, tag, trace::kStartedQueued);
  try {
    transport_.irecv_into(std::shared_ptr<detail::Completion>(std::shared_ptr<void>(), &completion),  // not owned
                          source, buffer.data, buffer.bytes(), tag_of(tag));
    detail::WorkLabel label{"recv", rank_, src, tag, buffer.bytes()};
    if (!detail::wait_labelled(completion, timeout_, label)) {
      if (!transport_.cancel(&completion)) completion.wait();  // its message is on its way in
      detail::throw_timeout(label, timeout_);
    }
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
    throw;
  }
  entry.finish(trace::State::Completed);
  // A named source is known without asking the transport, whose numbering a subgroup does not share.
  return src >= 0 ? src : completion.source();
}

}  // namespace comm
