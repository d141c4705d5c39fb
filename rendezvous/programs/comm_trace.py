#!/usr/bin/env python3
"""comm-trace: one picture of a whole job from its ranks' flight recorder dumps.

    comm-trace DIR [--output TRACE.json] [--summary SUMMARY.txt] [--png TIMELINE.png]

DIR holds comm_trace_rank<R>.json files (COMM_TRACE_DIR, comm::dump_trace, SIGUSR2; gathered by
hand from srun or torchrun jobs too). Writes, by default into DIR:
  trace.json    Chrome/Perfetto trace events: one process per host, one track per rank, one
                slice per call (args: bytes, dtype, algorithm, medium, sequence, state, ...),
                each collective linked across its ranks by flow events and each send to its
                receive; calls still running or failed are marked. Open it in ui.perfetto.dev
                or chrome://tracing.
  summary.txt   which rank is behind and where the ranks diverged, per group; which rank
                arrives last at the collectives (a straggler)
  timeline.png  ranks as rows, calls as bars coloured by operation (needs matplotlib; said
                and skipped without it)
Ranks on one host share its steady clock; across hosts the dumps' wall-clock anchors put them
on one axis, as close as the hosts' clocks agree (the trace says so in its metadata).
Python's standard library only, but for the picture. docs/debugging.md.
"""
import argparse
import glob
import json
import os
import sys
from collections import defaultdict

TRANSFERS = {"send", "recv"}


def load_dumps(directory):
    dumps = []
    for path in sorted(glob.glob(os.path.join(directory, "comm_trace_*.json"))):
        with open(path) as file:
            dump = json.load(file)
        if dump.get("format") != "libcomm-trace":
            continue
        dump["_path"] = path
        dumps.append(dump)
    if not dumps:
        raise SystemExit(f"comm-trace: no comm_trace_rank<R>.json in {directory} (COMM_TRACE_DIR, "
                         "comm::dump_trace or SIGUSR2 write them)")
    dumps.sort(key=lambda dump: (dump["rank"] < 0, dump["rank"], dump["pid"]))
    place_on_one_axis(dumps)
    return dumps


def place_on_one_axis(dumps):
    """Each dump's steady-clock times -> the job's axis (rank 0's clock, as wall-clock ns): ranks
    on rank 0's host share its clock; another host's is moved by the offset measured at init
    (offset_to_rank0_ns, within offset_error_ns); without one, by the host's own wall clock."""
    reference = next((dump for dump in dumps if dump["rank"] == 0), dumps[0])
    base = reference["clock"]["wall_anchor_ns"] - reference["clock"]["steady_anchor_ns"]
    errors = []
    for dump in dumps:
        clock = dump["clock"]
        if dump["host"] == reference["host"]:
            dump["_to_axis"] = base
        elif "offset_to_rank0_ns" in clock and reference["rank"] == 0:
            dump["_to_axis"] = base + clock["offset_to_rank0_ns"]
            errors.append(clock["offset_error_ns"])
        else:
            dump["_to_axis"] = clock["wall_anchor_ns"] - clock["steady_anchor_ns"]
            errors.append(None)
    hosts = {dump["host"] for dump in dumps}
    if len(hosts) == 1:
        clock = "one host's steady clock"
    elif None in errors:
        clock = "some hosts by their wall clocks (no offset measured): as close as those clocks agree"
    else:
        clock = f"rank 0's steady clock; other hosts' offsets measured at init, within {max(errors) / 1000:.1f} us"
    for dump in dumps:
        dump["_axis"] = clock


