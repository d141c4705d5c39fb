// Growing a running group: its ranks open places for newcomers in the job's store and all of
// them, old and new, make one group of the new size (make_world.hpp), the old ranks keeping
// their numbers. docs/recovery.md has the semantics.
#include "libcomm/src/group_growth.hpp"

#include <sstream>

#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/group.hpp"
#include "libcomm/src/make_world.hpp"

namespace comm {
namespace {

const char* const kOpenKey = "grow/open";

}  // namespace

void open_growth(Store& job_groups, const GrowthRecord& record) {
  job_groups.set(kOpenKey, std::to_string(record.generation) + " " + std::to_string(record.size) + " " +
                               std::to_string(record.count));
}

GrowthRecord read_growth(Store& job_groups) {
  std::string text = job_groups.get_string(kOpenKey);
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
  if (transport_->revoked_any()) throw_if_revoked(op, -1);  // a revoked group shrinks first
  // Every member knows which grow of this group this is; rank 0 draws the job-wide generation
  // (the grown group's name in the store) and tells the others and the newcomers.
  std::string announcement = "grow/announce/" + name() + "/" + std::to_string(++grows_);
  GrowthRecord record{0, size(), count};
  if (rank() == 0) {
    record.generation = static_cast<std::uint64_t>(store_->add("grow/generation", 1));
    store_->set(announcement, std::to_string(record.generation));
    open_growth(*store_, record);
  } else {
    record.generation = std::stoull(store_->get_string(announcement));
  }
  log::get(log::Subsystem::Group)
      .info("grow: group {} opens {} places for new ranks (join '{}'); waiting for them", name(), count, job_name());
  WorldPlace place{.store = std::make_shared<PrefixStore>(growth_prefix(record.generation), store_),
                   .name = job_name() + "/" + growth_prefix(record.generation),
                   .job_name = job_name(),
                   .rank = rank(),
                   .size = size() + count,
                   .local_rank = identity_.local_rank,
                   .local_size = identity_.local_size,
                   .timeout = timeout_,
                   .store_description = "the job's store",
                   .transport = medium_choice_,
                   .job_secret = job_secret_};
  return make_world(place);
}

}  // namespace comm
