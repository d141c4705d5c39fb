#!/bin/sh
# meson install hook: refresh the dynamic linker's cache so programs find the freshly installed
# libcomm.so at once (only for a real install as root, not a DESTDIR staging install).
if [ -z "${DESTDIR:-}" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then
  ldconfig
fi
