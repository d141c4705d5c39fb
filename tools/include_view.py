#!/usr/bin/env python3
"""Makes one layer's view of the source tree: a folder of symbolic links to exactly the headers
that layer may include, which the build gives the layer's targets as their only include root.
An include of anything else then fails to compile (meson.build lists the views).

    include_view.py VIEW SOURCE_ROOT ENTRY...

Each ENTRY is a path as an include line names it: a folder ("transport/tcp") or one header
("transport/socket.hpp"); "comm/..." names the public headers under libcomm/include/comm/.
The view is made afresh each time, so an entry taken out of meson.build goes from the view too.
"""
import os
import shutil
import sys

PUBLIC_PREFIX = "comm"
PUBLIC_ROOT = os.path.join("libcomm", "include")


def source_of(root, entry):
    first = entry.split("/", 1)[0]
    base = os.path.join(root, PUBLIC_ROOT) if first == PUBLIC_PREFIX else root
    path = os.path.join(base, entry)
    if not os.path.exists(path):
        sys.exit(f"include_view.py: '{entry}' is in no view's reach: {path} does not exist")
    return path


def make_view(view, root, entries):
    # Folders a view names above another's entries ("transport" beside "transport/tcp") would
    # hide the finer entry: refuse the overlap instead of guessing.
    for entry in entries:
        for other in entries:
            if other != entry and other.startswith(entry + "/"):
                sys.exit(f"include_view.py: '{other}' lies inside '{entry}'; name one of them")
    staging = view + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    for entry in entries:
        link = os.path.join(staging, entry)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(source_of(root, entry), link)
    shutil.rmtree(view, ignore_errors=True)
    os.replace(staging, view)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    make_view(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:])
