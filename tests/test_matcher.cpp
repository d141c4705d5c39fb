// Matching receives to messages (transport/message/matcher.hpp): for one (source, tag) the n-th message
// takes the n-th receive, any-source receives take their turn in posting order, and a withdrawn
// receive is never matched, however the posted receives are taken (from the front, from the
// middle) and however many are posted, against a list kept by the test.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "transport/message/matcher.hpp"
#include "transport/transport.hpp"

using comm::detail::Completion;
using comm::transport::kAnySource;
using comm::transport::Matcher;
using comm::transport::PostedReceive;

TEST_CASE("receives are matched in posting order, from the front or the middle, in place or moved, across compactions") {
  std::mt19937 random(12345);
  Matcher matcher;
  struct Posted {
    int source;
    std::uint64_t tag;
    std::shared_ptr<Completion> completion;
  };
  std::vector<Posted> reference;  // what is posted, in order
  int wrong = 0;
  for (int step = 0; step < 20000; ++step) {
    int action = static_cast<int>(random() % 10);
    if (action < 5 || reference.empty()) {
      int source = random() % 5 == 0 ? kAnySource : static_cast<int>(random() % 3);
      std::uint64_t tag = random() % 4;
      auto completion = std::make_shared<Completion>();
      matcher.post(PostedReceive{source, tag, nullptr, 0, completion, 0, {}});
      reference.push_back({source, tag, completion});
    } else if (action < 9) {
      int source = static_cast<int>(random() % 3);
      std::uint64_t tag = random() % 4;
      auto expected = std::find_if(reference.begin(), reference.end(), [&](const Posted& posted) {
        return posted.tag == tag && (posted.source == source || posted.source == kAnySource);
      });
      // Half the time matched in place and removed (a whole message on arrival), else moved out.
      std::shared_ptr<Completion> matched;
      if (random() % 2 == 0) {
        if (PostedReceive* receive = matcher.match(source, tag)) {
          matched = receive->completion;
          matcher.remove_matched(receive);
        }
      } else if (std::optional<PostedReceive> taken; matcher.take_receive(source, tag, taken)) {
        matched = taken->completion;
      }
      if ((matched != nullptr) != (expected != reference.end())) {
        ++wrong;
      } else if (matched) {
        wrong += matched != expected->completion;
        reference.erase(expected);
      }
    } else {
      auto victim = reference.begin() + static_cast<std::ptrdiff_t>(random() % reference.size());
      wrong += !matcher.withdraw(victim->completion.get());
      reference.erase(victim);
    }
  }
  // What is left is exactly what the reference holds, in order: a message that the earliest
  // receive left takes must be matched to that one.
  for (const Posted& posted : reference) {
    std::optional<PostedReceive> taken;
    int source = posted.source == kAnySource ? 0 : posted.source;
    REQUIRE(matcher.take_receive(source, posted.tag, taken));
    wrong += taken->completion != posted.completion;
  }
  std::optional<PostedReceive> none;
  CHECK_FALSE(matcher.take_receive(kAnySource, 0, none));
  CHECK(wrong == 0);
}

TEST_CASE("a revoked group's receives and messages are taken, and no other group's") {
  using comm::transport::UnexpectedMessage;
  auto tag_of = [](std::uint32_t group, std::uint64_t low) {
    return (std::uint64_t{group} << comm::transport::kGroupIdShift) | low;
  };
  Matcher matcher;
  std::vector<std::shared_ptr<Completion>> completions;
  for (std::uint32_t group : {0u, 5u, 5u, 7u}) {
    completions.push_back(std::make_shared<Completion>());
    matcher.post(PostedReceive{1, tag_of(group, 3), nullptr, 0, completions.back(), 0, {}});
  }
  // Of group 5: a whole eager message, one still arriving (claimed by a receive), an announced one.
  matcher.add_unexpected({2, tag_of(5, 1), 8, false, 0, true, {}, std::nullopt, 0});
  UnexpectedMessage& arriving = matcher.add_unexpected({2, tag_of(5, 2), 8, false, 0, false, {}, std::nullopt, 0});
  auto claiming = std::make_shared<Completion>();
  arriving.claimed_by = PostedReceive{2, tag_of(5, 2), nullptr, 8, claiming, 0, {}};
  matcher.add_unexpected({2, tag_of(5, 4), 1 << 20, true, 42, false, {}, std::nullopt, 0});
  matcher.add_unexpected({2, tag_of(7, 1), 8, false, 0, true, {}, std::nullopt, 0});

  auto taken = matcher.take_group(5);
  REQUIRE(taken.receives.size() == 3);  // the two posted, and the one that claimed the arriving message
  CHECK(taken.receives[0].completion == completions[1]);
  CHECK(taken.receives[1].completion == completions[2]);
  CHECK(taken.receives[2].completion == claiming);
  REQUIRE(taken.announced.size() == 1);
  CHECK(taken.announced[0].id == 42);
  CHECK(arriving.dropped);           // kept until its payload is in, then removed
  CHECK_FALSE(arriving.claimed_by);  // nothing will be delivered into the receive it had
  // The other groups are untouched.
  std::optional<PostedReceive> into;
  CHECK(matcher.take_receive(1, tag_of(0, 3), into));
  CHECK(matcher.take_receive(1, tag_of(7, 3), into));
  CHECK_FALSE(matcher.take_receive(1, tag_of(5, 3), into));
  PostedReceive other{2, tag_of(7, 1), nullptr, 8, std::make_shared<Completion>(), 0, {}};
  CHECK(matcher.find_unexpected(other) != nullptr);
  PostedReceive revoked{2, tag_of(5, 1), nullptr, 8, std::make_shared<Completion>(), 0, {}};
  CHECK(matcher.find_unexpected(revoked) == nullptr);
}
