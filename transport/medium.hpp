// What the message layer (transport/message/) sees of a medium, and all a medium sees of the
// message layer: a byte stream to one peer, the connector that makes streams to peers on first
// use, and the maker of a host's shared segment; and what the set-up asks of a medium: a
// `MediumEntry` (its name and how to open it for a job) that each medium offers and
// transport/media.cpp lists. The media (transport/tcp/, transport/shm/, transport/memory/)
// implement these; the set-up (connect.cpp), the only code that sees every medium, hands their
// objects to the message layer. Neither side can include the other: each compiles against an
// include view without it (meson.build, layer_views).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "transport/lent_buffers.hpp"
#include "transport/shared_arena.hpp"
#include "transport/socket.hpp"

namespace comm::transport {

// The error every stream throws when its peer is gone (error 0: an orderly end of file).
[[noreturn]] void throw_peer_lost(const std::string& peer_name, int peer, const char* what, int error);

// A non-blocking, ordered, reliable byte pipe to one peer.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Moves what fits now; 0 when nothing can move. Throws PeerClosedError when the peer is gone.
  virtual std::size_t write_some(const iovec* vectors, int count) = 0;
  virtual std::size_t read_some(void* data, std::size_t bytes) = 0;
  // Reads up to `bytes` of what is available now and hands it to `sink` in contiguous runs;
  // returns how many bytes it handed over. A stream whose bytes already sit in readable memory
  // (shared memory) hands them over from there; the default copies them out first.
  class RunSink {
   public:
    virtual void operator()(const std::uint8_t* run, std::size_t bytes) = 0;

   protected:
    ~RunSink() = default;
  };
  // Whether read_through hands over the stream's own memory (no copy): only then is reducing
  // on arrival worth it (measured: over a socket, the small reads it needs cost more than the
  // scratch pass they save).
  virtual bool reads_in_place() const { return false; }
  virtual std::size_t read_through(std::size_t bytes, RunSink& sink) {
    alignas(64) std::uint8_t copy[4096];
    std::size_t n = read_some(copy, bytes < sizeof copy ? bytes : sizeof copy);
    if (n > 0) sink(copy, n);
    return n;
  }
  // The next record as the writer wrote it (a stream of records: shared memory's ring), lent in
  // place while nothing of it was read yet: its bytes, valid until release_record(), which
  // consumes it whole. Empty when nothing has arrived (then read_some would find nothing
  // either: a poll stops there); nullopt when the caller must read instead (part of a record
  // was read, or the medium has no records: the default). A small message arrives as one
  // record: its frame is handled where it lies, without the copy into the connection's inbox.
  // Throws, as read_some does, when nothing has arrived and the peer is gone.
  virtual std::optional<std::span<const std::uint8_t>> lend_record() { return std::nullopt; }
  virtual void release_record() {}
  // Large messages in one copy (lent_buffers.hpp): the pair's leases, where each end can read
  // the other's memory (processes of one host, threads of one process); null elsewhere.
  virtual LentBuffers* lent_buffers() { return nullptr; }
  // The descriptor the progress thread sleeps on for this peer (readable: data, a wake-up, or
  // the peer's end); called when it fired, before reading.
  virtual int wakeup_fd() const = 0;
  virtual void on_wakeup() {}
  // Before the progress thread sleeps: arm wake-ups; false if there is already work (then it
  // must not sleep). `want_write`: output is queued and waiting for room.
  virtual bool prepare_to_sleep(bool want_write) = 0;
  virtual void woke_up() {}
  // Whether waiting for room to write needs EPOLLOUT on wakeup_fd() (a socket does).
  virtual bool writes_wake_through_fd() const = 0;
  // This end is about to be closed by choice (its transport shut down): make sure the peer can
  // still read what was sent last (the Goodbye saying why). Failures mean it is gone already.
  virtual void close_gracefully() noexcept {}
  // After close_gracefully: drops what the peer still sends; true once it has closed its end
  // too (or is gone), so that closing this end now cannot reset the connection and destroy the
  // Goodbye in the peer's kernel before the peer has read it.
  virtual bool drained_to_end() noexcept { return true; }
  // Whether the peer shares this host's memory (so the transport can offer a shared segment).
  virtual bool shares_host_memory() const { return false; }
  virtual const char* medium() const = 0;
};

