// Making the world group of a transport from a store every member reaches: what
// init_process_group does once it knows the rank, the world size and the store, and what
// ProcessGroup::grow and a newcomer's init (InitOptions::join) do to make the grown group.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/store.hpp"
#include "libcomm/src/group.hpp"
#include "rendezvous/multicast_discovery.hpp"

namespace comm {

struct WorldPlace {
  std::shared_ptr<Store> store;        // the group's namespace in the job's store
  std::shared_ptr<Store> job_store{};  // the job's group namespace, where it is not `store` (a grown group)
  std::string name;                    // the group's name (errors, logs)
  std::string job_name;                // the prefix of the job's groups in the store (InitOptions::join names it)
  int rank = 0;
  int size = 1;
  bool automatic_rank = false;
  int local_rank = -1, local_size = -1;
  std::chrono::milliseconds timeout{};
  bool hosts_server = false;
  std::string store_description;
  std::string route_to_host{};
  std::string transport = "auto";           // InitOptions::transport (COMM_TRANSPORT overrides)
  std::optional<std::string> job_secret{};  // InitOptions::job_secret
  // Called while the members join, beside the store's own checks; throws to give up (grow: a
  // death in the growing group).
  std::function<void()> also_watch{};
};

// ProcessGroup::Impl::make_world (group.hpp) joins the members through the store, connects them
// and returns the group (collective over the members; failures are published so that every
// member reports the first cause). `discovery`: the multicast discovery that found the store,
// stopped once every member joined.

}  // namespace comm
