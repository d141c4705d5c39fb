// Marking a descriptor close-on-exec after the fact, for sockets a library (Asio) opened without
// it: a process that starts others (commrun, a rank running a subprocess) must not hand them its
// store sockets.
#pragma once

namespace comm {

// False (errno set) when fcntl refused.
bool set_close_on_exec(int fd);

}  // namespace comm
