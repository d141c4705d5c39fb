#include "collective_context.hpp"

#include "comm/error.hpp"
#include "store_format.hpp"

namespace comm::algorithms {

void CollectiveContext::wait(const std::shared_ptr<detail::Completion>& transfer, int peer, std::uint64_t step) const {
  ErrorContext context{.rank = rank, .peer = peer, .op = op, .sequence = static_cast<std::int64_t>(sequence)};
  try {
    if (transfer->wait_for(timeout)) return;
  } catch (Error& error) {
    error.add_context(context);
    throw;
  }
  throw TimeoutError("step " + std::to_string(step) + " waited " + store_format::seconds(timeout) + " for rank " +
                         std::to_string(peer) + "; every rank of the group must call the same collectives in the "
                         "same order (is one of them stuck, or doing something else?)",
                     context);
}

}  // namespace comm::algorithms
