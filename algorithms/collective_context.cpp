#include "algorithms/collective_context.hpp"

#include "algorithms/reduce.hpp"
#include "comm/error.hpp"
#include "libcomm/base/duration_text.hpp"

namespace comm::algorithms {
namespace {

void reduce_on_arrival(void* target, const void* incoming, std::size_t count, DType dtype, ReduceOp op) {
  reduce(target, incoming, count, dtype, op);
}

}  // namespace

Transfer CollectiveContext::recv_reduce(int peer, void* data, std::size_t bytes, DType dtype, ReduceOp op,
                                        std::uint64_t step) const {
  transport::Combiner reduction{&reduce_on_arrival, dtype, op, element_size(dtype)};
  return transport.irecv_reduce(transport_rank(peer), data, bytes, tag(step), reduction, fingerprint);
}

void CollectiveContext::wait(const Transfer& transfer, int peer, std::uint64_t step) const {
  if (!transfer) return;  // a send the transport took at once
  // Named as the caller's group numbers them, in a part of it too.
  int named = caller_rank(peer);
  if (waiting != nullptr) waiting->note(named, step);
  // Built only on failure: a string per wait would cost as much as a small message.
  auto context = [&] {
    return ErrorContext{
        .rank = caller_rank(rank), .peer = named, .op = op, .sequence = static_cast<std::int64_t>(sequence)};
  };
  try {
    if (timeout <= kProbeAfter || fingerprint == 0) {
      if (transfer->wait_for(timeout)) return;
    } else {
      if (transfer->wait_for(kProbeAfter)) return;
      probe(peer);
      if (transfer->wait_for(timeout - kProbeAfter)) return;
    }
  } catch (Error& error) {
    error.add_context(context());
    throw;
  }
  throw TimeoutError("step " + std::to_string(step) + " waited " + seconds_text(timeout) + " for rank " +
                         std::to_string(named) +
                         "; every rank of the group must call the same collectives in the "
                         "same order (is one of them stuck, or doing something else?)",
                     context());
}

void CollectiveContext::exchange(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                                 void* recv_data, std::size_t recv_bytes, std::uint64_t step) const {
  // Send first: the peer is waiting for it, and our message's trip overlaps with posting the
  // receive. Its message cannot be lost meanwhile: it waits in the ring or socket until a poll
  // reads it (a poll that comes first keeps it as unexpected, one copy more).
  Transfer outgoing = send(send_peer, send_data, send_bytes, step);
  // The receive completes on this stack, as a blocking recv's does: no allocation per step. The
  // transport lets go of a completion once it is done, or withdrawn (cancel).
  int source = transport_rank(recv_peer);
  detail::Completion incoming(&transport, source);
  Transfer borrowed(std::shared_ptr<void>(), &incoming);  // not owned
  transport.irecv_into(borrowed, source, recv_data, recv_bytes, tag(step), fingerprint);
  try {
    wait(borrowed, recv_peer, step);
  } catch (...) {
    // Given up (a timeout): withdrawn, or waited out if its message is on its way in.
    if (!incoming.done() && !transport.cancel(&incoming)) incoming.wait();
    throw;
  }
  wait(outgoing, send_peer, step);
}

void TransferSet::wait_all(const CollectiveContext& context) {
  for (auto& pending : pending_) context.wait(pending.transfer, pending.peer, pending.step);
  pending_.clear();
}

}  // namespace comm::algorithms
