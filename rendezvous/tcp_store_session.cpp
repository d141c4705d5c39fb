// One client connection of the store server: framing, the limits on what a connection that has
// not proved itself may hold, the hello and the proof of the job secret, then requests one at a
// time (see tcp_store_protocol.hpp for the exchange).
#include <cerrno>
#include <cstring>

#include <algorithm>
#include <utility>

#include "libcomm/base/close_on_exec.hpp"
#include "rendezvous/tcp_store_server.hpp"

namespace comm::tcp_store_server {
namespace {

using namespace tcp_store_protocol;
using asio::ip::tcp;

// A frame's body is read in pieces of at most this, so memory follows the bytes that arrived,
// not the length a client announced.
constexpr std::size_t kBodyPieceBytes = 64 * 1024;

FrameWriter reply(ResponseStatus status) { return FrameWriter(static_cast<std::uint8_t>(status)); }

Nonce read_nonce(FrameReader& request, const char* what) {
  auto bytes = request.bytes();
  Nonce nonce{};
  if (bytes.size() != nonce.size()) throw ProtocolViolation{std::string(what) + " of the wrong size"};
  std::copy(bytes.begin(), bytes.end(), nonce.begin());
  return nonce;
}

}  // namespace

Session::Session(tcp::socket socket, Server& server)
    : socket_(std::move(socket)), server_(server), hello_timer_(server.io()) {
  std::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  auto endpoint = socket_.remote_endpoint(ignored);
  peer_ = ignored ? "unknown peer" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  server_.session_opened();
}

Session::~Session() { server_.session_closed(); }

void Session::start() {
  if (!set_close_on_exec(socket_.native_handle())) {
    return close(std::string("cannot mark its socket close-on-exec: ") + std::strerror(errno));
  }
  hello_timer_.expires_after(kHelloDeadline);
  hello_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && self->stage_ != Stage::Open) {
      self->close(std::string(self->stage_ == Stage::AwaitHello ? "no hello" : "no proof of the job secret") +
                  " within " + std::to_string(kHelloDeadline.count()) + " s (not a libcomm store client?)");
    }
  });
  read_length();
}

void Session::respond(Bytes frame) {
  busy_ = false;
  outbox_.push_back(std::move(frame));
  if (outbox_.size() == 1) write_next();
}

void Session::close(const std::string& reason) {
  if (!socket_.is_open()) return;
  if (!reason.empty()) server_.warn_dropped(peer_, reason);
  std::error_code ignored;
  hello_timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // Every way a connection ends comes here, except the server's own shutdown, which destroys
  // sessions without closing them: then nobody is left to hear the words.
  for (auto& [key, value] : std::exchange(last_words_, {})) server_.say_last_word(peer_, key, std::move(value));
}

bool Session::set_last_word(const std::string& key, Bytes value) {
  auto same = std::find_if(last_words_.begin(), last_words_.end(), [&](const auto& word) { return word.first == key; });
  if (value.empty()) {
    if (same != last_words_.end()) last_words_.erase(same);
  } else if (same != last_words_.end()) {
    same->second = std::move(value);
  } else if (last_words_.size() < kMaxLastWords) {
    last_words_.emplace_back(key, std::move(value));
  } else {
    return false;
  }
  return true;
}

void Session::read_length() {
  asio::async_read(socket_, asio::buffer(length_), [self = shared_from_this()](std::error_code ec, std::size_t) {
    if (ec) return self->close(ec == asio::error::eof || ec == asio::error::operation_aborted ? "" : ec.message());
    std::uint32_t length = decode_length(self->length_.data());
    bool open = self->stage_ == Stage::Open;
    std::size_t limit = open ? kMaxFrameBytes : kMaxHelloFrameBytes;
    if (length == 0 || length > limit) {
      return self->close("frame length " + std::to_string(length) + " outside 1.." + std::to_string(limit) +
                         (open ? "" : " before it proved itself") + " (not a libcomm store client?)");
    }
    self->frame_bytes_ = length;
    self->body_.clear();
    self->read_body();
  });
}

