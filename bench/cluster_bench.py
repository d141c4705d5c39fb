#!/usr/bin/python3
"""A cluster on one machine: N network-namespace "hosts" x M ranks, each host's link to a bridge
limited to RATE each way with tc's token bucket; all_reduce (float32, sum) through libcomm,
torch.distributed's Gloo and Open MPI side by side on the same links, then a CSV and one plot per
ranks-per-host (busbw against size per library and link rate, the link bound drawn).

Needs root, iproute2, Debian's python3-torch and python3-matplotlib, and for Open MPI openmpi-bin,
libopenmpi-dev and the peers' mpi_coll_bench.c (--peers). Traffic stays inside the namespaces it
makes; they and every process in them go away whatever happens.

    /usr/bin/python3 bench/cluster_bench.py --build build --hosts 2 --ranks 1,2 --rates 1gbit,5gbit \\
        --runs 2 --csv docs/results/multihost.csv --plots docs/results/multihost

"libcomm:N" among the libraries runs libcomm with N TCP connections per peer across hosts
(COMM_SOCKET_STREAMS). --flow-rate RATE also caps every TCP connection at RATE, as networks that
limit each flow do (some clouds): each host's ephemeral ports are narrowed to a range of its own,
where Linux gives connect() even ports and bind() odd ones, so every connection has one even port
that names it, and each link's HTB gives that port a class capped at RATE under the link's rate.
"""
import argparse
import csv
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUBNET = "10.79.0"
FIRST_PORT = 40000  # of host 0's ephemeral range under --flow-rate; each host gets PORTS_PER_HOST
PORTS_PER_HOST = 128
LARGE_SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]
SMALL_SIZE = 8


