// The peers of one message layer: each one's channel (channel.hpp) and name, found by its rank.
// What is about one peer lives in its channel; what spans peers (matching, revocation, losses,
// mismatches) is the layer's other parts', which reach a peer through here.
#pragma once

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "comm/error.hpp"
#include "transport/message/channel.hpp"

namespace comm::transport {

class Peers {
 public:
  // `names`: one per rank of the transport, this rank's included (its channel stays unused).
  Peers(int rank, std::vector<std::string> names)
      : rank_(rank), names_(std::move(names)), channels_(names_.size()) {}

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(channels_.size()); }
  Channel& operator[](int peer) { return channels_[peer]; }
  const Channel& operator[](int peer) const { return channels_[peer]; }
  auto begin() { return channels_.begin(); }
  auto end() { return channels_.end(); }

  // "rank 3 (host:pid)", for messages.
  const std::string& name(int peer) const { return names_.at(peer); }
  // A peer connected on first use says who it is in its handshake.
  void rename(int peer, std::string name) { names_[peer] = std::move(name); }
  bool lost(int peer) const { return channels_[peer].lost(); }
  // Whether every other peer is lost (or to be connected on first use: not lost).
  bool all_lost() const {
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank_ && !channels_[peer].lost()) return false;
    }
    return size() > 1;
  }

  // An error of this rank's, about `peer` (-1: none), as completions fail with it.
  template <class ErrorType>
  std::exception_ptr error(const std::string& message, int peer, const char* op) const {
    return std::make_exception_ptr(ErrorType(message, ErrorContext{.rank = rank_, .peer = peer, .op = op}));
  }

 private:
  int rank_;
  std::vector<std::string> names_;
  std::vector<Channel> channels_;  // [peer]
};

}  // namespace comm::transport