class Call:
    """One entry of one rank, its times on the job's axis (wall-clock nanoseconds)."""

    def __init__(self, dump, entry):
        self.dump = dump
        self.entry = entry
        self.rank = dump["rank"]
        self.group = dump["groups"][entry["group"]]
        self.op = entry["op"]
        # A collective's entry names its algorithm (libcomm/src/trace_dump.cpp); transfers and
        # group events do not: no list of collectives to keep in step here.
        self.collective = "algorithm" in entry
        self.state = entry["state"]
        offset = dump["_to_axis"]
        self.start = entry.get("started_ns", entry["queued_ns"]) + offset
        self.queued = entry["queued_ns"] + offset
        dumped = dump["dumped_at_steady_ns"] + offset
        self.end = entry["completed_ns"] + offset if "completed_ns" in entry else dumped
        self.finished = "completed_ns" in entry

    def peer_world_rank(self):
        peer = self.entry.get("peer", -1)
        if peer < 0:
            return -1
        return self.group["ranks"][peer] if peer < len(self.group["ranks"]) else -1

    def label(self):
        if self.collective:
            return f"{self.op} #{self.entry['sequence']}"
        return self.op


def gather_calls(dumps):
    return [Call(dump, entry) for dump in dumps for entry in dump["entries"]]


def ranges(ranks):
    """[0, 1, 2, 5] -> "0-2,5"."""
    ranks = sorted(set(ranks))
    parts, start = [], None
    for index, rank in enumerate(ranks):
        if start is None:
            start = rank
        if index + 1 == len(ranks) or ranks[index + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}-{rank}")
            start = None
    return ",".join(parts)


def ranks_are(ranks):
    return ("rank " if len(set(ranks)) == 1 else "ranks ") + ranges(ranks) + (" is" if len(set(ranks)) == 1 else " are")


def trace_events(dumps, calls):
    origin = min(call.queued for call in calls) if calls else 0
    hosts = {}
    for dump in dumps:
        hosts.setdefault(dump["host"], len(hosts))
    events = []
    for host, pid in hosts.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": host}})
    for dump in dumps:
        pid = hosts[dump["host"]]
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": dump["rank"],
                       "args": {"name": f"rank {dump['rank']} (pid {dump['pid']})"}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": dump["rank"],
                       "args": {"sort_index": dump["rank"]}})

    def microseconds(ns):
        return (ns - origin) / 1000.0

    def place(call):
        return hosts[call.dump["host"]], call.rank

    for call in calls:
        pid, tid = place(call)
        entry = call.entry
        args = {key: entry[key] for key in ("sequence", "tag", "dtype", "count", "bytes", "algorithm", "peer",
                                            "root", "error", "waiting_on") if key in entry}
        args.update({"state": call.state, "group": call.group["name"], "medium": call.group["medium"],
                     "id": entry["id"]})
        name = call.label() + ("" if call.state == "completed" else f" ({call.state})")
        events.append({"name": name, "cat": "collective" if call.collective else "p2p" if call.op in TRANSFERS else "group",
                       "ph": "X", "pid": pid, "tid": tid, "ts": microseconds(call.start),
                       "dur": max(microseconds(call.end) - microseconds(call.start), 0.001), "args": args})
    flow = 0
    # A collective: from the rank that started it first to every other rank in it.
    by_call = defaultdict(list)
    for call in calls:
        if call.collective:
            by_call[(call.group["id"], tuple(call.group["ranks"]), call.entry["sequence"])].append(call)
    for key, members in by_call.items():
        members.sort(key=lambda call: call.start)
        first = members[0]
        for other in members[1:]:
            flow += 1
            for phase, call in (("s", first), ("f", other)):
                pid, tid = place(call)
                events.append({"name": first.label(), "cat": "collective", "ph": phase, "id": flow, "pid": pid,
                               "tid": tid, "ts": microseconds(call.start), "bp": "e"})
    # Each send to its receive: the n-th send from a to b with a tag meets the n-th receive at b
    # from a with that tag (a receive from any source is matched to none).
    sends, receives = defaultdict(list), defaultdict(list)
    for call in calls:
        if call.op == "send":
            sends[(call.group["id"], call.rank, call.peer_world_rank(), call.entry["tag"])].append(call)
        elif call.op == "recv" and call.peer_world_rank() >= 0:
            receives[(call.group["id"], call.peer_world_rank(), call.rank, call.entry["tag"])].append(call)
    for key, sent in sends.items():
        for send, receive in zip(sorted(sent, key=lambda call: call.entry["id"]),
                                 sorted(receives.get(key, []), key=lambda call: call.entry["id"])):
            flow += 1
            for phase, call in (("s", send), ("f", receive)):
                pid, tid = place(call)
                events.append({"name": "message", "cat": "p2p", "ph": phase, "id": flow, "pid": pid, "tid": tid,
                               "ts": microseconds(call.start), "bp": "e"})
    return events