def parse_rate(text):
    """tc's rate ('1gbit', '500mbit') in bits per second."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)?bit", text)
    if not match:
        sys.exit("rate %r: give it as tc does, e.g. 1gbit or 500mbit" % text)
    return float(match.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]


def run(command, check=True):
    return subprocess.run(command, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Cluster:
    """N namespaces h0..hN-1 (SUBNET.1..N) on a bridge in a namespace of its own."""

    def __init__(self, hosts, rate, flow_rate=None):
        self.flow_rate = flow_rate
        self.tag = "cb%d" % os.getpid()
        self.switch = self.tag + "s"
        self.names = ["%sh%d" % (self.tag, i) for i in range(hosts)]
        self.addresses = ["%s.%d" % (SUBNET, i + 1) for i in range(hosts)]
        self.rate = rate

    def device(self, host):
        return "%sv%d" % (self.tag, host)

    def __enter__(self):
        try:
            run(["ip", "netns", "add", self.switch])
        except subprocess.CalledProcessError as error:
            sys.exit("cannot make network namespaces (root and iproute2 needed): " + error.stdout.strip())
        run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        for host, name in enumerate(self.names):
            run(["ip", "netns", "add", name])
            inside, port = self.device(host), "%sp%d" % (self.tag, host)
            run(["ip", "link", "add", inside, "type", "veth", "peer", "name", port])
            run(["ip", "link", "set", inside, "netns", name])
            run(["ip", "link", "set", port, "netns", self.switch])
            run(["ip", "-n", self.switch, "link", "set", port, "master", "br0", "mtu", "9000", "up"])
            run(["ip", "-n", name, "link", "set", "lo", "up"])
            run(["ip", "-n", name, "addr", "add", self.addresses[host] + "/24", "dev", inside])
            run(["ip", "-n", name, "link", "set", inside, "mtu", "9000", "up"])
            # Both directions of the host's link: out of the host, and out of the bridge to it.
            for namespace, device in ((name, inside), (self.switch, port)):
                if self.flow_rate:
                    self.shape_flows(namespace, device)
                else:
                    run(["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root", "tbf",
                         "rate", self.rate, "burst", "1mbit", "latency", "50ms"])
            if self.flow_rate:
                first = FIRST_PORT + PORTS_PER_HOST * host
                run(["ip", "netns", "exec", name, "sysctl", "-qw",
                     "net.ipv4.ip_local_port_range=%d %d" % (first, first + PORTS_PER_HOST - 1)])
        return self

    def shape_flows(self, namespace, device):
        """The link's rate for all, and each connection's even port (its connect() end, whichever
        way the packet goes) a class of its own capped at the flow rate."""
        def tc(*arguments):
            run(["ip", "netns", "exec", namespace, "tc"] + list(arguments))
        tc("qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "2")
        tc("class", "add", "dev", device, "parent", "1:", "classid", "1:1", "htb", "rate", self.rate, "burst", "64k",
           "cburst", "64k")
        tc("class", "add", "dev", device, "parent", "1:1", "classid", "1:2", "htb", "rate", "1mbit", "ceil",
           self.rate, "burst", "64k", "cburst", "64k")
        ports = range(FIRST_PORT, FIRST_PORT + PORTS_PER_HOST * len(self.names), 2)
        for number, port in enumerate(ports):
            flow = "1:%x" % (0x100 + number)
            tc("class", "add", "dev", device, "parent", "1:1", "classid", flow, "htb", "rate", "1mbit", "ceil",
               self.flow_rate, "burst", "64k", "cburst", "64k")
            for priority, field in ((1, "sport"), (2, "dport")):
                tc("filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio", str(priority), "u32",
                   "match", "ip", "protocol", "6", "0xff", "match", "ip", field, str(port), "0xffff", "flowid", flow)

    def __exit__(self, *exception):
        for name in self.names + [self.switch]:
            pids = run(["ip", "netns", "pids", name], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run(["ip", "netns", "del", name], check=False)

    def exec(self, host, command, env=None):
        """Starts `command` in host's namespace; returns the Popen."""
        environment = dict(os.environ, **(env or {}))
        # A host name of its own too (a UTS namespace): Open MPI tells nodes apart by name.
        name = self.names[host]
        return subprocess.Popen(["ip", "netns", "exec", name, "unshare", "--uts", "/bin/sh", "-c",
                                 'hostname "$0" && exec "$@"', name] + command, env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_all(processes, timeout):
    outputs = []
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            out, _ = process.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
            out += "\n(timed out)"
        outputs.append((process.returncode, out))
    return outputs


def libcomm(cluster, build, ranks, streams=None):
    """{bytes: (time_us, busbw GB/s)} from rank 0's --csv rows; `streams`: COMM_SOCKET_STREAMS."""
    port = 29800 + random.randrange(100)
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    token = "cluster-bench-%d-%d" % (os.getpid(), time.monotonic_ns())
    result = {}
    for low, high in ((SMALL_SIZE, SMALL_SIZE), (LARGE_SIZES[0], LARGE_SIZES[-1])):
        processes = [
            cluster.exec(host, [commrun, "--no-prefix", "--nnodes", str(len(cluster.names)), "--node-rank",
                                str(host), "--master-addr", cluster.addresses[0], "--master-port", str(port), "-n",
                                str(ranks), os.path.join(build, "bench", "all_reduce_perf"), "-b", str(low), "-e",
                                str(high), "-f", "4", "-c", "0", "--csv"] + (["-n", "5", "-w", "2"] if high > 8 else []),
                         dict({"COMM_JOB_TOKEN": token}, **({"COMM_SOCKET_STREAMS": streams} if streams else {})))
            for host in range(len(cluster.names))]
        port += 1
        (status, text), *others = wait_all(processes, 600)
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) >= 14 and fields[0] == "all_reduce":
                result[int(fields[4])] = (float(fields[10]), float(fields[13]), fields[2])
        if status != 0 or any(code != 0 for code, _ in others):
            print("libcomm failed:\n" + text[-2000:] + "".join(out[-2000:] for _, out in others), file=sys.stderr)
    return result


def gloo(cluster, ranks):
    port = 29900 + random.randrange(100)
    sizes = ",".join(str(size) for size in [SMALL_SIZE] + LARGE_SIZES)
    processes = [
        cluster.exec(host, ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_across_hosts.py"), "--backend",
                            "gloo", "--node", str(host), "--nodes", str(len(cluster.names)), "--ranks", str(ranks),
                            "--master", "%s:%d" % (cluster.addresses[0], port), "--sizes", sizes],
                     {"GLOO_SOCKET_IFNAME": cluster.device(host)})
        for host in range(len(cluster.names))]
    (status, text), *others = wait_all(processes, 900)
    result = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 10 and fields[0] == "[0]" and fields[1].isdigit():
            result[int(fields[1])] = (float(fields[7]), float(fields[10]), "")
    if status != 0 or not result:
        print("Gloo failed:\n" + text[-2000:], file=sys.stderr)
    return result


