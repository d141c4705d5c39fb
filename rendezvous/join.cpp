#include "rendezvous/join.hpp"

#include "libcomm/base/check.hpp"

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "libcomm/base/check.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/base/environment.hpp"
#include "rendezvous/store_format.hpp"

namespace comm {
namespace {

std::string identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(random() % 1000000);
}

std::string without_nonce(const std::string& identity) { return identity.substr(0, identity.rfind(':')); }

// Publishes the first disagreement so every rank waiting on status learns of it at once.
[[noreturn]] void fail(Store& store, const std::string& message) {
  store.compare_set("status", "", "error: " + message);
  throw MismatchError(message, ErrorContext{.op = "init_process_group"});
}

std::string missing_ranks(Store& store, int world_size) {
  std::string text;
  int shown = 0, missing = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    if (store.check({"rank/" + std::to_string(rank)})) continue;
    ++missing;
    if (shown++ < 16) text += (text.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (missing > shown) text += " and " + std::to_string(missing - shown) + " more";
  return text;
}

// Every process of a job gets its rank the same way: a given rank among automatic ones would
// be handed out again by the counter, or leave a hole no process fills.
void agree_rank_assignment(Store& store, bool automatic) {
  std::string mine = automatic ? "automatic" : "given";
  std::string agreed = store.compare_set("ranks", "", mine);
  if (agreed == mine) return;
  // Published to every process of the job, so it says what is wrong without "this one".
  fail(store,
       "the processes of this job got their ranks in two ways: some were given theirs (InitOptions::rank, "
       "?rank= or RANK), others asked for automatic ones; give every process of the job a rank, or none");
}

}  // namespace

int claim_automatic_rank(Store& store, int world_size, const std::string& where) {
  agree_rank_assignment(store, true);
  std::int64_t arrival = store.add("next_rank", 1);
  if (arrival > world_size) {
    throw InvalidArgumentError("all " + std::to_string(world_size) + " ranks of " + where +
                                   " are taken: this is process " + std::to_string(arrival) +
                                   " to ask for an automatic rank. Start world size processes, no more; give "
                                   "another job its own group_name (or file); or delete the file an earlier run left",
                               ErrorContext{.op = "init_process_group"});
  }
  return static_cast<int>(arrival - 1);
}

namespace {

// A join that failed is published in "status"; the store may live in this process, which is
// about to throw. The ranks waiting on it (those that joined) get up to 500 ms to read the cause
// first, else a reply still on its way to them goes with the store and they see only a store
// that vanished. Every rank that read it counts itself.
void let_the_others_read_status(Store& store, const JoinRequest& request) {
  if (!request.hosts_store) return;
  try {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (store.add("status_read", 0) < store.add("joined", 0) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const Error&) {
    // The store is gone already: nobody is left to tell.
  }
}

void join_group_or_fail(Store& store, const JoinRequest& request);

}  // namespace

void join_group(Store& store, const JoinRequest& request) {
  try {
    join_group_or_fail(store, request);
  } catch (const MismatchError&) {
    // Refused before joining (fail()), or the published status said so: either way the cause is
    // in "status" for the others.
    let_the_others_read_status(store, request);
    throw;
  }
}

namespace {

void join_group_or_fail(Store& store, const JoinRequest& request) {
  if (!request.automatic_rank) agree_rank_assignment(store, false);
  std::string world_size = std::to_string(request.world_size);
  std::string agreed = store.compare_set("world_size", "", world_size);
  if (agreed != world_size) {
    fail(store, "rank " + std::to_string(request.rank) + " was started with world size " + world_size +
                    " but ranks that joined earlier use " + agreed +
                    "; start every rank with the same WORLD_SIZE / -n");
  }

  std::string me = identity();
  std::string rank_key = "rank/" + std::to_string(request.rank);
  std::string owner = store.compare_set(rank_key, "", me);
  if (owner != me) {
    fail(store, "rank " + std::to_string(request.rank) + " was claimed twice, by " + without_nonce(owner) + " and by " +
                    without_nonce(me) +
                    "; give every process its own RANK (or, with file://, delete a file left by an earlier run)");
  }

  if (store.add("joined", 1) == request.world_size) store.compare_set("status", "", "ok");

  std::string status;
  try {
    auto value = store.get("status", request.timeout);
    status.assign(value.begin(), value.end());
  } catch (TimeoutError&) {
    std::string who;
    try {
      who = std::to_string(store.add("joined", 0)) + " of " + world_size +
            " ranks joined; missing rank(s): " + missing_ranks(store, request.world_size);
    } catch (const Error& error) {  // the store itself went away (its host gave up first)
      who = "could not ask the store which ranks are missing (" + error.message() + ")";
    }
    throw TimeoutError("timed out after " + seconds_text(request.timeout) + ": " + who +
                           ". Start the missing ranks, and check that every rank uses the same "
                           "MASTER_ADDR/MASTER_PORT (or URL) and WORLD_SIZE",
                       ErrorContext{.op = "init_process_group"});
  }
  if (status != "ok") {
    try {
      store.add("status_read", 1);
    } catch (const Error&) {
    }
    throw MismatchError(status.substr(status.find(' ') + 1), ErrorContext{.op = "init_process_group"});
  }
}

}  // namespace

void finish_join(Store& store, const JoinRequest& request) {
  store.set("acked/" + std::to_string(request.rank), "1");
  if (store.add("acked", 1) == request.world_size) store.set("all_acked", "1");
  // Every rank waits, not only the one hosting the store: init then returns nowhere before it
  // has succeeded everywhere, so no rank runs collectives while another is still connecting
  // (a failure then has one phase, and every rank hears of it the same way).
  store.wait({"all_acked"}, request.timeout);
  // The rank hosting the store leaves last: a rank still waiting for all_acked when the store's
  // process exits would lose it. A rank that is through may exit: that is no death.
  store.set("through/" + std::to_string(request.rank), "1");
  if (store.add("through", 1) == request.world_size) store.set("all_through", "1");
  if (request.hosts_store) store.wait({"all_through"}, request.timeout);
}

namespace {

// "<code> <peer> <message>"
std::string encode_failure(const Error& error) {
  return std::to_string(static_cast<int>(error.code())) + " " + std::to_string(error.peer()) + " " + error.message();
}

[[noreturn]] void throw_failure(const std::string& text, int rank) {
  int code = 0, peer = -1;
  std::size_t first = text.find(' '), second = text.find(' ', first + 1);
  try {
    code = std::stoi(text.substr(0, first));
    peer = std::stoi(text.substr(first + 1, second - first - 1));
  } catch (const std::exception&) {
    throw IoError("another rank failed while the group was being made: " + text,
                  ErrorContext{.rank = rank, .op = "init_process_group"});
  }
  std::rethrow_exception(detail::error_of_code(static_cast<ErrorCode>(code), text.substr(second + 1),
                                               ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"}));
}

// Counts this rank among those that have read the failure, once however often it looks.
void note_seen(Store& store, const std::string& key, int rank) {
  if (store.add(key + "/seen/" + std::to_string(rank), 1) == 1) store.add(key + "/seen", 1);
}

// The store may live in this process, which is likely to exit on this error: give the group's
// other survivors (who look every 100 ms or so) up to 500 ms to read the cause first. Every
// survivor, the publisher included, counts itself once it has read it; one rank (the dead one)
// is not expected to.
void wait_for_readers(Store& store, const std::string& key, int size) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (store.add(key + "/seen", 0) < size - 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

bool leave_word_of_death(Store& store, const std::string& key, int rank) {
  PeerClosedError death("rank " + std::to_string(rank) + " (" + without_nonce(identity()) +
                            ") died before it had connected to the other ranks (the store saw its connection "
                            "close); the other ranks stop here instead of waiting out the timeout: look at rank " +
                            std::to_string(rank) + "'s output for why it ended",
                        ErrorContext{.peer = rank, .op = "init_process_group"});
  return store.leave_last_word(key, encode_failure(death));
}

void withdraw_word_of_death(Store& store, const std::string& key) { store.withdraw_last_word(key); }

void fail_join(Store& store, const std::string& key, const Error& error, int rank, int size) {
  std::string mine = encode_failure(error), first;
  try {
    first = store.compare_set(key, "", mine);
    note_seen(store, key, rank);
    if (first == mine || store.serves_others()) wait_for_readers(store, key, size);
  } catch (const Error& store_error) {
    // The store is gone too, most likely with the rank that hosted it, which may be why this
    // rank's connections broke: say both (once, when that is this rank's error already).
    first = mine;
    if (error.message() != store_error.message()) first += "; and the store is unreachable: " + store_error.message();
  }
  throw_failure(first, rank);
}

void throw_if_join_failed(Store& store, const std::string& key, int rank, int size) {
  if (!store.check({key})) return;
  std::string first = store.get_string(key);
  note_seen(store, key, rank);
  // A cause no rank published (a dead rank's last word, written by the store) has no publisher
  // to wait for the readers: the rank serving the store does.
  if (store.serves_others()) wait_for_readers(store, key, size);
  throw_failure(first, rank);
}

void throw_if_join_failed_or_store_lost(Store& store, const std::string& key, int rank, int size) {
  try {
    throw_if_join_failed(store, key, rank, size);
  } catch (const IoError& error) {
    if (error.op().rfind("store.", 0) != 0) throw;  // a published failure that is an I/O error
  }
}

AgreedSecret agree_job_secret(Store& store) {
  if (auto secret = JobSecret::from_environment()) return {std::move(*secret), true};
  return {JobSecret(store.compare_set("job_token", "", JobSecret::generate().text())), false};
}

}  // namespace comm
