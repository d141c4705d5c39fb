// A persistent call: one collective prepared once and run many times, as MPI-4's persistent
// collectives (MPI_Allreduce_init, MPI_Start, MPI_Wait). ProcessGroup::prepare checks the call's
// arguments, chooses its algorithm and describes it once; each run() or start() is then one
// collective of the group like any other (numbered in the group's order, matched against the
// other ranks' calls, watched for hangs and recorded), without that set-up. Every rank runs it
// when it would make the call; a rank may make the same call the ordinary way instead.
//
// The buffers stay the caller's: their contents may change between runs, their addresses and
// sizes may not. Calls on GPU buffers and point-to-point transfers may be prepared too; they
// are checked again at each run (nothing is saved for them yet). A PreparedCall must not
// outlive its group: a run after the group is gone is an InvalidArgumentError.
#pragma once

#include <memory>

#include "comm/work.hpp"

namespace comm {

class PreparedCall {
 public:
  class Impl;  // the library's side; programs get prepared calls from ProcessGroup::prepare
  explicit PreparedCall(std::unique_ptr<Impl> impl);
  ~PreparedCall();
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  // One run, waited on (as ProcessGroup::run).
  void run();
  // One run, queued behind the group's earlier calls (as ProcessGroup::start). Runs started
  // before earlier ones completed run after them, in order, on the same buffers.
  std::shared_ptr<Work> start();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace comm
