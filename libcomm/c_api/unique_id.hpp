// comm_unique_id: where the ranks of a communicator meet. Making an id starts a store server in
// this process (every interface, a free port) with a fresh job secret; the id's bytes carry this
// host's name, the port and the secret, so that any process given them can join, and no process
// without them can (the store and the ranks' connections prove the secret; it never travels).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/comm.h"

namespace comm::c_api {

struct IdContents {
  std::string host;
  std::uint16_t port = 0;
  std::string secret;
};

// A new id; this process hosts its store until the communicators made from it here are gone.
comm_unique_id make_unique_id();
// An id of these contents (a communicator's own, for newcomers growing it: comm_get_grow_id).
comm_unique_id encode_unique_id(const IdContents& contents);
// The id's contents; CallError(COMM_INVALID_ARGUMENT) for bytes that are not an id.
IdContents read_unique_id(const comm_unique_id& id);
// What keeps the id's store alive in this process (null where another process hosts it): a
// communicator holds it, and the first one to do so ends the process-wide hold on it.
std::shared_ptr<void> hold_hosted_store(const IdContents& id);

}  // namespace comm::c_api
