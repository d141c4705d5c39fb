// Fuzz target: the bytes a C or NCCL program passes as a unique id (libcomm/c_api/unique_id.hpp),
// which may come from anywhere (a file, a broadcast). Read or refused, never a crash.
#include <cstdint>
#include <cstring>

#include "libcomm/c_api/results.hpp"
#include "libcomm/c_api/unique_id.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  comm_unique_id id{};
  std::memcpy(id.internal, data, size < sizeof id.internal ? size : sizeof id.internal);
  try {
    auto contents = comm::c_api::read_unique_id(id);
    (void)contents;
  } catch (const comm::c_api::CallError&) {
  }
  return 0;
}
