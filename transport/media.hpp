// The media this build carries bytes over, in the automatic choice's order of preference: the
// one list a new medium adds itself to (transport/media.cpp), and how a job names one.
#pragma once

#include <span>
#include <string>

#include "transport/medium.hpp"

namespace comm::transport {

std::span<const MediumEntry> media();

// The medium a job asks for: "auto" (null: each peer over the first automatic medium that
// reaches it) or a name in media(); throws InvalidArgumentError naming where the text came from
// and the names there are.
const MediumEntry* parse_medium_choice(const std::string& text, const std::string& source);

}  // namespace comm::transport
