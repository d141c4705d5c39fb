// Writing the flight recorder's entries (flight_recorder.hpp) to a file, and when: on a call
// (comm::dump_trace), on SIGUSR2, on the hang verdict, on an error that ends a call, and at exit
// when COMM_TRACE_DIR is set. One JSON file per process, `comm_trace_rank<R>.json` (R: the
// world rank), written whole to a temporary name and renamed, so a reader never sees half of
// one. The format is docs/debugging.md's.
#pragma once

#include <string>

#include "libcomm/base/flight_recorder.hpp"

namespace comm::trace {

// Starts the recorder (COMM_TRACE), its SIGUSR2 dump and, with COMM_TRACE_DIR, the dump at exit:
// once per process, at the first group.
FlightRecorder& start();

// Writes a dump into `dir` (empty: COMM_TRACE_DIR, else $TMPDIR or /tmp); returns its path.
// Throws comm::Error when it cannot be written; InvalidArgumentError when tracing is off.
std::string dump(const std::string& dir, const char* reason);

// A dump into COMM_TRACE_DIR, if set, after an event (a hang verdict, an error); never throws:
// a dump that fails is logged, the event's own error is what the caller reports.
void dump_after(const char* reason) noexcept;

// A call ended by `error`: its entry finished as failed (revoked, for a revocation) with the
// error's text, and the dump after it.
void end_with_error(const Handle& handle, const std::exception& error) noexcept;

}  // namespace comm::trace
