// Growing a running group: its ranks open places for newcomers in the job's store and all of
// them, old and new, make one group of the new size (make_world.hpp), the old ranks keeping
// their numbers. docs/recovery.md has the semantics.
#include "libcomm/src/group_growth.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/group.hpp"
#include "libcomm/src/make_world.hpp"
#include "rendezvous/join.hpp"

namespace comm {

void open_growth(Store& job_groups, const GrowthRecord& record) {
  job_groups.set(kGrowthOpenKey, std::to_string(record.generation) + " " + std::to_string(record.size) + " " +
                                     std::to_string(record.count));
}

GrowthRecord read_growth(Store& job_groups) {
  std::string text = job_groups.get_string(kGrowthOpenKey);
  GrowthRecord record;
  std::istringstream fields(text);
  fields >> record.generation >> record.size >> record.count;
  COMM_CHECK(fields && record.generation > 0 && record.size >= 1 && record.count >= 1, InvalidArgumentError,
             ErrorContext{.op = "init_process_group"},
             "the store's record of the group's growth is garbled ('" + text + "'); is another job using this store?");
  return record;
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::grow(int count) {
  const char* op = "grow";
  checks_.check_member(op);
  ErrorContext context{.rank = rank(), .op = op};
  COMM_CHECK(count >= 1, InvalidArgumentError, context,
             "count must be at least 1 (new processes to admit), got " + std::to_string(count));
  throw_if_stopped(op);
  if (transport_->revoked_any()) throw_if_revoked(op, -1);  // a revoked group shrinks first
  // Every member knows which grow of this group this is; rank 0 draws the job-wide generation
  // (the grown group's name in the store) and tells the others and the newcomers.
  std::string announcement = "grow/announce/" + name() + "/" + std::to_string(++grows_);
  GrowthRecord record{0, size(), count};
  try {
    if (rank() == 0) {
      record.generation = static_cast<std::uint64_t>(job_store_->add("grow/generation", 1));
      job_store_->set(announcement, std::to_string(record.generation));
      open_growth(*job_store_, record);
    } else {
      record.generation = wait_for_announcement(announcement, op);
    }
    log::get(log::Subsystem::Group)
        .info("grow: group {} opens {} places for new ranks (join '{}'); waiting for them", name(), count, job_name());
    WorldPlace place{.store = std::make_shared<PrefixStore>(growth_prefix(record.generation), job_store_),
                     .job_store = job_store_,
                     .name = job_name() + "/" + growth_prefix(record.generation),
                     .job_name = job_name(),
                     .rank = rank(),
                     .size = size() + count,
                     .local_rank = identity_.local_rank,
                     .local_size = identity_.local_size,
                     .timeout = timeout_,
                     .store_description = "the job's store",
                     .transport = medium_choice_,
                     .job_secret = job_secret_,
                     // A member that dies before it joins the grown group is seen by this one's
                     // transport (it revokes this group), not by the grown group's store.
                     .also_watch = [this, op] {
                       if (transport_->revoked_any()) throw_if_revoked(op, -1);
                     }};
    return make_world(place);
  } catch (const Error& error) {
    // Newcomers that took a place of this growth hear why it failed (and wait for the next).
    publish_growth_failure(announcement, record.generation, error, size() + count);
    throw;
  }
}

// Rank 0's word of the growth; a death in the group meanwhile (rank 0's, say) revokes it.
std::uint64_t ProcessGroup::Impl::wait_for_announcement(const std::string& announcement, const char* op) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (auto pause = std::chrono::milliseconds(1); !job_store_->check({announcement});
       pause = std::min(pause * 2, std::chrono::milliseconds(20))) {
    if (transport_->revoked_any()) throw_if_revoked(op, -1);
    COMM_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError, (ErrorContext{.rank = rank(), .op = op}),
               "rank 0 of group " + name() + " has not opened the places for new ranks within " +
                   std::to_string(timeout_.count()) + " ms; does every member call grow() with the same count?");
    std::this_thread::sleep_for(pause);
  }
  return std::stoull(job_store_->get_string(announcement));
}

void ProcessGroup::Impl::publish_growth_failure(const std::string& announcement, std::uint64_t generation,
                                                const Error& error, int grown_size) {
  try {
    if (generation == 0 && job_store_->check({announcement}))
      generation = std::stoull(job_store_->get_string(announcement));
    if (generation == 0) return;  // never opened: no newcomer took a place of it
    PrefixStore growth(growth_prefix(generation), job_store_);
    fail_join(growth, join_failure_key(0), error, rank(), grown_size);
  } catch (const Error&) {
    // fail_join throws the first failure published: this one's or another member's; the
    // caller throws its own. A store gone leaves newcomers to find the members gone.
  }
}

}  // namespace comm
