// The join protocol: how the ranks of a job meet in a store and agree they are all there.
//
// Keys (inside the group's prefix):
//   ranks        "given" or "automatic": how the first process to arrive got its rank; a job
//                mixing the two fails (an automatic rank would silently take a given one's)
//   next_rank    a counter: automatic ranks are handed out in arrival order
//   world_size   the first rank to arrive writes its world size; everyone compares
//   rank/R       claimed by rank R with a unique identity (host:pid:nonce); a second claim fails
//   joined       a counter; the rank that brings it to the world size writes status
//   status       "ok", or "error: ..." written by the first rank that found a disagreement
//   failure      the first error of any rank while the group is being made (see fail_join)
//   acked/R      rank R is done with its set-up
//   through/R    rank R has seen all_acked (it may exit now without that meaning it died);
//   through      a counter; the last rank writes all_through, which the rank hosting the store
//                waits for
//   acked        a counter; the rank that brings it to the world size writes all_acked, which
//                every rank waits for: so the rank hosting the store never shuts the server down
//                under ranks still reading their status, and no rank starts its first collective
//                while another is still making the group
#pragma once

#include <chrono>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"

namespace comm {

struct JoinRequest {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{};
  bool hosts_store = false;
  bool automatic_rank = false;  // rank came from claim_automatic_rank
};

// The next free rank of the group in arrival order, atomically (the store's add). Throws
// MismatchError when ranks of this group were given instead, and InvalidArgumentError when all
// `world_size` ranks are taken already (more processes than the world size, or what an earlier
// run left in a file). `where` names the store and group for that message.
int claim_automatic_rank(Store& store, int world_size, const std::string& where);

// Returns when every rank has joined. Throws MismatchError when ranks disagree (world size,
// duplicate rank) and TimeoutError naming the ranks that never arrived.
void join_group(Store& store, const JoinRequest& request);

// The last step, a barrier: after it no rank uses the store for this group's set-up, so the
// rank hosting the store may return (and exit) without pulling it from under the others.
void finish_join(Store& store, const JoinRequest& request);

// The first error of any rank while a group is being made, kept in the store under `key`, so
// that every rank reports that cause ("rank 2 died while ...") instead of naming the rank that
// stopped after it. fail_join publishes `error` unless another was first, and throws the first;
// throw_if_join_failed throws the published one, if any (ranks still waiting call it often).
// The rank that published it and the rank that serves the store wait up to 500 ms for the
// group's `size` - 1 survivors to have read it before they throw.
[[noreturn]] void fail_join(Store& store, const std::string& key, const Error& error, int rank, int size);
void throw_if_join_failed(Store& store, const std::string& key, int rank, int size);
// The same, except that a store that cannot be reached (its host died) is no answer: the
// caller goes on to look at the ranks themselves, which may say who died first.
void throw_if_join_failed_or_store_lost(Store& store, const std::string& key, int rank, int size);

// Until a rank holds a connection to every other, only the store can see it die: it leaves a
// last word under the failure key (a PeerClosedError naming it, as fail_join would publish),
// which the store writes if the rank's connection closes first, and which the others' waits look
// at. Withdrawn once the transport can see deaths itself. Stores that cannot notice a client
// ending (file://) leave the others to wait for the timeout, as before.
// Returns whether the store keeps last words.
bool leave_word_of_death(Store& store, const std::string& key, int rank);
void withdraw_word_of_death(Store& store, const std::string& key);

// The secret the transport's handshakes prove: the job's (COMM_JOB_TOKEN or COMM_JOB_TOKEN_FILE,
// never written to the store), else a random one agreed through the store, which keeps out
// only programs that cannot read the store. `from_user` says which.
struct AgreedSecret {
  JobSecret secret;
  bool from_user = false;
};
AgreedSecret agree_job_secret(Store& store);

}  // namespace comm
