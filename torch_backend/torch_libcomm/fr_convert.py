"""libcomm's flight recorder dumps as torch's Flight Recorder files, for torch's own analyzer.

    python -m torch_libcomm.fr_convert DUMP_DIR OUT_DIR
    python -m torch.distributed.flight_recorder.fr_trace OUT_DIR     # torchfrtrace OUT_DIR

DUMP_DIR holds one comm_trace_rank<R>.json per rank (COMM_TRACE_DIR, commrun --trace, or
torch_libcomm.dump_trace); OUT_DIR gets one pickle per rank, libcomm_fr_rank_<R>, in the format
torch 2.13's analyzer reads (version 2.10, as its own Gloo and NCCL recorders write). What maps
how (docs/debugging.md):
  - each group becomes a process group named by its libcomm id, described as "default_pg" for
    the world and by its libcomm name otherwise, with its members as world ranks;
  - each collective becomes an entry "gloo:<op>": torch 2.13's analyzer accepts only the names of
    the backends it knows, and libcomm's CPU collectives are what Gloo's are; sequence numbers
    count from 1 per group, as torch's do;
  - state: completed, or "started" for a call that was running or failed when dumped (its end
    never came), "scheduled" for one queued and not started;
  - point-to-point calls are left out, as torch's own recorder leaves out Gloo's.
"""
import argparse
import glob
import json
import os
import pickle
import re
import sys

# comm::DType names -> torch's scalar type names, as torch's recorder writes them.
TORCH_DTYPES = {
    "int8": "Char", "uint8": "Byte", "int32": "Int", "int64": "Long", "float16": "Half",
    "float32": "Float", "float64": "Double", "bfloat16": "BFloat16",
}
# libcomm's operations torch's recorder names otherwise: all_to_all_v is what torch records as an
# all_to_all (all_to_all_single with splits), whose sizes its analyzer lets differ by rank;
# torch's analyzer knows no uneven gather or scatter, whose sizes are given as none.
TORCH_NAMES = {"all_to_all_v": "all_to_all", "gather_v": "gather", "scatter_v": "scatter"}

PREFIX = "libcomm_fr_rank_"


def _wall(dump, steady_ns):
    if steady_ns is None:
        return None
    clock = dump["clock"]
    return clock["wall_anchor_ns"] + (steady_ns - clock["steady_anchor_ns"])


def _sizes(op, count, group_size, counts=None):
    """(input sizes, output sizes) as torch lists them for one tensor each. An uneven form whose
    counts the ranks share has a count of the rank's own block: no size every rank agrees on."""
    if op == "barrier" or counts == "shared":
        return [[]], [[]]
    if op == "all_gather":
        return [[count]], [[count * group_size]]
    if op == "reduce_scatter":
        return [[count * group_size]], [[count]]
    return [[count]], [[count]]


def convert_dump(dump):
    groups = dump["groups"]
    pg_config = {}
    for group in groups:
        if group["rank"] < 0:
            continue
        key = str(group["id"])
        desc = "default_pg" if group["id"] == 0 else group["name"]
        pg_config[key] = {"name": key, "desc": desc, "ranks": str(group["ranks"])}
    entries = []
    status = {}
    for entry in dump["entries"]:
        op = entry["op"]
        if "algorithm" not in entry:  # only collectives name one (transfers, group events do not)
            continue
        group = groups[entry["group"]]
        key = str(group["id"])
        desc = pg_config.get(key, {}).get("desc", group["name"])
        sequence = entry["sequence"] + 1
        state = entry["state"]
        torch_state = ("completed" if state == "completed" else
                       "started" if "started_ns" in entry else "scheduled")
        dtype = TORCH_DTYPES.get(entry.get("dtype"), "Float") if "dtype" in entry else "Float"
        inputs, outputs = _sizes(op, entry.get("count", 0), group["size"], entry.get("counts"))
        entries.append({
            "record_id": len(entries),
            "pg_id": entry["group"],
            "process_group": (key, desc),
            "collective_seq_id": sequence,
            "p2p_seq_id": 0,
            "op_id": sequence,
            "profiling_name": "gloo:" + TORCH_NAMES.get(op, op),
            "time_created_ns": _wall(dump, entry["queued_ns"]),
            "time_discovered_started_ns": _wall(dump, entry.get("started_ns")),
            "time_discovered_completed_ns": _wall(dump, entry.get("completed_ns")),
            "input_sizes": inputs,
            "output_sizes": outputs,
            "input_dtypes": [dtype],
            "output_dtypes": [dtype],
            "state": torch_state,
            "retired": state != "running",
            "timeout_ms": 0,
            "is_p2p": False,
            "frames": [],
            "thread_id": "0",
            "thread_name": "libcomm",
        })
        last = status.setdefault(key, {"last_enqueued_collective": -1, "last_started_collective": -1,
                                       "last_completed_collective": -1})
        last["last_enqueued_collective"] = sequence
        if "started_ns" in entry:
            last["last_started_collective"] = sequence
        if state == "completed":
            last["last_completed_collective"] = sequence
    return {"version": "2.10", "comm_lib_version": "libcomm", "pg_config": pg_config, "pg_status": status,
            "entries": entries}


def convert(dump_dir, out_dir):
    """Converts every comm_trace_rank<R>.json in dump_dir; returns the ranks written."""
    paths = sorted(glob.glob(os.path.join(dump_dir, "comm_trace_rank*.json")))
    if not paths:
        raise SystemExit(f"fr_convert: no comm_trace_rank<R>.json in {dump_dir} (COMM_TRACE_DIR, "
                         "commrun --trace or torch_libcomm.dump_trace write them)")
    os.makedirs(out_dir, exist_ok=True)
    ranks = []
    for path in paths:
        rank = int(re.search(r"comm_trace_rank(\d+)\.json$", path).group(1))
        with open(path) as file:
            dump = json.load(file)
        with open(os.path.join(out_dir, f"{PREFIX}{rank}"), "wb") as file:
            pickle.dump(convert_dump(dump), file)
        ranks.append(rank)
    return ranks


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m torch_libcomm.fr_convert",
        description="libcomm flight recorder dumps -> torch Flight Recorder files (for torchfrtrace)")
    parser.add_argument("dump_dir", help="folder of comm_trace_rank<R>.json")
    parser.add_argument("out_dir", help="folder to write libcomm_fr_rank_<R> into")
    args = parser.parse_args(argv)
    ranks = convert(args.dump_dir, args.out_dir)
    print(f"fr_convert: {len(ranks)} ranks written to {args.out_dir}; analyze with "
          f"python -m torch.distributed.flight_recorder.fr_trace {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
