// The flight recorder, from a program: every rank keeps its recent calls (COMM_TRACE entries,
// default 4096; 0 turns it off) and writes them as one JSON file on a hang verdict, on an error
// that ends a call, on SIGUSR2 and at exit when COMM_TRACE_DIR is set; dump_trace writes it now.
// docs/debugging.md shows what to do with the files (commrun --trace merges a job's into one
// timeline).
#pragma once

#include <string>

namespace comm {

// Writes this process's flight recorder into `dir` (empty: COMM_TRACE_DIR, else $TMPDIR or /tmp)
// as comm_trace_rank<R>.json, replacing a dump there whole; returns the file's path. Throws
// InvalidArgumentError when the recorder is off or no process group was made yet, IoError when
// the file cannot be written.
std::string dump_trace(const std::string& dir = "");

}  // namespace comm
