// How durations are written in messages ("2.5 s"), the same in every layer's errors.
#pragma once

#include <chrono>
#include <string>

namespace comm {

std::string seconds_text(std::chrono::milliseconds duration);

}  // namespace comm
