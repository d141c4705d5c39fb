#!/usr/bin/env bash
# Installs what libcomm needs from Debian's archive (only what is missing), then configures and
# builds it in ./build. Run as root on Debian 12 (bookworm); safe to run again.
#   bash tools/setup.sh [extra meson setup options...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Catch2 v3 and Meson >= 1.7 come from bookworm-backports (Debian's own archive).
main_packages=(g++ ninja-build pkg-config libasio-dev libspdlog-dev libfmt-dev libssl-dev python3 iproute2
               python3-dev pybind11-dev libtorch-dev python3-torch)
backports_packages=(meson libcatch2-dev)

missing() {
  for package in "$@"; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$' || echo "$package"
  done
}

need_main=$(missing "${main_packages[@]}" | tr "\n" " ")
need_backports=$(missing "${backports_packages[@]}" | tr "\n" " ")
# An older meson from bookworm itself (1.0) is not enough.
if command -v meson >/dev/null && ! dpkg --compare-versions "$(meson --version)" ge 1.7; then
  need_backports="meson $need_backports"
fi

if [ -n "$need_main$need_backports" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: $need_main $need_backports; run this script as root to install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/bookworm-backports.list
  fi
  echo "setup: installing: $need_main $need_backports"
  apt-get update -qq
  # shellcheck disable=SC2086
  [ -z "$need_main" ] || apt-get install -y -qq --no-install-recommends $need_main >/dev/null
  # shellcheck disable=SC2086
  [ -z "$need_backports" ] ||
    apt-get install -y -qq --no-install-recommends -t bookworm-backports $need_backports >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
elif [ $# -gt 0 ]; then
  meson configure build "$@"
fi
ninja -C build
