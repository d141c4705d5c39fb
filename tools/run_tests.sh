#!/usr/bin/env bash
# Runs the whole test suite of ./build (or the build directory given) with meson and closes with
# one line 'N passed, N failed, N skipped' counted from meson's results. Exit status: meson's.
#   bash tools/run_tests.sh [build-dir] [meson test options...]
set -uo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
shift || true
# Test-only packages from Debian's archive: Open MPI's mpirun for the mpirun test (which is
# skipped, saying so, where it cannot be had).
if ! command -v mpirun >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  echo "run_tests: installing openmpi-bin for the mpirun test"
  apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null; } ||
    echo "run_tests: could not install openmpi-bin; the mpirun test will be skipped"
fi
# valgrind, under which the C API's hostile-call tests prove no freed memory is touched (they run
# without it, weaker, where it cannot be had).
if ! command -v valgrind >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "run_tests: installing valgrind for the C API's hostile-call tests"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null 2>&1 ||
    echo "run_tests: could not install valgrind; those tests run without it"
fi
log="$builddir/meson-logs/testlog.json"
rm -f "$log"
meson test -C "$builddir" --print-errorlogs "$@"
status=$?
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if [ -f "$log" ]; then
  "$python" - "$log" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    result = json.loads(line)["result"]
    if result in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif result == "SKIP":
        skipped += 1
    else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS
        failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
else
  echo "0 passed, 1 failed, 0 skipped"
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
