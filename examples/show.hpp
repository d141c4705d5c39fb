// A few lines the examples share: print a rank's data as "[1, 2, 3]" in one write, so lines
// from ranks running side by side do not interleave.
#pragma once

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

template <class T>
std::string show(const std::vector<T>& values) {
  std::ostringstream text;
  text << "[";
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? ", " : "") << values[i];
  text << "]";
  return text.str();
}

inline void say(const std::string& line) { std::cout << line + "\n" << std::flush; }
