#include "transport/shm/shm_medium.hpp"

#include <algorithm>

#include "libcomm/base/environment.hpp"
#include "transport/shm/shm_pairs.hpp"
#include "transport/shm/shm_segment.hpp"
#include "transport/shm/shm_stream.hpp"

namespace comm::transport {
namespace {

std::vector<bool> peers_on_this_host(const MediumJob& job) {
  std::vector<bool> same_host(job.size, false);
  for (int peer = 0; peer < job.size; ++peer)
    same_host[peer] = peer != job.rank && job.hosts[peer] == job.hosts[job.rank];
  return same_host;
}

std::size_t budget_bytes(const std::vector<bool>& same_host) {
  auto budget_mb = environment::get_integer_in("COMM_SHM_BUDGET_MB", 1, 1 << 20,
                                               "MiB of shared memory per rank for the rings it reads");
  if (budget_mb) return static_cast<std::size_t>(*budget_mb) << 20;
  return default_shm_budget(1 + std::count(same_host.begin(), same_host.end(), true), free_shared_memory_bytes());
}

class ShmSession final : public MediumSession {
 public:
  explicit ShmSession(const MediumJob& job)
      : same_host_(peers_on_this_host(job)),
        pairs_(job.store, job.rank, job.size, job.job_id, same_host_, job.timeout, job.fail, budget_bytes(same_host_)) {
  }
  std::string cannot_reach(int peer) const override { return same_host_[peer] ? "" : "is on another host"; }
  bool reaches(int peer) const override { return same_host_[peer] && pairs_.has(peer); }
  std::unique_ptr<ByteStream> open(int peer, const std::string& peer_name, Socket connection,
                                   std::vector<Socket>) override {
    set_nonblocking(connection.fd());
    return std::make_unique<ShmStream>(pairs_.take(peer), std::move(connection), peer, peer_name, 1, single_copy_);
  }
  std::string description() const override { return "shared memory"; }
  std::string shortage() const override { return pairs_.shortage(); }

 private:
  std::vector<bool> same_host_;
  SharedMemoryPairs pairs_;
  // Large messages read straight from the sender's memory (transport/lent_buffers.hpp); 0 sends
  // every byte through the rings (for comparison, or where reading another process is refused
  // in a way it does not notice).
  bool single_copy_ = environment::get_integer_in("COMM_SINGLE_COPY", 0, 1, "large shared-memory messages in one copy")
                          .value_or(1) != 0;
};

}  // namespace

MediumEntry shm_medium() {
  return {.name = "shm", .automatic = true, .needs_connection = true, .open = [](const MediumJob& job) {
            return std::unique_ptr<MediumSession>(std::make_unique<ShmSession>(job));
          }};
}

}  // namespace comm::transport
