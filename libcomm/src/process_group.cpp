#include "comm/process_group.hpp"

#include "transport.hpp"

namespace comm {

ProcessGroup::ProcessGroup(Identity identity, std::shared_ptr<Store> store,
                           std::shared_ptr<transport::Transport> transport, std::chrono::milliseconds timeout)
    : identity_(std::move(identity)), store_(std::move(store)), transport_(std::move(transport)), timeout_(timeout) {}

ProcessGroup::~ProcessGroup() = default;

const char* ProcessGroup::transport_name() const { return transport_->medium(); }

void ProcessGroup::abort() { transport_->abort("ProcessGroup::abort() was called on rank " + std::to_string(rank())); }

}  // namespace comm
