#include "comm/process_group.hpp"

namespace comm {

ProcessGroup::ProcessGroup(Identity identity, std::shared_ptr<Store> store, std::chrono::milliseconds timeout)
    : identity_(std::move(identity)), store_(std::move(store)), timeout_(timeout) {}

ProcessGroup::~ProcessGroup() = default;

}  // namespace comm
