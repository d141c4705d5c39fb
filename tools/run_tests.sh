#!/usr/bin/env bash
# Runs the whole test suite of ./build (or the build directory given) with meson and closes with
# one line 'N passed, N failed, N skipped' counted from meson's results. Exit status: meson's.
#   bash tools/run_tests.sh [build-dir] [meson test options...]
set -uo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
shift || true
# Test-only packages from Debian's archive, installed where missing (as root); a test that needs
# one says so, and is skipped or runs weaker, where it cannot be had.
#   install_for_tests COMMAND PACKAGE WHAT-IT-IS-FOR
install_for_tests() {
  command -v "$1" >/dev/null && return
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null || return
  echo "run_tests: installing $2 for $3"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" \
      >/dev/null; } ||
    echo "run_tests: could not install $2; $3 goes without it"
}
install_for_tests mpirun openmpi-bin "the mpirun test"
install_for_tests valgrind valgrind "the C API's hostile-call tests (no freed memory touched)"
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
