// send, recv, isend, irecv of host buffers: argument checks, then one transport call each
// (GPU buffers go to device_point_to_point.cpp).
#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/src/group.hpp"
#include "transport/transport.hpp"

namespace comm {

// The callers check the arguments first (check_send, check_recv).
detail::CompletionWork ProcessGroup::Impl::start_send(Buffer buffer, int dst, int tag) {
  return detail::CompletionWork(
      transport_->isend(transport_rank(dst), buffer.data, buffer.bytes(), point_to_point_tag(tag)), timeout_,
      detail::WorkLabel{"send", rank(), dst, tag, buffer.bytes()});
}

detail::CompletionWork ProcessGroup::Impl::start_recv(Buffer buffer, int src, int tag) {
  return detail::CompletionWork(
      transport_->irecv(source_rank_of(src), buffer.data, buffer.bytes(), point_to_point_tag(tag)), timeout_,
      detail::WorkLabel{"recv", rank(), src, tag, buffer.bytes()});
}

// kAnySource stays itself; a named group rank becomes its transport rank.
int ProcessGroup::Impl::source_rank_of(int src) const { return src == kAnySource ? src : transport_rank(src); }

// A small message the transport takes at once needs no Completion: the Work is done already.
bool ProcessGroup::Impl::send_at_once(const Buffer& buffer, int dst, int tag) {
  return transport_->send_now(transport_rank(dst), buffer.data, buffer.bytes(), point_to_point_tag(tag));
}

std::shared_ptr<Work> ProcessGroup::Impl::isend(Buffer buffer, int dst, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_transfer(buffer, dst, tag, false, true);
  check_send(buffer, dst, tag);
  detail::WorkLabel label{"send", rank(), dst, tag, buffer.bytes()};
  if (send_at_once(buffer, dst, tag)) return std::make_shared<detail::CompletionWork>(nullptr, timeout_, label);
  return std::make_shared<detail::CompletionWork>(start_send(buffer, dst, tag));
}

std::shared_ptr<Work> ProcessGroup::Impl::irecv(Buffer buffer, int src, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_transfer(buffer, src, tag, true, true);
  check_recv(buffer, src, tag);
  return std::make_shared<detail::CompletionWork>(start_recv(buffer, src, tag));
}

// The blocking forms keep their Work on the stack: one allocation fewer per message.
void ProcessGroup::Impl::send(Buffer buffer, int dst, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) {
    gpu_transfer(buffer, dst, tag, false, false);
    return;
  }
  check_send(buffer, dst, tag);
  if (send_at_once(buffer, dst, tag)) return;
  start_send(buffer, dst, tag).wait();
}

// The blocking receive waits on a Completion on its own stack: no allocation, no reference
// counting on the path from the message's arrival to the caller. The transport never touches a
// completion after finishing it; one that times out is withdrawn first (or, if its message is
// already on its way in, waited for), so nothing refers to it once this returns.
int ProcessGroup::Impl::recv(Buffer buffer, int src, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) {
    int source = src;
    gpu_transfer(buffer, src, tag, true, false, &source);
    return source;
  }
  check_recv(buffer, src, tag);
  int source = source_rank_of(src);
  detail::Completion completion(transport_.get(), source);
  std::shared_ptr<detail::Completion> borrowed(std::shared_ptr<void>(), &completion);  // not owned
  transport_->irecv_into(borrowed, source, buffer.data, buffer.bytes(), point_to_point_tag(tag));
  detail::CompletionWork work(borrowed, timeout_, detail::WorkLabel{"recv", rank(), src, tag, buffer.bytes()});
  try {
    work.wait();
  } catch (const TimeoutError&) {
    if (!transport_->cancel(&completion)) completion.wait();  // its message is on its way in
    throw;
  }
  return work.source_rank();
}

}  // namespace comm
