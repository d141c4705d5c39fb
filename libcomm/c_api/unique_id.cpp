#include "libcomm/c_api/unique_id.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>

#include "comm/process_group.hpp"
#include "comm/store.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/job_secret.hpp"
#include "libcomm/c_api/results.hpp"

namespace comm::c_api {
namespace {

// Layout of the 128 bytes: magic, version, port (big-endian), host (NUL-terminated), secret
// (64 hex characters), zeros.
constexpr char kMagic[4] = {'l', 'c', 'i', 'd'};
constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kPortAt = 5, kHostAt = 7, kHostBytes = 56, kSecretAt = kHostAt + kHostBytes, kSecretBytes = 64;
static_assert(kSecretAt + kSecretBytes <= COMM_UNIQUE_ID_BYTES);

// Servers this process hosts, by secret. An entry holds its server until a communicator takes
// it over; then only the communicators do, and the entry lets later ones (several ranks in one
// process) find it while any is alive.
struct HostedStores {
  std::mutex mutex;
  struct Entry {
    std::shared_ptr<TcpStoreServer> until_taken;
    std::weak_ptr<TcpStoreServer> taken;
    std::chrono::steady_clock::time_point made;
  };
  std::map<std::string, Entry> by_secret;

  // Lets go of servers no communicator here took, made longer than an init's timeout ago, that
  // no process is connected to (no init can still be using them), and of entries whose
  // communicators are all gone. The caller holds the mutex.
  void sweep() {
    auto now = std::chrono::steady_clock::now();
    auto timeout = environment::timeout_or(InitOptions{}.timeout);
    std::erase_if(by_secret, [&](const auto& item) {
      const Entry& entry = item.second;
      if (!entry.until_taken) return entry.taken.expired();
      return now - entry.made >= timeout && entry.until_taken->client_count() == 0;
    });
  }
};

HostedStores& hosted_stores() {
  static HostedStores stores;
  return stores;
}

std::string this_host() {
  std::array<char, HOST_NAME_MAX + 1> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  return name.data();
}

}  // namespace

comm_unique_id encode_unique_id(const IdContents& contents) {
  require(contents.host.size() < kHostBytes, COMM_INTERNAL_ERROR, "this host's name is too long for a unique id");
  require(contents.secret.size() == kSecretBytes, COMM_INTERNAL_ERROR, "a unique id's secret has the wrong length");
  comm_unique_id id{};
  std::memcpy(id.internal, kMagic, sizeof kMagic);
  id.internal[4] = static_cast<char>(kVersion);
  id.internal[kPortAt] = static_cast<char>(contents.port >> 8);
  id.internal[kPortAt + 1] = static_cast<char>(contents.port & 0xFF);
  std::memcpy(id.internal + kHostAt, contents.host.data(), contents.host.size());
  std::memcpy(id.internal + kSecretAt, contents.secret.data(), kSecretBytes);
  return id;
}

comm_unique_id make_unique_id() {
  std::string secret = JobSecret::generate().text();
  auto server = std::make_shared<TcpStoreServer>(0, "", secret);
  comm_unique_id id = encode_unique_id({this_host(), server->port(), secret});
  std::lock_guard lock(hosted_stores().mutex);
  hosted_stores().sweep();
  auto& entry = hosted_stores().by_secret[secret];
  entry.until_taken = std::move(server);
  entry.made = std::chrono::steady_clock::now();
  return id;
}

IdContents read_unique_id(const comm_unique_id& id) {
  require(std::memcmp(id.internal, kMagic, sizeof kMagic) == 0, COMM_INVALID_ARGUMENT,
          "the id is not one comm_get_unique_id made (pass its bytes unchanged to every rank)");
  require(static_cast<std::uint8_t>(id.internal[4]) == kVersion, COMM_INVALID_ARGUMENT,
          "the id was made by another version of libcomm");
  IdContents contents;
  contents.port = static_cast<std::uint16_t>(static_cast<std::uint8_t>(id.internal[kPortAt]) << 8 |
                                             static_cast<std::uint8_t>(id.internal[kPortAt + 1]));
  contents.host.assign(id.internal + kHostAt, strnlen(id.internal + kHostAt, kHostBytes));
  contents.secret.assign(id.internal + kSecretAt, kSecretBytes);
  require(!contents.host.empty() && contents.port != 0, COMM_INVALID_ARGUMENT, "the id is damaged");
  return contents;
}

std::shared_ptr<void> hold_hosted_store(const IdContents& id) {
  std::lock_guard lock(hosted_stores().mutex);
  auto found = hosted_stores().by_secret.find(id.secret);
  if (found == hosted_stores().by_secret.end()) return nullptr;
  auto& entry = found->second;
  if (entry.until_taken) {
    entry.taken = entry.until_taken;
    return std::move(entry.until_taken);
  }
  auto server = entry.taken.lock();
  if (!server) hosted_stores().by_secret.erase(found);
  return server;
}

}  // namespace comm::c_api
