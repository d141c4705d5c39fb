// The transport of a group: one connection per peer over whichever byte stream reaches it
// (a TCP socket, or shared-memory rings for a peer on the same host), message matching
// (matcher.hpp), and one progress thread per group sleeping in epoll.
//
// Messages up to kEagerBytes go out at once (a receiver that has not posted its receive yet
// buffers them). Larger ones announce themselves (ReadyToSend) and their payload follows once
// the receiver has matched a receive (ClearToSend), straight into the user's buffer: no
// unbounded buffering, and a receive buffer that is too small fails both sides.
//
// Threads: callers queue and try to write at once; a waiter spins driving progress itself
// (try-lock, so it never fights the progress thread), then sleeps; the progress thread handles
// whatever arrives while nobody waits.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/atomic_mutex.hpp"
#include "transport/medium.hpp"
#include "transport/message/call_ledger.hpp"
#include "transport/message/channel.hpp"
#include "transport/message/exclusions.hpp"
#include "transport/message/failures.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/progress_thread.hpp"
#include "transport/message/revocations.hpp"
#include "transport/message/stream_connection.hpp"
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
  void spinning(bool on) override;
  void waiter_sleeps() override;
  std::exception_ptr failure(int peer) override;
  std::exception_ptr conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) override;
  Capabilities capabilities() const override { return capabilities_; }
  std::span<const int> hosts() const override { return hosts_; }
  std::unique_ptr<SharedArena> map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                std::chrono::milliseconds timeout,
                                                std::size_t slot_bytes = SharedArena::kSlotBytes) override;
  std::string peer_name(int peer) const override { return peer_names_.at(peer); }
  // "tcp", "shm", "shm+tcp" (or "self" for a group of one).
  const char* medium() const override { return medium_.c_str(); }
  std::exception_ptr poll() override;
  void abort(const std::string& reason, const Error* cause = nullptr) override;
  void add_group(std::uint32_t group, std::vector<int> members) override;
  void remove_group(std::uint32_t group) override;
  void revoke(std::uint32_t group, const Error& cause) override;
  std::exception_ptr revocation(std::uint32_t group) override;
  void ask_to_exclude(int peer, std::uint32_t agreement, std::uint64_t answer_tag) override;
  int bind_agreement(std::uint32_t agreement) override;
  int excluded_from(std::uint32_t agreement) override;

  // Private: use create().
  MeshTransport(int rank, std::vector<std::string> peer_names, std::vector<std::unique_ptr<ByteStream>> streams,
                std::unique_ptr<PeerConnector> connector);

 private:
  // What each arriving frame does (mesh_frames.cpp): the receiving side of the protocol.
  class FrameReceiver final : public StreamConnection::Sink {
   public:
    explicit FrameReceiver(MeshTransport& mesh) : mesh_(mesh) {}
    Handled on_message(StreamConnection& connection, const FrameHeader& header, const std::uint8_t* payload) override;
    StreamConnection::PayloadTarget on_header(StreamConnection& connection, const FrameHeader& header) override;
    bool on_payload(StreamConnection& connection, const FrameHeader& header) override;
    // Whether the receive buffer holds the message; if not, fails the receive and tells the
    // sender (`id`: the sender's, for a large message).
    bool fits(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes, std::uint64_t id) {
      if (bytes <= receive.capacity) [[likely]]
        return true;
      refuse(receive, source, tag, bytes, id);
      return false;
    }
    void refuse(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes, std::uint64_t id);
    // Whether an eager frame goes no further: of a revoked group or of a call this rank began
    // differently (thrown away), or a probe (noted).
    bool drops_eager(int peer, const FrameHeader& header);
    // Whether the receive an eager frame matched takes it; if not (another call, too small), it
    // is failed and the sender told.
    bool accepts(const PostedReceive& receive, int peer, const FrameHeader& header);
    // Clears a peer's large message (ReadyToSend `id`) for `receive`.
    void clear_to_send(int peer, std::uint64_t id, PostedReceive receive);

   private:
    static StreamConnection::PayloadTarget target_of(const PostedReceive& receive);
    MeshTransport& mesh_;
  };

  // All under mutex_.
  bool lost(int peer) const { return channels_[peer].lost(); }
  void post_receive(PostedReceive&& receive);
  // Connections on first use: a peer without a stream (and not lost) is asked for, and the
  // connector's completed handshakes become streams.
  void connect_on_first_use(int peer);
  void advance_connections();
  // A peer that connected after this transport stopped: told why (the Goodbye the others got),
  // then closed.
  void say_farewell(PeerConnector::Connected& made);
  void send_frame(int peer, const FrameHeader& header, const void* payload,
                  std::shared_ptr<detail::Completion> on_written);
  void deliver_to_self(const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint);
  // Revoking a group (decided by revocations_): its members told, its transfers failed, the
  // callers' memory released (mesh_revocation.cpp); and the groups of a peer lost.
  void revoke_group(std::uint32_t group, ErrorCode code, const std::string& message, int about, int told_by);
  void revoke_groups_of(int peer, const std::exception_ptr& error);
  // A peer's Exclude frame: accepted or refused (exclusions_), answered with a message of its tag.
  void answer_exclusion(int peer, const FrameHeader& request);
  std::shared_ptr<detail::Completion> new_completion(int peer);
  // An error of this rank's, about `peer` (-1: none), as the exception_ptr completions fail with.
  template <class Error>
  std::exception_ptr make_error(const std::string& message, int peer, const char* op) const {
    return std::make_exception_ptr(Error(message, ErrorContext{.rank = rank_, .peer = peer, .op = op}));
  }

  // Peers lost (a stream failed, or the peer said Goodbye) and this rank stopping
  // (mesh_peer_loss.cpp): everything pending with a lost peer fails with the reason, and nothing
  // waits on it again.
  void lose_peer(int peer, std::exception_ptr error);
  // A write failed because the peer closed: it may have said why just before (a Goodbye naming
  // a mismatch, say), and that, not "broken pipe", is what this rank's operations fail with.
  void lose_after_write_error(int peer, std::exception_ptr error);
  bool all_peers_lost() const;
  // Fails everything with `error` and tells the peers (abort's work, with a chosen error).
  // `code`: 1 + the ErrorCode of the cause (0: none); `about`: 1 + the rank it names (0: none).
  void shut_down(std::exception_ptr error, const std::string& reason, std::uint64_t code, std::uint64_t about = 0);
  // Stops the transport over `cause` (a mismatch), which every peer then gets as its own error.
  void stop_over(const Error& cause);
  void say_goodbye(const std::string& reason, std::uint64_t code, std::uint64_t about);

  // Collective mismatches (mesh_mismatch.cpp; calls_ records this rank's calls): a message or
  // probe whose call fingerprint differs from that of the receive of the same slot fails it with
  // an error naming both calls, and stops the transport.
  std::exception_ptr mismatch_error(std::uint64_t mine, int source, std::uint64_t theirs) const {
    return transport::mismatch_error(rank_, mine, source, peer_name(source), theirs);
  }
  // Fails a receive whose call differs from the one a message of its slot came from.
  void fail_mismatch(const PostedReceive& receive, int source, std::uint64_t message_fingerprint) {
    receive.completion->fail(mismatch_error(receive.fingerprint, source, message_fingerprint));
  }
  // Fails the posted receives of the same call as a message that disagrees with them.
  void fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint);
  // Whether a collective message or probe from `peer` belongs to a call this rank began with
  // another fingerprint; if so the mismatch is handled (at once, or after the peer's receive()
  // unwinds) and the message must be dropped.
  bool contradicts_my_call(int peer, std::uint64_t tag, std::uint64_t fingerprint);
  // Notes that this rank sends or receives in the call of `tag`; the first time, compares what
  // arrived of that call before.
  void note_call(std::uint64_t tag, std::uint64_t fingerprint);
  void fail_on_mismatch(int peer, std::uint64_t mine, std::uint64_t theirs);
  void shut_down_on(std::exception_ptr mismatch);
  // A message or probe of the same call as `receive`, from its source (or any), whose
  // fingerprint differs: where it came from and what it says.
  struct Disagreement {
    int source;
    std::uint64_t fingerprint;
  };
  std::optional<Disagreement> disagreement(const PostedReceive& receive) const;

  // What the progress thread drives (mesh_progress.cpp): the streams' wake-ups and reads.
  class Driver final : public ProgressThread::Driver {
   public:
    explicit Driver(MeshTransport& mesh) : mesh_(mesh) {}
    detail::AtomicMutex& mutex() override { return mesh_.mutex_; }
    bool prepare_to_sleep() override;
    void woke_up() override;
    void service_all() override;
    void ready(std::uint64_t peer) override;
    void thread_failed(const std::string& reason) override;
    // Reads and answers one peer (a mismatch or lost write found inside is handled after).
    void service(int peer);
    // Whether the progress thread wakes when `peer`'s stream has room (queued output).
    void watch_output(int peer, bool on);
    static constexpr std::uint64_t kConnectorKey = std::uint64_t{1} << 62;

   private:
    MeshTransport& mesh_;
  };

  int rank_;
  int size_;
  std::vector<std::string> peer_names_;
  std::set<std::string> mediums_;
  std::string medium_;
  Capabilities capabilities_;
  std::vector<int> hosts_;
  detail::AtomicMutex mutex_;      // guards everything below
  std::vector<Channel> channels_;  // [peer] (this rank's unused)
  Matcher matcher_;
  std::uint64_t next_id_ = 1;
  int servicing_peer_ = -1;  // the peer whose receive() is on the stack
  // Peers a write failed to while another peer's receive() was on the stack: lost (after a last
  // read of what they sent) once it is over.
  std::vector<std::pair<int, std::exception_ptr>> write_losses_;
  std::exception_ptr pending_mismatch_;          // found inside that receive(): handled after it
  const detail::Completion* awaited_ = nullptr;  // what the thread in progress() waits for
  std::unique_ptr<PeerConnector> connector_;     // null: every peer connected at init
  ArenaMaker arena_maker_;                       // null: no shared segment (map_shared_arena)
  Failures failures_;                            // this rank's stop and its Goodbye
  Revocations revocations_;
  Exclusions exclusions_;  // shrink agreements this rank accepted to be left out of, or bound to
  CallLedger calls_;
  FrameReceiver frames_{*this};
  Driver driver_{*this};
  ProgressThread progress_;  // last: stopped before the members it reads are destroyed
};

}  // namespace comm::transport
