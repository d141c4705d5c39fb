#!/usr/bin/env bash
# Runs a test program under valgrind (any invalid read or write fails it), or as it is where
# valgrind is not installed (tools/run_tests.sh installs it where it can).
#   under_valgrind.sh PROGRAM [ARGS...]
if command -v valgrind >/dev/null; then
  # Asio frees its aligned handler memory with plain delete (valgrind calls that mismatched; it is
  # not a fault of ours), so mismatched frees are not counted.
  exec valgrind --error-exitcode=9 --quiet --leak-check=no --show-mismatched-frees=no "$@"
fi
echo "under_valgrind: valgrind is not installed; running $1 without it"
exec "$@"
