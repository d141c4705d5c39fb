// How the message layer makes progress: which peer is read when, by whom. A waiter reads its
// peers itself (progress()); the ProgressThread (progress_thread.hpp) reads them while nobody
// waits, through the Driver calls. The engine also writes frames to a channel and watches for
// room when they queue, and connects peers on first use (the PeerConnector, medium.hpp). It owns
// no protocol: each read goes to the FrameReceiver, losses to PeerLoss, and what a read found
// that must wait until it is over (a mismatch, a write that failed) is handled after it.
//
// Everything but thread_failed runs under the layer's lock (`mutex`).
#pragma once

#include <cstdint>
#include <memory>

#include "libcomm/base/atomic_mutex.hpp"
#include "libcomm/base/completion.hpp"
#include "transport/medium.hpp"
#include "transport/message/peers.hpp"
#include "transport/message/progress_thread.hpp"
#include "transport/message/stream_connection.hpp"

namespace comm::transport {

class PeerLoss;
class MismatchWatch;

class ProgressEngine final : public ProgressThread::Driver {
 public:
  // `connector`: null when every peer was connected at init.
  ProgressEngine(detail::AtomicMutex& mutex, Peers& peers, StreamConnection::Sink& frames, PeerLoss& loss,
                 MismatchWatch& mismatches, std::unique_ptr<PeerConnector> connector);
  void start() { thread_.start(*this); }
  // Joins the thread; idempotent.
  void stop() { thread_.stop(); }

  // A peer's stream, made at init or on first use: its channel's connection, watched.
  void attach(int peer, std::unique_ptr<ByteStream> stream);
  bool connects_on_first_use() const { return connector_ != nullptr; }

  // A waiter's step (detail::Progressor): reads `peer_hint` (-1: every peer) unless someone
  // else is reading; true when bytes moved.
  bool progress(int peer_hint, const detail::Completion* awaited);
  void spinning(bool on) { thread_.spinning(on); }
  void waiter_sleeps() { thread_.waiter_sleeps(); }
  // What the waiter in progress() waits for: its completion ends its read.
  const detail::Completion* awaited() const { return awaited_; }
  // Whether a peer's read is on the stack: a loss or a mismatch found in it waits until after.
  bool servicing() const { return servicing_peer_ >= 0; }
  bool servicing(int peer) const { return servicing_peer_ == peer; }

  // Reads and answers one peer (a mismatch or lost write found inside is handled after).
  void service(int peer);
  // Writes `header` and `payload` to `peer`, or queues them (watched for room), or asks for the
  // peer's connection; `on_written` completes once they are written.
  void send_frame(int peer, const FrameHeader& header, const void* payload,
                  std::shared_ptr<detail::Completion> on_written);
  // Whether the thread wakes when `peer`'s stream has room (queued output).
  void watch_output(int peer, bool on);
  void unwatch(int fd) { thread_.unwatch(fd); }

  // Connections on first use: a peer without a stream (and not lost) is asked for, and the
  // connector's completed handshakes become streams.
  void connect_on_first_use(int peer);
  bool connecting() const { return connector_ && connector_->busy(); }
  void advance_connections();

  // ProgressThread::Driver.
  detail::AtomicMutex& mutex() override { return mutex_; }
  bool prepare_to_sleep() override;
  void woke_up() override;
  void service_all() override;
  void ready(std::uint64_t key) override;
  void thread_failed(const std::string& reason) override;

 private:
  static constexpr std::uint64_t kConnectorKey = std::uint64_t{1} << 62;

  detail::AtomicMutex& mutex_;
  Peers& peers_;
  StreamConnection::Sink& frames_;
  PeerLoss& loss_;
  MismatchWatch& mismatches_;
  std::unique_ptr<PeerConnector> connector_;     // null: every peer connected at init
  int servicing_peer_ = -1;                      // the peer whose receive() is on the stack
  const detail::Completion* awaited_ = nullptr;  // what the thread in progress() waits for
  ProgressThread thread_;                        // last: stopped before the members it reads go
};

}  // namespace comm::transport
