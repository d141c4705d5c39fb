#include "rendezvous/multicast_discovery.hpp"

#include <poll.h>

#include <algorithm>
#include <asio.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "comm/error.hpp"
#include "libcomm/base/close_on_exec.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "rendezvous/multicast_announcement.hpp"
#include "rendezvous/multicast_interface.hpp"

namespace comm {

// A type the discovery's Impl holds: outside the anonymous namespace, since a class with
// external linkage may not hold members of a type private to one file (unity builds compile
// several files as one, where GCC says so).
namespace discovery {

struct Member {
  std::string address;  // as this process heard it (the source of its announcements)
  std::uint16_t store_port = 0;
  std::uint64_t sequence = 0;  // of its latest announcement: replays and duplicates are not newer
  std::string view;            // the processes it has heard, as announcement_view gives them
};

}  // namespace discovery

namespace {

using discovery::Member;

using asio::ip::udp;
using Clock = std::chrono::steady_clock;

constexpr const char* kDiscoveryOp = "init_process_group";
constexpr const char* kProofPurpose = "libcomm multicast announcement";
// Announce often while looking (a late process is heard within this), and at once on hearing a
// process for the first time, so that it hears this one without waiting for the next round.
constexpr auto kAnnouncePeriod = std::chrono::milliseconds(250);
constexpr std::size_t kMaximumGroupName = 256;
// A process that finds the group broken (more processes than the world size: a second job with
// the same group name) says so in this many announcements before it leaves, so that every other
// process fails with the cause too, even one already joining the store, or one that started up to
// 2.5 s later (4 words sent back to back, gone in a fraction of a second, left a process of two
// jobs started together on a loaded 2-core machine hearing nobody and waiting out its timeout).
constexpr int kLastWords = 10;
// Once every member announces this process's view, how long it listens for more before it goes
// on: within it, processes of a second job under the same name that started at about the same
// time are heard, and every process of both fails alike.
constexpr auto kSettle = 4 * kAnnouncePeriod;
// An announcement's time (the sender's clock) must lie this close to the receiver's: recorded
// announcements of an earlier job are stale by then. COMM_DISCOVERY_WINDOW sets it.
constexpr long long kDefaultWindowSeconds = 15;

// As text the bytes travel (16 lower-case hex digits): equal-length hex orders as the numbers do.
constexpr std::size_t kIdDigits = kAnnouncementIdDigits;

std::string hex_of(std::string_view text) {
  return hex_text(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::int64_t wall_clock_milliseconds() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool is_multicast_address(const std::string& host) {
  std::error_code error;
  auto address = asio::ip::make_address(host, error);
  return !error && address.is_multicast();
}

class MulticastDiscovery::Impl {
 public:
  explicit Impl(DiscoveryOptions options) : options_(std::move(options)), socket_(io_) {
    // The name travels in every announcement, which must fit one datagram.
    if (options_.group_name.size() > kMaximumGroupName) {
      throw InvalidArgumentError("group_name '" + options_.group_name.substr(0, 32) + "...' is " +
                                     std::to_string(options_.group_name.size()) +
                                     " bytes; multicast discovery takes "
                                     "at most " +
                                     std::to_string(kMaximumGroupName),
                                 ErrorContext{.op = kDiscoveryOp});
    }
    id_ = nonce_text(random_nonce()).substr(0, kIdDigits);
    group_ = asio::ip::make_address(options_.group);
    bool v4 = group_.is_v4();
    interface_ = choose_interface(v4);
    ttl_ = static_cast<int>(
        environment::get_integer_in("COMM_MULTICAST_TTL", 1, 255,
                                    "how many routers announcements cross; 1 keeps them on the local network")
            .value_or(1));
    where_ = "multicast group " + (v4 ? options_.group : "[" + options_.group + "]") + ":" +
             std::to_string(options_.port) + " on " +
             (interface_.name.empty() ? std::string("the interface the routing table picks") : interface_.name);
    group_hex_ = hex_of(options_.group_name);
    window_ = std::chrono::seconds(
        environment::get_integer_in("COMM_DISCOVERY_WINDOW", 1, 3600,
                                    "how far (seconds) an announcement's time may be from this host's clock")
            .value_or(kDefaultWindowSeconds));
    if (!options_.secret) {
      log::get(log::Subsystem::Rendezvous)
          .warn(
              "multicast discovery on {} without a job secret: any host that can send to the group can pose as a "
              "process of this job, or take it into its own; give every process the same COMM_JOB_TOKEN",
              where_);
    }
    open();
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    thread_.join();
  }

  DiscoveredStore find_store() {
    auto deadline = Clock::now() + options_.timeout;
    std::unique_lock lock(mutex_);
    auto complete = [&] {
      if (error_) return true;
      if (!heard_self_ || int(members_.size()) + 1 != options_.world_size) return false;
      std::string mine = own_view();
      return std::all_of(members_.begin(), members_.end(),
                         [&](const auto& member) { return member.second.view == mine; });
    };
    if (!changed_.wait_until(lock, deadline, complete)) throw_timeout("");
    // Agreed: listen a moment longer for processes of a second job under the same name started
    // at about the same time (each process announces at once on hearing a new one).
    if (!error_) changed_.wait_for(lock, kSettle, [&] { return error_ != nullptr || !complete(); });
    if (!error_ && !complete()) {
      if (!changed_.wait_until(lock, deadline, complete)) throw_timeout("");
    }
    if (error_) throw_after_last_word(lock);
    std::string leader = std::min(id_, members_.empty() ? id_ : members_.begin()->first);
    log::get(log::Subsystem::Rendezvous)
        .info("{}: heard all {} processes of group '{}'; {} serves the store", where_, options_.world_size,
              options_.group_name, leader == id_ ? "this process" : members_.at(leader).address);
    if (leader == id_) return {true, own_address_, 0};
    auto served = [&] { return error_ || members_.at(leader).store_port != 0; };
    if (!changed_.wait_until(lock, deadline, served)) {
      throw_timeout("every process was heard, but the one chosen to serve the store (" + members_.at(leader).address +
                    ") never said on which port; it may have died: ");
    }
    if (error_) throw_after_last_word(lock);
    return {false, members_.at(leader).address, members_.at(leader).store_port};
  }

  // A process that found the job at odds with itself (another world size) announces once more
  // before it leaves: the process it heard may have started after its earlier announcements, and
  // should fail with the same cause instead of waiting out the timeout.
  [[noreturn]] void throw_after_last_word(std::unique_lock<std::mutex>& lock) {
    auto sent = sent_;
    broken_ = true;
    for (int word = 0; word < kLastWords; ++word) {
      announce_now_ = true;
      changed_.wait_for(lock, kAnnouncePeriod, [&] { return sent_ > sent; });
      sent = sent_;
      // A period apart, so that the words span kLastWords periods (sent at once one after
      // another, they were gone in a fraction of a second).
      changed_.wait_for(lock, kAnnouncePeriod, [&] { return stopping_; });
    }
    std::rethrow_exception(error_);
  }

  // The error discovery found after find_store returned (another job's processes under the same
  // group name, heard while this process joins the store), thrown; nothing when there is none.
  void throw_if_failed() {
    std::unique_lock lock(mutex_);
    if (error_) throw_after_last_word(lock);
  }

  void announce_store(std::uint16_t port) {
    std::lock_guard lock(mutex_);
    store_port_ = port;
    announce_now_ = true;
  }

  const std::string& where() const { return where_; }

 private:
  void open() {
    try {
      udp::endpoint listen(group_, options_.port);
      if (group_.is_v6() && group_.to_v6().is_multicast_link_local()) {
        // ff02::/16 means nothing without an interface: bind to the group on the chosen one.
        auto scoped = group_.to_v6();
        scoped.scope_id(interface_.index);
        listen = udp::endpoint(scoped, options_.port);
      }
      socket_.open(listen.protocol());
      set_close_on_exec(socket_.native_handle());
      // Every process of every job on this host that uses this group and port binds it.
      socket_.set_option(udp::socket::reuse_address(true));
      socket_.bind(listen);
      if (group_.is_v4()) {
        socket_.set_option(asio::ip::multicast::join_group(group_.to_v4(), interface_.address_v4));
        if (!interface_.name.empty())
          socket_.set_option(asio::ip::multicast::outbound_interface(interface_.address_v4));
      } else {
        socket_.set_option(asio::ip::multicast::join_group(group_.to_v6(), interface_.index));
        if (!interface_.name.empty()) socket_.set_option(asio::ip::multicast::outbound_interface(interface_.index));
      }
      socket_.set_option(asio::ip::multicast::hops(ttl_));
      // Processes on this host hear each other, and this one learns its own address.
      socket_.set_option(asio::ip::multicast::enable_loopback(true));
      socket_.non_blocking(true);
    } catch (const std::system_error& error) {
      throw IoError("cannot join " + where_ + ": " + error.code().message() + "; check that " + route_advice(),
                    ErrorContext{.op = kDiscoveryOp});
    }
  }

  std::string route_advice() const {
    std::string all = group_.is_v4() ? "224.0.0.0/4" : "ff00::/8";
    return "the interface is up and can multicast (ip link: MULTICAST), and the group has a route "
           "(ip route get " +
           options_.group +
           "; or set COMM_SOCKET_IFNAME to the interface to use, or add one: "
           "ip route add " +
           all + " dev IFACE)";
  }

  // Under the proof with the rest: the time and a sequence number (a recorded announcement is
  // stale or not newer), and the sender's own address once it has heard itself (a recorded one
  // sent from another host is refused).
  std::string announcement() {
    Announcement mine;
    mine.id = id_;
    mine.world_size = options_.world_size;
    mine.store_port = store_port_;
    mine.group_hex = group_hex_;
    mine.sent_at_ms = wall_clock_milliseconds();
    mine.sequence = ++sequence_;
    if (heard_self_) mine.address = own_address_;
    mine.view = own_view();
    mine.broken = broken_;
    std::string text = announcement_text(mine);
    if (!options_.secret) return text + " -";
    auto proof = options_.secret->prove(kProofPurpose,
                                        {std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size())});
    return text + " " + nonce_text(proof);
  }

  void send() {
    std::string text;
    {
      std::lock_guard lock(mutex_);
      text = announcement();
    }
    std::error_code error;
    socket_.send_to(asio::buffer(text), udp::endpoint(group_, options_.port), 0, error);
    {
      std::lock_guard lock(mutex_);
      ++sent_;
      changed_.notify_all();
    }
    if (error && error != asio::error::would_block && error != asio::error::try_again &&
        error != asio::error::no_buffer_space) {
      fail(std::make_exception_ptr(
          IoError("cannot announce on " + where_ + ": " + error.message() + "; check that " + route_advice(),
                  ErrorContext{.op = kDiscoveryOp})));
    }
  }

  // Records the first error; find_store throws it.
  void fail(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = error;
    changed_.notify_all();
  }

  void receive(const std::string& text, const udp::endpoint& sender) {
    auto parsed = parse_announcement(text);
    std::lock_guard lock(mutex_);
    if (!parsed) {
      ++ignored_malformed_;
      return;
    }
    const Announcement& heard = parsed->announcement;
    if (heard.group_hex != group_hex_) {
      ++ignored_other_group_;
      return;
    }
    if (options_.secret) {
      auto proof = parse_nonce(parsed->proof);
      const std::string& signed_part = parsed->signed_part;
      if (!proof || !options_.secret->verify(
                        *proof, kProofPurpose,
                        {std::span(reinterpret_cast<const std::uint8_t*>(signed_part.data()), signed_part.size())})) {
        ++ignored_unproven_;
        return;
      }
    } else if (parsed->proof != "-") {
      ++ignored_with_secret_;
      return;
    }
    std::string address = sender.address().to_string();
    if (std::chrono::abs(std::chrono::milliseconds(wall_clock_milliseconds() - heard.sent_at_ms)) > window_) {
      ++ignored_stale_;
      return;
    }
    // A link-local IPv6 source carries the receiver's scope (%eth0): compare the addresses alone.
    auto unscoped = [](const std::string& text) { return text.substr(0, text.find('%')); };
    if (heard.address != "-" && unscoped(heard.address) != unscoped(address)) {
      ++ignored_misaddressed_;
      return;
    }
    const std::string& id_field = heard.id;
    if (id_field == id_) {
      if (!heard_self_) own_address_ = address;
      heard_self_ = true;
      changed_.notify_all();
      return;
    }
    if (auto known = members_.find(id_field); known != members_.end() && heard.sequence <= known->second.sequence) {
      ++ignored_duplicate_;
      return;
    }
    if (heard.world_size != options_.world_size && !error_) {
      error_ = std::make_exception_ptr(
          MismatchError("the process at " + address + " announces group '" + options_.group_name + "' on " + where_ +
                            " with world size " + std::to_string(heard.world_size) + ", this one with " +
                            std::to_string(options_.world_size) + "; start every process with the same world size",
                        ErrorContext{.op = kDiscoveryOp}));
    }
    if (heard.broken && !error_) {
      error_ = std::make_exception_ptr(
          MismatchError("the process at " + address + " heard more processes announce group '" + options_.group_name +
                            "' on " + where_ + " than its world size: another job uses the same address, port and " +
                            "group name; give each job its own group_name (or a job secret, COMM_JOB_TOKEN)",
                        ErrorContext{.op = kDiscoveryOp}));
    }
    Member member;
    member.address = address;
    auto [entry, fresh] = members_.try_emplace(id_field, std::move(member));
    entry->second.sequence = heard.sequence;
    entry->second.view = heard.view;
    entry->second.store_port = heard.store_port;
    if (fresh) {
      announce_now_ = true;
      if (int(members_.size()) + 1 > options_.world_size && !error_) {
        error_ = std::make_exception_ptr(MismatchError(
            "heard " + std::to_string(members_.size() + 1) + " processes announce group '" + options_.group_name +
                "' on " + where_ + " for a world of " + std::to_string(options_.world_size) + " (" + heard_list() +
                "): another job uses the same address, port and group name; give each job its own group_name "
                "(or a job secret, COMM_JOB_TOKEN)",
            ErrorContext{.op = kDiscoveryOp}));
      }
    }
    changed_.notify_all();
  }

  void run() {
    auto next = Clock::now();
    std::array<char, 2048> buffer{};
    while (true) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        if (announce_now_) {
          next = Clock::now();
          announce_now_ = false;
        }
      }
      if (Clock::now() >= next) {
        send();
        next = Clock::now() + kAnnouncePeriod;
      }
      pollfd readable{socket_.native_handle(), POLLIN, 0};
      ::poll(&readable, 1, 50);
      while (true) {
        udp::endpoint sender;
        std::error_code error;
        std::size_t bytes = socket_.receive_from(asio::buffer(buffer), sender, 0, error);
        if (error) break;
        receive(std::string(buffer.data(), bytes), sender);
      }
    }
  }

