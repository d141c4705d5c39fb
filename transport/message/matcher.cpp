#include "transport/message/matcher.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/transport.hpp"

namespace comm::transport {

void Matcher::compact() {
  if (first_ * 2 >= posted_.size()) {
    posted_.erase(posted_.begin(), live_begin());
    first_ = 0;
  }
}

PostedReceive* Matcher::match(int source, std::uint64_t tag) {
  for (auto it = live_begin(); it != posted_.end(); ++it) {
    if (it->tag == tag && (it->source == source || it->source == kAnySource)) return &*it;
  }
  return nullptr;
}

void Matcher::remove_matched(PostedReceive* matched) {
  if (matched == &posted_.back()) {
    posted_.pop_back();
    if (first_ != 0 && first_ == posted_.size()) {  // only moved-from receives are left
      posted_.clear();
      first_ = 0;
    }
  } else if (matched == &posted_[first_]) {
    *matched = {};  // lets go of its completion now, as a moved-from receive would
    ++first_;
  } else {
    posted_.erase(posted_.begin() + (matched - posted_.data()));
  }
}

bool Matcher::take_receive(int source, std::uint64_t tag, std::optional<PostedReceive>& into) {
  PostedReceive* matched = match(source, tag);
  if (matched == nullptr) return false;
  into.emplace(std::move(*matched));
  remove_matched(matched);
  return true;
}

bool Matcher::withdraw(const detail::Completion* completion) {
  auto found = std::find_if(live_begin(), posted_.end(),
                            [&](const PostedReceive& receive) { return receive.completion.get() == completion; });
  if (found == posted_.end()) return false;
  posted_.erase(found);
  return true;
}

UnexpectedMessage* Matcher::find_unexpected(const PostedReceive& receive) {
  for (auto& message : unexpected_) {
    if (message.claimed_by || message.dropped) continue;
    if (message.tag == receive.tag && (receive.source == kAnySource || message.source == receive.source)) {
      return &message;
    }
  }
  return nullptr;
}

UnexpectedMessage& Matcher::add_unexpected(UnexpectedMessage message) {
  unexpected_.push_back(std::move(message));
  return unexpected_.back();
}

void Matcher::remove_unexpected(const UnexpectedMessage* message) {
  auto it = std::find_if(unexpected_.begin(), unexpected_.end(), [&](const auto& m) { return &m == message; });
  if (it != unexpected_.end()) unexpected_.erase(it);
}

std::vector<PostedReceive> Matcher::take_conflicting_receives(int source, std::uint64_t tag,
                                                              std::uint64_t fingerprint) {
  std::vector<PostedReceive> taken;
  if (fingerprint == 0) return taken;
  auto keep = std::stable_partition(live_begin(), posted_.end(), [&](const PostedReceive& receive) {
    bool from_source = receive.source == source || receive.source == kAnySource;
    return !(from_source && same_call(receive.tag, tag) && conflicting(receive.fingerprint, fingerprint));
  });
  for (auto it = keep; it != posted_.end(); ++it) taken.push_back(std::move(*it));
  posted_.erase(keep, posted_.end());
  return taken;
}

const UnexpectedMessage* Matcher::find_conflicting(const PostedReceive& receive) const {
  if (receive.fingerprint == 0) return nullptr;
  for (const auto& message : unexpected_) {
    bool from_source = receive.source == kAnySource || message.source == receive.source;
    if (from_source && same_call(message.tag, receive.tag) && conflicting(message.fingerprint, receive.fingerprint)) {
      return &message;
    }
  }
  return nullptr;
}

std::vector<PostedReceive> Matcher::take_receives_from(int source, bool include_any_source) {
  std::vector<PostedReceive> taken;
  auto keep = std::stable_partition(live_begin(), posted_.end(), [&](const PostedReceive& receive) {
    return !(receive.source == source || (include_any_source && receive.source == kAnySource));
  });
  for (auto it = keep; it != posted_.end(); ++it) taken.push_back(std::move(*it));
  posted_.erase(keep, posted_.end());
  return taken;
}

std::vector<UnexpectedMessage> Matcher::take_incomplete_from(int source) {
  std::vector<UnexpectedMessage> taken;
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->source == source && !it->arrived) {
      taken.push_back(std::move(*it));
      it = unexpected_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

Matcher::GroupTaken Matcher::take_group(std::uint32_t group) {
  GroupTaken taken;
  auto keep = std::stable_partition(live_begin(), posted_.end(),
                                    [&](const PostedReceive& receive) { return group_of(receive.tag) != group; });
  for (auto it = keep; it != posted_.end(); ++it) taken.receives.push_back(std::move(*it));
  posted_.erase(keep, posted_.end());
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (group_of(it->tag) != group) {
      ++it;
    } else if (it->rendezvous) {
      taken.announced.push_back(std::move(*it));
      it = unexpected_.erase(it);
    } else if (it->arrived) {
      it = unexpected_.erase(it);
    } else {  // the stream is writing its payload: removed when that is in
      if (it->claimed_by) taken.receives.push_back(std::move(*std::exchange(it->claimed_by, std::nullopt)));
      it->dropped = true;
      ++it;
    }
  }
  return taken;
}

}  // namespace comm::transport
