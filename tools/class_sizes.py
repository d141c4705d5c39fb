#!/usr/bin/env python3
"""How many member functions each class of a folder declares, read from a build's debug info.

The rule (docs/design/transport.md, "The objects and what each owns"): no class in transport/
over ~25 methods. Counting them in the compiler's own record of each class (DWARF, from a build
with -g: every build type here has it) counts what the class declares, constructors and
operators included, and leaves out what the compiler made up (implicit copies) and what nested
classes declare (each is its own class). Needs llvm-dwarfdump.

    tools/class_sizes.py BUILD_DIR [--folder transport/] [--max 25] [--top 10]

Exits 1 when a class is over --max (listing them), 77 when llvm-dwarfdump is missing.
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

TAG = re.compile(r"^0x[0-9a-f]+:( +)(DW_TAG_\w+|NULL)$")
ATTRIBUTE = re.compile(r"^ +(DW_AT_\w+)\s+\((.*)\)$")


def entries(dump):
    """The dump's entries as a tree: each {"tag", "attributes", "children"}."""
    root = {"tag": None, "attributes": {}, "children": []}
    stack = [(-1, root)]  # (indent, entry)
    for line in dump.splitlines():
        tag = TAG.match(line)
        if tag:
            indent, name = len(tag.group(1)), tag.group(2)
            while stack[-1][0] >= indent:
                stack.pop()
            if name == "NULL":
                continue
            entry = {"tag": name, "attributes": {}, "children": []}
            stack[-1][1]["children"].append(entry)
            stack.append((indent, entry))
            continue
        attribute = ATTRIBUTE.match(line)
        if attribute and len(stack) > 1:
            stack[-1][1]["attributes"].setdefault(attribute.group(1), attribute.group(2).strip('"'))
    return root


def source_path(path):
    """A header as the source tree names it: through an include view, or from the build folder."""
    if "/include-views/" in path:
        return path.split("/include-views/", 1)[1].split("/", 1)[1]
    if "/../" in path:
        return path.split("/../", 1)[1]
    return path


def records(dump, folder):
    """Yields (name, file, methods) for each class defined in `folder` in one object's dump."""
    pending = [entries(dump)]
    while pending:
        entry = pending.pop()
        pending.extend(entry["children"])
        attributes = entry["attributes"]
        if entry["tag"] not in ("DW_TAG_class_type", "DW_TAG_structure_type"):
            continue
        file = source_path(attributes.get("DW_AT_decl_file", ""))
        if "DW_AT_declaration" in attributes or "DW_AT_name" not in attributes or not file.startswith(folder):
            continue
        methods = {child["attributes"].get("DW_AT_linkage_name", child["attributes"].get("DW_AT_name"))
                   for child in entry["children"]
                   if child["tag"] == "DW_TAG_subprogram" and "DW_AT_artificial" not in child["attributes"]}
        yield attributes["DW_AT_name"], file, methods


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--folder", default="transport/")
    parser.add_argument("--max", type=int, default=25)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    dwarfdump = shutil.which("llvm-dwarfdump") or next(
        (shutil.which(f"llvm-dwarfdump-{v}") for v in range(30, 10, -1) if shutil.which(f"llvm-dwarfdump-{v}")), None)
    if dwarfdump is None:
        print("class_sizes: llvm-dwarfdump not found; skipped")
        return 77
    sizes = {}  # (name, file) -> set of methods (the largest record across objects)
    # The folder's own libraries define its classes (and a class of one header is alike in each).
    objects = sorted((args.build / args.folder).rglob("*.o"))
    if not objects:
        print(f"class_sizes: no objects under {args.build}")
        return 1
    for obj in objects:
        dump = subprocess.run([dwarfdump, "--debug-info", str(obj)], capture_output=True, text=True).stdout
        for name, file, methods in records(dump, args.folder):
            key = (name, file)
            if len(methods) > len(sizes.get(key, ())):
                sizes[key] = methods
    if not sizes:
        print(f"class_sizes: no class of {args.folder} in the debug info (a build without -g?); skipped")
        return 77
    ranked = sorted(sizes.items(), key=lambda item: -len(item[1]))
    for (name, file), methods in ranked[: args.top]:
        print(f"{len(methods):4d}  {name}  ({file})")
    over = [(key, methods) for key, methods in ranked if len(methods) > args.max]
    if over:
        print(f"class_sizes: {len(over)} class(es) over {args.max} methods: " +
              ", ".join(f"{name} {len(methods)}" for (name, _), methods in over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
