// The transport of a group: one channel per peer over whichever byte stream reaches it (a TCP
// socket, or shared-memory rings for a peer on the same host), message matching (matcher.hpp),
// and one progress thread per group sleeping in epoll (progress_engine.hpp).
//
// Messages up to kEagerBytes go out at once (a receiver that has not posted its receive yet
// buffers them). Larger ones announce themselves (ReadyToSend) and their payload follows once
// the receiver has matched a receive (ClearToSend), straight into the user's buffer: no
// unbounded buffering, and a receive buffer that is too small fails both sides.
//
// This class is the layer's face (the Transport algorithms see): it posts sends and receives
// and routes the rest to the parts that own it, each with its own state: the peers' channels
// (Peers), the receives (Matcher), reading and waiting (ProgressEngine), arriving frames
// (FrameReceiver), lost peers and this rank's stop (PeerLoss), mismatches (MismatchWatch), the
// groups and their revocation (MeshGroups). docs/design/transport.md has the picture.
//
// Threads: one lock (mutex_) for the layer; callers queue and try to write at once; a waiter
// spins driving progress itself (try-lock, so it never fights the progress thread), then
// sleeps; the progress thread handles whatever arrives while nobody waits.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/atomic_mutex.hpp"
#include "transport/medium.hpp"
#include "transport/message/frame_receiver.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/mesh_groups.hpp"
#include "transport/message/mismatch_watch.hpp"
#include "transport/message/peer_loss.hpp"
#include "transport/message/peers.hpp"
#include "transport/message/progress_engine.hpp"
#include "transport/transport.hpp"

namespace comm::transport {

class MeshTransport final : public Transport, public std::enable_shared_from_this<MeshTransport> {
 public:
  static constexpr std::size_t kEagerBytes = 64 * 1024;

  // Takes one stream per peer (null for this rank) and starts the progress thread.
  // `hosts`: the host of every rank (Transport::hosts()). With a `connector`, a peer without
  // a stream is connected on first use (medium.hpp). `arena_maker`: how a one-host group makes
  // its shared segment (null: it has none).
  static std::shared_ptr<MeshTransport> create(int rank, std::vector<std::string> peer_names,
                                               std::vector<std::unique_ptr<ByteStream>> streams, std::vector<int> hosts,
                                               std::unique_ptr<PeerConnector> connector = nullptr,
                                               ArenaMaker arena_maker = nullptr);
  ~MeshTransport() override;

  std::shared_ptr<detail::Completion> isend(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                                            std::uint64_t fingerprint = 0) override;
  bool send_now(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                std::uint64_t fingerprint = 0) override;
  void irecv_into(std::shared_ptr<detail::Completion> completion, int peer, void* data, std::size_t capacity,
                  std::uint64_t tag, std::uint64_t fingerprint = 0) override;
  bool cancel(const detail::Completion* completion) override;
  std::shared_ptr<detail::Completion> irecv_reduce(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                                   const Combiner& reduction, std::uint64_t fingerprint = 0) override;
  std::shared_ptr<detail::Completion> irecv(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                            std::uint64_t fingerprint = 0) override;
  bool progress(int peer_hint, const detail::Completion* awaited = nullptr) override;
  void spinning(bool on) override { engine_.spinning(on); }
  void waiter_sleeps() override { engine_.waiter_sleeps(); }
  std::exception_ptr failure(int peer) override;
  std::exception_ptr conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) override;
  Capabilities capabilities() const override { return capabilities_; }
  std::span<const int> hosts() const override { return hosts_; }
  std::unique_ptr<SharedArena> map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                std::chrono::milliseconds timeout,
                                                std::size_t slot_bytes = SharedArena::kSlotBytes) override;
  std::string peer_name(int peer) const override { return peers_.name(peer); }
  // "tcp", "shm", "shm+tcp" (or "self" for a group of one).
  const char* medium() const override { return medium_.c_str(); }
  std::exception_ptr poll() override;
  void abort(const std::string& reason, const Error* cause = nullptr) override;
  GroupControl& groups() override { return groups_; }

  // Private: use create().
  MeshTransport(int rank, std::vector<std::string> peer_names, std::vector<std::unique_ptr<ByteStream>> streams,
                std::unique_ptr<PeerConnector> connector);

 private:
  void post_receive(PostedReceive&& receive);
  void deliver_to_self(const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint);
  std::shared_ptr<detail::Completion> new_completion(int peer);

  std::string medium_;
  Capabilities capabilities_;
  std::vector<int> hosts_;
  ArenaMaker arena_maker_;    // null: no shared segment (map_shared_arena)
  detail::AtomicMutex mutex_;  // guards everything below
  Peers peers_;
  Matcher matcher_;
  std::uint64_t next_id_ = 1;
  // The parts name each other (each calls the others' methods, under mutex_): declared before
  // they are built, and none uses another in its constructor.
  MeshGroups groups_{mutex_, peers_, matcher_, engine_, loss_, revoked_any_};
  MismatchWatch mismatches_{peers_, matcher_, engine_, loss_, poll_due_};
  PeerLoss loss_{peers_, matcher_, engine_, groups_, poll_due_};
  FrameReceiver frames_{peers_, matcher_, engine_, mismatches_, groups_};
  ProgressEngine engine_;  // last: its thread is stopped before the members it reads are destroyed
};

}  // namespace comm::transport