// Connections made on first use (COMM_CONNECT=lazy): the medium connects a peer when asked,
// without blocking; the message layer's progress thread sleeps on fd() and calls advance().
class PeerConnector {
 public:
  struct Connected {
    int peer;
    std::unique_ptr<ByteStream> stream;
    std::string name;  // "rank R (host:pid)", from the peer's hello
  };
  struct Lost {
    int peer;
    std::string reason;  // why the peer cannot be reached: it ended, or did not answer
  };
  virtual ~PeerConnector() = default;
  // Readable when advance() has something to do.
  virtual int fd() const = 0;
  // Sets about connecting `peer`; nothing when it is connected or under way.
  virtual void want(int peer) = 0;
  // Moves every handshake on as far as it goes without blocking; appends what completed.
  virtual void advance(std::vector<Connected>& connected, std::vector<Lost>& lost) = 0;
  // Handshakes under way (advance() has work even if fd() is not polled).
  virtual bool busy() const = 0;
  // Stops accepting and drops the handshakes: the transport has stopped.
  virtual void stop() = 0;
};

// Makes the segment every rank of a one-host group maps (Transport::map_shared_arena), through
// the store; the shared-memory medium's.
using ArenaMaker =
    std::function<std::unique_ptr<SharedArena>(Store& store, const std::string& key, int rank, int size,
                                               std::chrono::milliseconds timeout, std::size_t slot_bytes)>;

// What the set-up tells a medium about the job once the ranks have met over the TCP mesh (the
// bootstrap every job has: it finds the peers, proves them, and watches them die).
struct MediumJob {
  Store& store;  // waits on it throw the job's failure (watched_store.hpp)
  int rank;
  int size;
  std::string job_id;                     // the same on every rank of this set-up, unique to it
  const std::vector<std::string>& hosts;  // [rank]: its host identity (connect.hpp's host_identity)
  std::string local_address;              // where this rank's mesh listens ("10.0.0.1:41233")
  std::chrono::milliseconds timeout;
  // Tells the job this rank's set-up failed, before its connections close.
  std::function<void(const Error&)> fail;
};

// One job's use of a medium, opened on every rank that may use it (collectively: opening may
// wait on the store for the other ranks).
class MediumSession {
 public:
  virtual ~MediumSession() = default;
  // Why this medium can never reach `peer` ("is on another host"), or "" if it may.
  virtual std::string cannot_reach(int peer) const = 0;
  // Whether it reaches `peer` now (it may not although it could: shared memory that ran short).
  virtual bool reaches(int peer) const = 0;
  // The stream to `peer`. `connection`: the mesh's socket to it (invalid when connections are
  // made on first use and this pair's is not), with `extra` ones where the pair stripes; the
  // medium carries its bytes over them, keeps them for wake-ups and to see the peer end, or
  // closes them.
  virtual std::unique_ptr<ByteStream> open(int peer, const std::string& peer_name, Socket connection,
                                           std::vector<Socket> extra) = 0;
  // For the transport's INFO line: "tcp (10.0.0.1:41233)", "shared memory".
  virtual std::string description() const = 0;
  // Said after the list of peers it reaches ("(several connections: 2 x4)"), or "".
  virtual std::string remarks() const { return {}; }
  // Why it reaches fewer peers than it could (warned once per host), or "".
  virtual std::string shortage() const { return {}; }
};

// A medium as the set-up knows it (listed in transport/media.cpp).
struct MediumEntry {
  const char* name;  // what COMM_TRANSPORT and InitOptions::transport call it
  // Whether the automatic choice uses it (for the peers the media before it do not reach).
  bool automatic;
  // Whether it needs the pair's mesh connection (so a pair connected on first use is not its).
  bool needs_connection;
  std::unique_ptr<MediumSession> (*open)(const MediumJob& job);
};

}  // namespace comm::transport
