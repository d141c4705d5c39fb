// Matching receives to messages (transport/matcher.hpp): for one (source, tag) the n-th message
// takes the n-th receive, any-source receives take their turn in posting order, and a withdrawn
// receive is never matched, however the posted receives are taken (from the front, from the
// middle) and however many are posted, against a list kept by the test.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "transport/matcher.hpp"
#include "transport/transport.hpp"

using comm::detail::Completion;
using comm::transport::kAnySource;
using comm::transport::Matcher;
using comm::transport::PostedReceive;

TEST_CASE("receives are matched in posting order, from the front or the middle, across compactions") {
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
      std::optional<PostedReceive> taken;
      bool found = matcher.take_receive(source, tag, taken);
      if (found != (expected != reference.end())) {
        ++wrong;
      } else if (found) {
        wrong += taken->completion != expected->completion;
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
