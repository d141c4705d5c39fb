#!/usr/bin/env bash
# Issue 27, item 1, end to end: another user plants a symlink at /dev/shm/commrun-cores.lock
# before root runs commrun. In a private mount namespace with a tmpfs of its own on /dev/shm (so
# the machine's is untouched) and fs.protected_symlinks as the machine has it, commrun must run
# the job, say why it does not pin, and create nothing where the link points.
#   lock_file_namespace.sh COMMRUN HELLO
set -euo pipefail
commrun=$1
hello=$2
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "needs root and unshare -m; skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
echo "fs.protected_symlinks = $(cat /proc/sys/fs/protected_symlinks)"

# shellcheck disable=SC2016
unshare -m --propagation private bash -c '
  set -euo pipefail
  mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
  # The link belongs to another user, as a hostile local user would leave it.
  ln -s "$1/preload" /dev/shm/commrun-cores.lock
  chown -h 65534:65534 /dev/shm/commrun-cores.lock
  timeout 60 "$2" -n 2 "$3" >"$1/out" 2>&1 || { echo "commrun failed:"; cat "$1/out"; exit 1; }
  cat "$1/out"
  grep -q "not pinning ranks: .*symbolic link" "$1/out" || { echo "commrun did not say why it does not pin"; exit 1; }
  [ -L /dev/shm/commrun-cores.lock ] || { echo "the planted link was replaced"; exit 1; }
' lock-test "$work" "$commrun" "$hello"

if [ -e "$work/preload" ]; then
  echo "FAIL: commrun created $(stat -c '%U %a' "$work/preload") $work/preload through the planted link"
  exit 1
fi
echo "ok: the link was not followed; nothing was created where it points"
