#include "libcomm/src/point_to_point.hpp"

#include "algorithms/collective_context.hpp"
#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"

namespace comm {
namespace {

bool on_gpu(const Buffer& buffer) { return buffer.device.kind == Device::Kind::Cuda; }

}  // namespace

// The callers check the arguments first.
detail::CompletionWork PointToPoint::start_send(Buffer buffer, int dst, int tag) {
  return detail::CompletionWork(transport_.isend(layout_.transport_rank(dst), buffer.data, buffer.bytes(), tag_of(tag)),
                                timeout_, detail::WorkLabel{"send", rank_, dst, tag, buffer.bytes()});
}

detail::CompletionWork PointToPoint::start_recv(Buffer buffer, int src, int tag) {
  return detail::CompletionWork(transport_.irecv(source_rank_of(src), buffer.data, buffer.bytes(), tag_of(tag)),
                                timeout_, detail::WorkLabel{"recv", rank_, src, tag, buffer.bytes()});
}

bool PointToPoint::send_at_once(const Buffer& buffer, int dst, int tag) {
  return transport_.send_now(layout_.transport_rank(dst), buffer.data, buffer.bytes(), tag_of(tag));
}

std::shared_ptr<Work> PointToPoint::start(const Call& call) {
  bool sending = call.operation == Operation::Send;
  const Buffer& buffer = moved(call);
  if (on_gpu(buffer)) return start_gpu_transfer(call);
  if (sending) {
    checks_.send(buffer, call.root, call.tag);
    detail::WorkLabel label{"send", rank_, call.root, call.tag, buffer.bytes()};
    if (send_at_once(buffer, call.root, call.tag))
      return std::make_shared<detail::CompletionWork>(nullptr, timeout_, label);
    return std::make_shared<detail::CompletionWork>(start_send(buffer, call.root, call.tag));
  }
  checks_.recv(buffer, call.root, call.tag);
  return std::make_shared<detail::CompletionWork>(start_recv(buffer, call.root, call.tag));
}

int PointToPoint::run(const Call& call) {
  if (call.operation == Operation::Send) {
    send(call.input, call.root, call.tag);
    return -1;
  }
  return recv(call.output, call.root, call.tag);
}

// The blocking forms keep their Work on the stack: one allocation fewer per message. A GPU
// buffer's transfer is described as a Call for its lane.
void PointToPoint::send(const Buffer& buffer, int dst, int tag) {
  if (on_gpu(buffer)) [[unlikely]] {
    run_gpu_transfer(Call{.operation = Operation::Send, .input = buffer, .root = dst, .tag = tag});
    return;
  }
  checks_.send(buffer, dst, tag);
  if (!send_at_once(buffer, dst, tag)) start_send(buffer, dst, tag).wait();
}

int PointToPoint::recv(const Buffer& buffer, int src, int tag) {
  if (on_gpu(buffer)) [[unlikely]]
    return run_gpu_transfer(Call{.operation = Operation::Recv, .output = buffer, .root = src, .tag = tag});
  return wait_recv(buffer, src, tag);
}

// The blocking receive waits on a Completion on its own stack: no allocation, no reference
// counting on the path from the message's arrival to the caller. The transport never touches a
// completion after finishing it; one that times out is withdrawn first (or, if its message is
// already on its way in, waited for), so nothing refers to it once this returns.
int PointToPoint::wait_recv(Buffer buffer, int src, int tag) {
  checks_.recv(buffer, src, tag);
  int source = source_rank_of(src);
  detail::Completion completion(&transport_, source);
  transport_.irecv_into(std::shared_ptr<detail::Completion>(std::shared_ptr<void>(), &completion),  // not owned
                        source, buffer.data, buffer.bytes(), tag_of(tag));
  detail::WorkLabel label{"recv", rank_, src, tag, buffer.bytes()};
  if (!detail::wait_labelled(completion, timeout_, label)) {
    if (!transport_.cancel(&completion)) completion.wait();  // its message is on its way in
    detail::throw_timeout(label, timeout_);
  }
  // A named source is known without asking the transport, whose numbering a subgroup does not share.
  return src >= 0 ? src : completion.source();
}

}  // namespace comm
