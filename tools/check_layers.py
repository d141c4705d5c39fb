#!/usr/bin/env python3
"""The layer rules of libcomm, checked over every source file's #include lines.

A call goes one way down: rendezvous <- transport <- algorithms <- libcomm/src, with
libcomm/base (and the public headers) as the ground and cuda/ beside it. Every project header is
included by its path from the repository root ("transport/transport.hpp"), or "comm/..." for a
public header, so the include line itself says which component it reaches into. This script
fails (exit 1) on an include that crosses a forbidden edge, names a header by a bare file name,
or names one that does not exist.

The build itself refuses most forbidden includes: each layer compiles against an include view
that holds only what it may include (meson.build's layer_views, tools/include_view.py). What a
view cannot say is checked here: a view also holds what a layer's allowed headers include (a
medium sees transport.hpp's own includes), tests and fuzz targets see the whole tree, and a
bare or relative include name would be found beside the including file whatever the view.

    check_layers.py [repository root]

The rules, in order: the first component whose folder holds the file decides what it may
include. A component may always include its own headers (files in its folder and below).
"""
import os
import re
import sys

PUBLIC = "comm/"  # public headers, under libcomm/include/comm/
BASE = "libcomm/base/"

# (component folder, what it may include besides its own headers and the public ones). Entries
# ending in "/" are folders (everything below them), the others exact headers.
RULES = [
    ("libcomm/include/comm/", []),
    ("libcomm/base/", []),
    ("cuda/bench/", [BASE, "cuda/"]),  # GPU probes of the cuda component itself
    ("cuda/", [BASE]),
    ("rendezvous/programs/", [BASE, "rendezvous/"]),
    ("rendezvous/", [BASE]),
    # The media are private to the transport and to each other; they and the message layer meet
    # at medium.hpp only (issue 45), and only the set-up (transport/connect.cpp) sees both.
    # (A striped TCP stream sleeps on an epoll set of its connections: the owned epoll of epoll_set.hpp.)
    ("transport/tcp/", [BASE, "transport/transport.hpp", "transport/socket.hpp", "transport/epoll_set.hpp",
                        "transport/medium.hpp", "transport/shared_arena.hpp"]),
    ("transport/shm/", [BASE, "transport/transport.hpp", "transport/socket.hpp", "transport/shared_arena.hpp",
                        "transport/medium.hpp"]),
    ("transport/memory/", [BASE, "transport/transport.hpp", "transport/socket.hpp", "transport/medium.hpp",
                           "transport/shared_arena.hpp"]),
    ("transport/message/", [BASE, "transport/transport.hpp", "transport/socket.hpp", "transport/epoll_set.hpp",
                            "transport/medium.hpp", "transport/shared_arena.hpp",
                            "transport/group_control.hpp"]),
    ("transport/", [BASE]),
    # Algorithms see the transport only through its interface, never a medium or a store's
    # internals.
    ("algorithms/", [BASE, "cuda/", "transport/transport.hpp"]),
    ("libcomm/src/", [BASE, "cuda/", "rendezvous/", "transport/", "algorithms/"]),
    # The C API: over the public C++ API, with CUDA's pointer queries and copies.
    ("libcomm/c_api/", [BASE, "cuda/"]),
    # Tests are white-box: any layer below the API (the implementation of the API only through it).
    ("tests/", [BASE, "cuda/", "rendezvous/", "transport/", "algorithms/"]),
    # Fuzz targets are white-box like the tests, and may reach the C API's id parser.
    ("fuzz/", [BASE, "rendezvous/", "transport/", "libcomm/c_api/"]),
    # Programs users could have written: the public headers, and headers beside them.
    ("bench/", []),
    ("examples/", []),
    ("torch_backend/", []),
    ("nccl_abi/", []),
]

# Clients of the public API include their own headers by bare name, as a user's program would.
CLIENTS = ("bench/", "examples/", "torch_backend/", "nccl_abi/")
SOURCE_SUFFIXES = (".hpp", ".cpp", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def rule_for(path):
    for folder, allowed in RULES:
        if path.startswith(folder):
            return folder, allowed
    return None, None


def allowed_target(target, own, allowed):
    if target.startswith(own):
        return True
    return any(target.startswith(entry) if entry.endswith("/") else target == entry for entry in allowed)


def check(root):
    problems = []
    for folder, _ in RULES:
        for directory, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                own, allowed = rule_for(path)
                if own != folder:
                    continue  # a sub-component with rules of its own is checked there
                with open(os.path.join(root, path), encoding="utf-8") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = match.group(1)
                        where = f"{path}:{number}: #include \"{target}\""
                        if target.startswith(PUBLIC):
                            if not os.path.isfile(os.path.join(root, "libcomm/include", target)):
                                problems.append(f"{where}: no such public header")
                            continue
                        if own in CLIENTS:
                            beside = os.path.join(os.path.dirname(path), target)
                            if "/" not in target and os.path.isfile(os.path.join(root, beside)):
                                continue
                            problems.append(f"{where}: {own} uses only the public headers comm/*.hpp "
                                            "(and headers beside the file)")
                            continue
                        if not os.path.isfile(os.path.join(root, target)):
                            problems.append(f"{where}: name headers by their path from the repository root "
                                            "(e.g. \"transport/transport.hpp\")")
                            continue
                        if not allowed_target(target, own, allowed):
                            problems.append(f"{where}: {own} may not include {target} "
                                            "(see the rules in tools/check_layers.py)")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for problem in problems:
        print(problem)
    print(f"layer check: {len(problems)} forbidden or unrooted include(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