def summarize(dumps, calls):
    lines = []
    ranks_dumped = {dump["rank"] for dump in dumps}
    world_size = max(dump.get("world_size", 0) for dump in dumps)
    missing = [rank for rank in range(world_size) if rank not in ranks_dumped]
    lines.append(f"{len(dumps)} dumps ({', '.join(sorted({dump['reason'] for dump in dumps}))}) of a job of "
                 f"{world_size} ranks" + (f"; no dump from {ranks_are(missing)[:-3]}" if missing else ""))
    groups = {}
    for dump in dumps:
        for group in dump["groups"]:
            if group["rank"] >= 0:
                groups.setdefault((group["id"], tuple(group["ranks"])), group["name"])
    for (group_id, members), name in sorted(groups.items()):
        last = {}
        for call in calls:
            if call.collective and call.group["id"] == group_id and tuple(call.group["ranks"]) == members:
                if call.rank not in last or call.entry["sequence"] >= last[call.rank].entry["sequence"]:
                    last[call.rank] = call
        if not last:
            continue
        present = [rank for rank in members if rank in ranks_dumped]
        newest = max(call.entry["sequence"] for call in last.values())
        ahead = [rank for rank in present if rank in last and last[rank].entry["sequence"] == newest]
        behind = [rank for rank in present if rank not in ahead]
        heads = {last[rank].label() + f" ({last[rank].state})" for rank in ahead}
        ops = {last[rank].op for rank in ahead}
        if len(ops) > 1:
            parts = "; ".join(f"{ranks_are([r for r in ahead if last[r].op == op])} in {op} #{newest}" for op in sorted(ops))
            lines.append(f"group {name}: the ranks diverged at call #{newest}: {parts}")
        if behind:
            waiting = sorted({last[rank].entry.get("waiting_on", -1) for rank in ahead} - {-1})
            waited = f", waiting on {ranks_are([members[w] for w in waiting])[:-3]}" if waiting else ""
            for rank in behind:
                mine = last.get(rank)
                where = f"its last call there is {mine.label()} ({mine.state})" if mine else "it made no call there"
                lines.append(f"group {name}: rank {rank} is behind: {where}; {ranks_are(ahead)} in "
                             f"{' / '.join(sorted(heads))}{waited}")
        elif all(last[rank].state == "completed" for rank in ahead):
            lines.append(f"group {name}: every rank finished {newest + 1} collectives, the last {sorted(heads)[0]}")
        else:
            lines.append(f"group {name}: {ranks_are(ahead)} in {' / '.join(sorted(heads))}")
        absent = [rank for rank in members if rank not in ranks_dumped]
        if absent:
            lines.append(f"group {name}: {ranks_are(absent)[:-3]} left no dump (killed, or stopped before "
                         "its first group)")
        # Stragglers: who starts the group's collectives last, and how late.
        by_sequence = defaultdict(list)
        for call in calls:
            if call.collective and call.group["id"] == group_id and tuple(call.group["ranks"]) == members:
                by_sequence[call.entry["sequence"]].append(call)
        lateness, last_count = defaultdict(list), defaultdict(int)
        complete = [members_calls for members_calls in by_sequence.values() if len(members_calls) == len(present) > 1]
        for members_calls in complete:
            earliest = min(call.start for call in members_calls)
            latest = max(members_calls, key=lambda call: call.start)
            last_count[latest.rank] += 1
            for call in members_calls:
                lateness[call.rank].append(call.start - earliest)
        if len(complete) >= 3:
            straggler, count = max(last_count.items(), key=lambda item: item[1])
            mean = sum(lateness[straggler]) / len(lateness[straggler]) / 1e6
            others = [sum(values) / len(values) / 1e6 for rank, values in lateness.items() if rank != straggler]
            typical = max(others) if others else 0.0
            # Late by a good part of a step, not by the noise of a fast loop.
            starts = sorted(min(call.start for call in members_calls) for members_calls in complete)
            gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
            step = gaps[len(gaps) // 2] / 1e6 if gaps else 0.0
            if count >= 0.6 * len(complete) and mean > 2 * typical and mean > 0.2 * step:
                lines.append(f"group {name}: rank {straggler} is the straggler: it starts {count} of {len(complete)} "
                             f"collectives last, {mean:.2f} ms after the first rank on average (others within "
                             f"{typical:.2f} ms)")
    for call in calls:
        if call.state == "failed" and call.collective:
            lines.append(f"rank {call.rank}: {call.label()} in group {call.group['name']} failed: "
                         f"{call.entry.get('error', '')[:300]}")
            break
    return lines


def draw(calls, dumps, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("comm-trace: matplotlib is not installed: no picture (pip install matplotlib)", file=sys.stderr)
        return False
    origin = min(call.queued for call in calls)
    dumped = {dump["rank"] for dump in dumps}
    world_size = max(dump.get("world_size", 0) for dump in dumps)
    ranks = sorted(dumped | set(range(world_size)))
    operations = sorted({call.op for call in calls})
    palette = plt.get_cmap("tab10")
    colours = {op: palette(index % 10) for index, op in enumerate(operations)}
    figure, axes = plt.subplots(figsize=(12, 1.0 + 0.5 * len(ranks)))
    for row, rank in enumerate(ranks):
        for call in (call for call in calls if call.rank == rank):
            start = (call.start - origin) / 1e6
            width = max((call.end - call.start) / 1e6, 1e-4)
            unfinished = call.state != "completed"
            axes.broken_barh([(start, width)], (row - 0.4, 0.8), facecolors=colours[call.op],
                             edgecolors="red" if unfinished else "none", linewidth=2 if unfinished else 0,
                             hatch="//" if unfinished else None)
    axes.set_yticks(range(len(ranks)), [f"rank {rank}" + ("" if rank in dumped else " (no dump)") for rank in ranks])
    axes.invert_yaxis()
    axes.set_xlabel("milliseconds since the first call")
    handles = [Patch(color=colours[op], label=op) for op in operations]
    handles.append(Patch(facecolor="white", edgecolor="red", hatch="//", label="running or failed"))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    axes.set_title(f"libcomm job {dumps[0].get('job', '')}: {len(ranks)} ranks, {len(calls)} calls recorded")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="comm-trace", description=__doc__.split("\n")[0])
    parser.add_argument("directory", help="folder of comm_trace_rank<R>.json")
    parser.add_argument("--output", help="the merged trace (default DIR/trace.json)")
    parser.add_argument("--summary", help="the text summary (default DIR/summary.txt)")
    parser.add_argument("--png", help="the picture (default DIR/timeline.png)")
    parser.add_argument("--no-png", action="store_true", help="no picture")
    args = parser.parse_args(argv)
    dumps = load_dumps(args.directory)
    calls = gather_calls(dumps)
    hosts = {dump["host"] for dump in dumps}
    trace = {"traceEvents": trace_events(dumps, calls), "displayTimeUnit": "ns",
             "otherData": {"job": dumps[0].get("job", ""), "ranks": len(dumps), "hosts": sorted(hosts),
                           "clock": dumps[0]["_axis"]}}
    output = args.output or os.path.join(args.directory, "trace.json")
    with open(output + ".tmp", "w") as file:
        json.dump(trace, file)
    os.replace(output + ".tmp", output)
    lines = summarize(dumps, calls)
    summary = args.summary or os.path.join(args.directory, "summary.txt")
    with open(summary, "w") as file:
        file.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"comm-trace: {output} ({len(trace['traceEvents'])} events; open in ui.perfetto.dev), {summary}")
    if not args.no_png:
        png = args.png or os.path.join(args.directory, "timeline.png")
        if calls and draw(calls, dumps, png):
            print(f"comm-trace: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
