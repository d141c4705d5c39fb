// What the message layer (transport/message/) sees of a medium, and all a medium sees of the
// message layer: a byte stream to one peer, the connector that makes streams to peers on first
// use, and the maker of a host's shared segment. The media (transport/tcp/, transport/shm/, and
// the loopback tests' memory streams) implement these; the set-up (connect.cpp), the only code
// that sees every medium, hands their objects to the message layer. Neither side can include
// the other: each compiles against an include view without it (meson.build, layer_views).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "comm/store_interface.hpp"
#include "transport/shared_arena.hpp"

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
using ArenaMaker = std::function<std::unique_ptr<SharedArena>(Store& store, const std::string& key, int rank, int size,
                                                              std::chrono::milliseconds timeout, std::size_t slot_bytes)>;

}  // namespace comm::transport