  // Called with mutex_ held.
  std::string own_view() const {
    std::vector<std::string> ids{id_};
    for (const auto& [id, member] : members_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return announcement_view(ids);
  }

  std::string heard_list() const {
    std::string list = heard_self_ ? own_address_ + " (this process)" : std::string();
    int shown = 0;
    for (const auto& [id, member] : members_) {
      if (shown++ == 8) {
        list += ", ...";
        break;
      }
      list += (list.empty() ? "" : ", ") + member.address;
    }
    return list;
  }

  // Called with mutex_ held.
  [[noreturn]] void throw_timeout(const std::string& what) {
    int heard = int(members_.size()) + (heard_self_ ? 1 : 0);
    std::string text = "timed out after " + seconds_text(options_.timeout) + " on " + where_ + ": " + what + "heard " +
                       std::to_string(heard) + " of " + std::to_string(options_.world_size) + " processes of group '" +
                       options_.group_name + "'" + (heard > 0 ? " (" + heard_list() + ")" : std::string());
    if (!heard_self_) text += "; not even this process's own announcements came back (multicast loopback)";
    int foreign = ignored_other_group_ + ignored_unproven_ + ignored_with_secret_ + ignored_malformed_;
    if (foreign > 0) {
      text += "; ignored " + std::to_string(foreign) + " announcement(s) of other jobs (" +
              std::to_string(ignored_other_group_) + " for other group names, " + std::to_string(ignored_unproven_) +
              " without this job's secret, " + std::to_string(ignored_with_secret_) +
              " proving a secret this process was not given, " + std::to_string(ignored_malformed_) + " malformed)";
    }
    int replayed = ignored_stale_ + ignored_duplicate_ + ignored_misaddressed_;
    if (replayed > 0) {
      text += "; ignored " + std::to_string(replayed) + " announcement(s) that were not fresh (" +
              std::to_string(ignored_stale_) + " stale: sent more than " + std::to_string(window_.count()) +
              " s from this host's time, replayed or from a host whose clock is off (COMM_DISCOVERY_WINDOW); " +
              std::to_string(ignored_duplicate_) + " repeated; " + std::to_string(ignored_misaddressed_) +
              " sent from another address than they name)";
    }
    text +=
        ". Check that every process uses the same address, port, world size, group name and COMM_JOB_TOKEN; "
        "that " +
        route_advice() + "; that COMM_MULTICAST_TTL (now " + std::to_string(ttl_) +
        ") covers the routers between hosts; and that no firewall drops UDP port " + std::to_string(options_.port);
    throw TimeoutError(text, ErrorContext{.op = kDiscoveryOp});
  }

  DiscoveryOptions options_;
  asio::io_context io_;
  udp::socket socket_;
  asio::ip::address group_;
  ChosenInterface interface_;
  int ttl_ = 1;
  std::string where_, group_hex_;
  std::chrono::seconds window_{kDefaultWindowSeconds};
  std::string id_;  // random, kIdDigits hex digits; the lowest of the job serves the store
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false, announce_now_ = false, heard_self_ = false;
  bool broken_ = false;  // this process found the group broken: its last announcements say so
  std::string own_address_;
  std::uint16_t store_port_ = 0;
  std::uint64_t sent_ = 0;                 // announcements sent (or tried)
  std::uint64_t sequence_ = 0;             // of this process's announcements
  std::map<std::string, Member> members_;  // by id, so the first is the lowest
  std::exception_ptr error_;
  int ignored_other_group_ = 0, ignored_unproven_ = 0, ignored_with_secret_ = 0, ignored_malformed_ = 0;
  int ignored_stale_ = 0, ignored_duplicate_ = 0, ignored_misaddressed_ = 0;
};

MulticastDiscovery::MulticastDiscovery(DiscoveryOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
MulticastDiscovery::~MulticastDiscovery() = default;
DiscoveredStore MulticastDiscovery::find_store() { return impl_->find_store(); }
void MulticastDiscovery::throw_if_failed() { impl_->throw_if_failed(); }
void MulticastDiscovery::announce_store(std::uint16_t port) { impl_->announce_store(port); }
std::string MulticastDiscovery::describe() const { return impl_->where(); }

}  // namespace comm