// In pieces: the buffer grows with what arrives, never ahead of it.
void Session::read_body() {
  std::size_t received = body_.size();
  std::size_t piece = std::min(kBodyPieceBytes, frame_bytes_ - received);
  body_.resize(received + piece);
  asio::async_read(
      socket_, asio::buffer(body_.data() + received, piece),
      [self = shared_from_this()](std::error_code ec, std::size_t) {
        if (ec) {
          return self->close(ec == asio::error::eof ? "connection closed in the middle of a frame" : ec.message());
        }
        if (self->body_.size() < self->frame_bytes_) return self->read_body();
        self->handle_request();
        if (self->is_open() && !self->close_when_sent_) self->read_length();
      });
}

void Session::handle_request() {
  if (busy_) return close("sent a request before its previous one was answered");
  try {
    FrameReader request(body_);
    auto type = static_cast<RequestType>(request.type());
    if (stage_ != Stage::Open) return handshake(type, request);
    busy_ = true;
    bool parked = false;
    Bytes response = server_.execute(type, request, shared_from_this(), parked);
    if (!parked) respond(std::move(response));
  } catch (const ProtocolViolation& violation) {
    close(violation.reason);
  }
}

void Session::handshake(RequestType type, FrameReader& request) {
  const auto& secret = server_.secret();
  if (stage_ == Stage::AwaitHello) {
    if (type != RequestType::Hello) throw ProtocolViolation{"first request is not a hello"};
    std::uint32_t magic = request.u32();
    std::uint32_t version = request.u32();
    if (magic != kMagic) throw ProtocolViolation{"bad magic in hello"};
    if (version != kVersion) {
      // Said, then closed: a client of another libcomm version fails at once with the reason
      // instead of retrying a server that hangs up on it.
      std::string reason = "the store speaks protocol version " + std::to_string(kVersion) + ", this process " +
                           std::to_string(version) + ": every rank and the store must run the same libcomm version";
      server_.warn_dropped(peer_, reason);
      close_when_sent_ = true;
      return respond(reply(ResponseStatus::Failure).bytes(reason).finish());
    }
    if (!refuse_reason_.empty()) {
      server_.warn_dropped(peer_, refuse_reason_);
      close_when_sent_ = true;
      return respond(reply(ResponseStatus::Failure).bytes(refuse_reason_).finish());
    }
    client_nonce_ = read_nonce(request, "client nonce");
    request.expect_end();
    server_nonce_ = random_nonce();
    FrameWriter answer = reply(ResponseStatus::Ok);
    answer.u32(secret ? 1 : 0).bytes(server_nonce_);
    if (secret) {
      Proof proof = secret->prove(kServerProofPurpose, {server_nonce_, client_nonce_});
      answer.bytes(proof);
      stage_ = Stage::AwaitProof;
    } else {
      answer.bytes(std::span<const std::uint8_t>{});
      open();
    }
    return respond(answer.finish());
  }
  if (type != RequestType::Authenticate) throw ProtocolViolation{"a request before proving it holds the job secret"};
  auto bytes = request.bytes();
  request.expect_end();
  Proof claimed{};
  bool right = bytes.size() == claimed.size();
  if (right) {
    std::copy(bytes.begin(), bytes.end(), claimed.begin());
    right = secret->verify(claimed, kClientProofPurpose, {client_nonce_, server_nonce_});
  }
  if (!right) {
    server_.warn_dropped(peer_, "wrong proof of the job secret (a stranger, or a rank with another COMM_JOB_TOKEN)");
    close_when_sent_ = true;
    return respond(reply(ResponseStatus::Failure)
                       .bytes(std::string("the store refused this process: it does not hold the job's secret "
                                          "(COMM_JOB_TOKEN differs from the store's)"))
                       .finish());
  }
  open();
  respond(reply(ResponseStatus::Ok).finish());
}

void Session::open() {
  stage_ = Stage::Open;
  hello_timer_.cancel();
}

void Session::write_next() {
  asio::async_write(socket_, asio::buffer(outbox_.front()),
                    [self = shared_from_this()](std::error_code ec, std::size_t) {
                      if (ec) return self->close(ec == asio::error::operation_aborted ? "" : ec.message());
                      self->outbox_.pop_front();
                      if (!self->outbox_.empty()) return self->write_next();
                      if (self->close_when_sent_) self->close("");
                    });
}

}  // namespace comm::tcp_store_server