def open_mpi(cluster, ranks, binary, work):
    """mpirun in host 0's namespace; the other hosts' daemons start through an rsh agent that runs
    them in their namespace (bench/peers/netns_rsh.sh)."""
    hostfile = os.path.join(work, "hosts")
    with open(hostfile, "w") as out:
        for address in cluster.addresses:
            out.write("%s slots=%d\n" % (address, ranks))
    mapping = " ".join("%s=%s" % pair for pair in zip(cluster.addresses, cluster.names))
    subnet = SUBNET + ".0/24"
    command = ["mpirun", "--allow-run-as-root", "--hostfile", hostfile, "-np", str(ranks * len(cluster.names)),
               "--map-by", "slot", "--bind-to", "none",  # ranks host by host, as the others place them
               "--mca", "plm_rsh_agent", os.path.join(HERE, "peers", "netns_rsh.sh"),
               "--mca", "oob_tcp_if_include", subnet, "--mca", "btl_tcp_if_include", subnet,
               "--mca", "btl", "tcp,vader,self", "-x", "BENCH_COLLS", "-x", "BENCH_MAX_BYTES", "-x",
               "BENCH_BUDGET_S", binary]
    process = cluster.exec(0, command, {"COMM_NETNS_HOSTS": mapping, "BENCH_COLLS": "all_reduce",
                                        "BENCH_MAX_BYTES": str(LARGE_SIZES[-1]), "BENCH_BUDGET_S": "1"})
    (status, text), = wait_all([process], 900)
    result = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 11 and fields[2] == "all_reduce" and fields[4].isdigit():
            size = int(fields[4])
            if size == SMALL_SIZE or size >= LARGE_SIZES[0]:
                result[size] = (float(fields[6]), float(fields[10]), "")
    if status != 0 or not result:
        print("Open MPI failed:\n" + text[-3000:], file=sys.stderr)
    return result


