#!/usr/bin/env bash
# Installs what libcomm needs from Debian's archive (only what is missing), makes the project's
# virtual environment .venv with torch 2.13.0 from PyPI (tools/python-requirements.txt), then
# configures and builds everything in ./build, the torch backend against .venv's torch. Run as
# root on Debian 12 (bookworm) or 13 (trixie); safe to run again.
#   bash tools/setup.sh [extra meson setup options...]
#   bash tools/setup.sh --main-job   (the packages; then only what the README's main job runs,
#                                     commrun and examples/hello in ./build-main, unoptimized
#                                     and without CUDA or torch; runs it (4 ranks of hello); then
#                                     .venv. So a first run's lines come quickly.)
#   PYTHON=python3.11 bash tools/setup.sh     (the Python .venv is made from; default: python3.11
#                                              where there is one, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
main_job=false
if [ "${1:-}" = --main-job ]; then
  main_job=true
  shift
fi

# Catch2 v3 and Meson >= 1.7 come from bookworm-backports (Debian's own archive).
main_packages=(g++ ninja-build pkg-config libasio-dev libspdlog-dev libfmt-dev libssl-dev python3 iproute2
               python3-dev python3-venv)
backports_packages=(meson libcatch2-dev)
debian_release=$(cut -d. -f1 /etc/debian_version 2>/dev/null || echo 12)
# Debian 13 has Meson >= 1.7 and Catch2 v3 in its own archive: no backports needed.
if [ "$debian_release" -ge 13 ] 2>/dev/null; then
  main_packages+=("${backports_packages[@]}")
  backports_packages=()
fi

missing() {
  for package in "$@"; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$' || echo "$package"
  done
}

need_main=$(missing "${main_packages[@]}" | tr "\n" " ")
need_backports=$( ((${#backports_packages[@]})) && missing "${backports_packages[@]}" | tr "\n" " " || true)
# An older meson from bookworm itself (1.0) is not enough.
if ((${#backports_packages[@]})) && command -v meson >/dev/null &&
  ! dpkg --compare-versions "$(meson --version)" ge 1.7; then
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

# The virtual environment: torch and what its test suite imports. pip does nothing when all of it
# is there already.
make_venv() {
  if [ ! -x .venv/bin/python ]; then
    python=${PYTHON:-$(command -v python3.11 || command -v python3)}
    echo "setup: making the virtual environment .venv with $python ($("$python" --version 2>&1))"
    "$python" -m venv .venv
  fi
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -r tools/python-requirements.txt \
    >.venv/pip-install.log 2>&1; then
    grep -v "is ignored: it is neither a file nor a directory" .venv/pip-install.log >&2
    echo "setup: pip could not install tools/python-requirements.txt into .venv" >&2
    exit 1
  fi
  .venv/bin/python -c "import torch" || { echo "setup: torch does not import in .venv" >&2; exit 1; }
}

if $main_job; then
  # Its own folder, so that ./build keeps the one configuration every test and bench uses.
  # Optimizing the library is most of a full build's time, and hello does not need it. The main
  # job runs before the virtual environment is made (the torch backend's, not hello's), so that
  # its lines come first.
  [ -f build-main/build.ninja ] ||
    meson setup build-main --buildtype=plain -Dcuda=disabled -Dtorch=disabled -Dtests=false -Dbench=false \
      -Dnccl_abi=false "$@"
  ninja -C build-main rendezvous/programs/commrun examples/hello
  echo "setup: the main job: build-main/rendezvous/programs/commrun -n 4 build-main/examples/hello"
  build-main/rendezvous/programs/commrun -n 4 build-main/examples/hello
  make_venv
  exit 0
fi

make_venv
torch_python="-Dtorch_python=$PWD/.venv/bin/python"
if [ ! -f build/build.ninja ]; then
  meson setup build "$torch_python" "$@"
else
  meson configure build "$torch_python" "$@"
fi
ninja -C build
