#!/usr/bin/env python3
"""Which nccl* symbols torch's libraries import, and whether the drop-in libnccl.so.2 exports
each (issue 33): every one it lacks is named; exit status 1 if any. Uses binutils' nm.

    python3 cuda/bench/nccl_symbols.py PATH/TO/libnccl.so.2
"""
import glob
import os
import subprocess
import sys


def symbols(library, which):
    text = subprocess.run(["nm", "-D", which, library], capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in text.splitlines() if line.split()}


def main():
    import torch
    dropin = sys.argv[1]
    torch_libraries = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "*.so*")))
    imported = {}
    for library in torch_libraries:
        for name in symbols(library, "--undefined-only"):
            if name.startswith("nccl"):
                imported.setdefault(name, []).append(os.path.basename(library))
    exported = {name for name in symbols(dropin, "--defined-only") if name.startswith("nccl")}
    missing = sorted(set(imported) - exported)
    print("torch %s imports %d nccl symbols (%s); the drop-in exports %d" %
          (torch.__version__, len(imported), ", ".join(sorted({l for ls in imported.values() for l in ls})),
           len(exported)))
    for name in sorted(imported):
        print("  %s %s" % ("ok     " if name in exported else "MISSING", name))
    print("nccl symbols: %d imported, %d missing" % (len(imported), len(missing)))
    return 1 if missing or not imported else 0


if __name__ == "__main__":
    sys.exit(main())