def plot(rows, path, ranks, hosts):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({row["rate"] for row in rows}, key=parse_rate)
    figure, axes = plt.subplots(1, len(rates), figsize=(5.5 * len(rates), 4.2), squeeze=False)
    for axis, rate in zip(axes[0], rates):
        bound = parse_rate(rate) / 8 / 1e9
        libraries = sorted({row["library"] for row in rows}, key=lambda name: (not name.startswith("libcomm"), name))
        styles = {"gloo": "s--", "openmpi": "^:"}
        for library in libraries:
            style = styles.get(library, "o-" if library == "libcomm" else "d-")
            best = {}
            for row in rows:
                if row["rate"] == rate and row["library"] == library and row["bytes"] >= LARGE_SIZES[0]:
                    best[row["bytes"]] = max(best.get(row["bytes"], 0), row["busbw_gbps"])
            if best:
                sizes = sorted(best)
                axis.plot([size / (1 << 20) for size in sizes], [best[size] for size in sizes], style, label=library)
        axis.axhline(bound, color="black", linewidth=0.8, label="link")
        if ranks > 1:
            size = hosts * ranks
            # What crossing once per host allows: busbw counts 2(p-1)/p of the message, the link
            # carries 2(H-1)/H of it.
            factor = (2 * (size - 1) / size) / (2 * (hosts - 1) / hosts)
            axis.axhline(bound * factor, color="grey", linestyle="-.", linewidth=0.8, label="hierarchy bound")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("message (MiB)")
        axis.set_ylabel("busbw (GB/s)")
        axis.set_title("all_reduce, %d hosts x %d rank%s, %s each way" % (hosts, ranks, "s" if ranks > 1 else "",
                                                                         rate))
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks", default="1,2", help="ranks per host, a comma list")
    parser.add_argument("--rates", default="1gbit,5gbit", help="each host's link each way, tc's units")
    parser.add_argument("--libraries", default="libcomm,gloo,openmpi",
                        help="libcomm, libcomm:N (N connections per peer), gloo, openmpi")
    parser.add_argument("--flow-rate", help="cap each TCP connection at this rate too, tc's units (e.g. 250mbit)")
    parser.add_argument("--runs", type=int, default=2, help="rounds; libraries alternate inside each")
    parser.add_argument("--peers", default=os.path.join(HERE, "..", "..", "shared", "peers"),
                        help="where mpi_coll_bench.c is")
    parser.add_argument("--csv", default="cluster_bench.csv")
    parser.add_argument("--plots", default="cluster_bench", help="prefix of the PNG files")
    arguments = parser.parse_args()
    libraries = arguments.libraries.split(",")
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    binary = None
    for library in libraries:
        if not re.fullmatch(r"libcomm(:\d+)?|gloo|openmpi", library):
            sys.exit("library %r: one of libcomm, libcomm:N, gloo, openmpi" % library)
    if arguments.flow_rate:
        parse_rate(arguments.flow_rate)
    if "openmpi" in libraries:
        source = os.path.join(arguments.peers, "mpi_coll_bench.c")
        if shutil.which("mpicc") and os.path.exists(source):
            binary = os.path.join(work, "mpi_coll_bench")
            subprocess.run(["mpicc", "-O2", "-o", binary, source, "-lm"], check=True)
        else:
            print("Open MPI left out: no mpicc or no %s" % source, file=sys.stderr)
            libraries.remove("openmpi")
    rows = []
    try:
        for rate in arguments.rates.split(","):
            parse_rate(rate)
            for ranks in [int(text) for text in arguments.ranks.split(",")]:
                with Cluster(arguments.hosts, rate, arguments.flow_rate) as cluster:
                    for round_number in range(arguments.runs):
                        order = libraries if round_number % 2 == 0 else list(reversed(libraries))
                        for library in order:
                            if library.startswith("libcomm"):
                                result = libcomm(cluster, arguments.build, ranks, library.partition(":")[2])
                            elif library == "gloo":
                                result = gloo(cluster, ranks)
                            else:
                                result = open_mpi(cluster, ranks, binary, work)
                            for size, (time_us, busbw, algorithm) in sorted(result.items()):
                                bound = parse_rate(rate) / 8 / 1e9
                                rows.append({"library": library, "hosts": arguments.hosts, "ranks_per_host": ranks,
                                             "rate": rate, "run": round_number, "bytes": size, "time_us": time_us,
                                             "busbw_gbps": busbw, "link_gbps": bound,
                                             "busbw_over_link": busbw / bound, "algorithm": algorithm,
                                             "flow_rate": arguments.flow_rate or ""})
                                print("%-8s %d x %d %-7s run %d %10d B %12.1f us %8.3f GB/s %6.2f of the link %s" %
                                      (library, arguments.hosts, ranks, rate, round_number, size, time_us, busbw,
                                       busbw / bound, algorithm), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(arguments.csv, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()) if rows else ["library"])
        writer.writeheader()
        writer.writerows(rows)
    for ranks in sorted({row["ranks_per_host"] for row in rows}):
        plot([row for row in rows if row["ranks_per_host"] == ranks],
             "%s_%dx%d.png" % (arguments.plots, arguments.hosts, ranks), ranks, arguments.hosts)
    # The figures the acceptance asks about: best of the runs, per library.
    print("\nbest of %d runs (busbw / link; 8 B: time)" % arguments.runs)
    keys = sorted({(row["rate"], row["ranks_per_host"]) for row in rows}, key=lambda key: (parse_rate(key[0]), key[1]))
    for rate, ranks in keys:
        for size in [SMALL_SIZE, 16 << 20, 64 << 20]:
            cells = []
            for library in libraries:
                mine = [row for row in rows if (row["rate"], row["ranks_per_host"], row["library"], row["bytes"]) ==
                        (rate, ranks, library, size)]
                if not mine:
                    cells.append("%s -" % library)
                elif size == SMALL_SIZE:
                    cells.append("%s %.1f us" % (library, min(row["time_us"] for row in mine)))
                else:
                    cells.append("%s %.2f" % (library, max(row["busbw_over_link"] for row in mine)))
            print("%-6s %d x %d %9d B: %s" % (rate, arguments.hosts, ranks, size, ", ".join(cells)))


if __name__ == "__main__":
    main()
