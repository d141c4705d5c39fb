#!/usr/bin/env python3
"""The collectives of torch.distributed checked against a float64 reference, for issue 33's GPU
run: torch's own ProcessGroupNCCL with the drop-in libnccl.so.2 preloaded (--backend nccl),
torch_libcomm on CUDA tensors (--backend libcomm), or anything on CPU (--backend gloo --device
cpu: how this script is tried on a machine without a GPU). All ranks share GPU 0 (NVIDIA's NCCL
refuses two ranks on one GPU; libcomm allows it).

    python3 cuda/bench/torch_collectives_check.py --backend nccl --world-size 2 [--device cuda]

Every rank prints "PASS <check>" or "FAIL <check>: why"; the launcher prints one summary line
"torch <backend> <device> world N: P passed, F failed" and exits non-zero on a failure or a hang.
Checks: all_reduce of every dtype (sum, and max/min/product where the dtype allows), broadcast,
all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, send/recv round a ring,
barrier, a new_group, and a DDP training step (gradients against a reference computed here);
with --backend libcomm on CUDA also the ordering on torch's current stream (a kernel writes the
input just before the call, one reads the output just after, no synchronize between).
"""
import argparse
import os
import socket
import subprocess
import sys
import traceback

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Checks:
    def __init__(self, rank):
        self.rank, self.failed = rank, 0

    def check(self, name, ok, why=""):
        if ok:
            print("rank %d: PASS %s" % (self.rank, name), flush=True)
        else:
            self.failed += 1
            print("rank %d: FAIL %s: %s" % (self.rank, name, why), flush=True)

    def run(self, name, body):
        try:
            body()
        except Exception as error:  # a check that raises fails, and the next one runs
            where = traceback.extract_tb(error.__traceback__)[-3:]
            self.check(name, False, "%s: %s (at %s)" % (type(error).__name__, str(error).splitlines()[0][:300],
                                                        "; ".join("%s:%d %s" % (os.path.basename(f.filename), f.lineno,
                                                                                f.name) for f in where)))


def rank_values(torch, rank, count, dtype_name):
    """This rank's input in float64: small integers (exact in every dtype, sums in range)."""
    generator = torch.Generator().manual_seed(1000 + rank)
    low, high = (1, 4) if dtype_name in ("int8", "uint8") else (-8, 9) if "int" not in dtype_name else (0, 9)
    return torch.randint(low, high, (count,), generator=generator).to(torch.float64)


def worker(args):
    import torch
    import torch.distributed as dist
    if args.backend == "libcomm":
        import torch_libcomm  # noqa: F401  registers the backend
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    if args.device == "cuda" and args.stream == "side":
        # Every call below is made with a stream of the program's own current: a non-blocking
        # stream that torch's default stream does not order, as a training loop's side stream is.
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            return checked_calls(args, torch, dist, rank, world, device)
    return checked_calls(args, torch, dist, rank, world, device)


def checked_calls(args, torch, dist, rank, world, device):
    checks = Checks(rank)
    if args.backend == "nccl":
        checks.run("nccl version", lambda: print("rank %d: nccl version %s" % (rank, torch.cuda.nccl.version()),
                                                flush=True))
        with open("/proc/self/maps") as maps:
            mapped = sorted({line.split()[-1] for line in maps if "libnccl" in line})
        print("rank %d: libnccl mapped: %s" % (rank, " ".join(mapped)), flush=True)
        preload = os.environ.get("LD_PRELOAD", "")
        if preload:
            checks.check("the drop-in is the libnccl in use", any(os.path.realpath(preload) == os.path.realpath(m)
                                                                  for m in mapped), "mapped: %s" % mapped)
    count = 4099  # not a multiple of anything
    everyone = [rank_values(torch, r, count, "float32") for r in range(world)]

    def all_reduce_dtypes():
        for name in DTYPES:
            dtype = getattr(torch, name)
            ops = [("sum", dist.ReduceOp.SUM, lambda xs: sum(xs))]
            ops += [("max", dist.ReduceOp.MAX, lambda xs: torch.stack(xs).max(0).values),
                    ("min", dist.ReduceOp.MIN, lambda xs: torch.stack(xs).min(0).values)]
            if name not in ("int8", "uint8"):
                ops.append(("product", dist.ReduceOp.PRODUCT, lambda xs: torch.stack(xs).prod(0)))
            inputs = [rank_values(torch, r, count, name) for r in range(world)]
            if name in ("float16", "bfloat16") or "int" in name:
                inputs = [x.clamp(-3, 3) if "uint" not in name else x.clamp(0, 3) for x in inputs]
            for op_name, op, reference in ops:
                if args.backend == "gloo" and name == "bfloat16" and op_name == "product":
                    continue
                tensor = inputs[rank].clone().to(dtype).to(device)
                dist.all_reduce(tensor, op=op)
                expected = reference(inputs)
                got = tensor.to(torch.float64).cpu()
                tolerance = 1e-2 * expected.abs().clamp(min=1) if name in ("float16", "bfloat16") else 0
                bad = ((got - expected).abs() > tolerance).sum().item()
                checks.check("all_reduce %s %s" % (name, op_name), bad == 0, "%d of %d elements wrong" % (bad, count))

    checks.run("all_reduce", all_reduce_dtypes)

    def broadcast():
        for root in range(world):
            tensor = everyone[rank].clone().to(device)
            dist.broadcast(tensor, root)
            checks.check("broadcast root %d" % root, torch.equal(tensor.cpu().to(torch.float64), everyone[root]))

    checks.run("broadcast", broadcast)

    def all_gather():
        output = torch.empty(world * count, dtype=torch.float32, device=device)
        dist.all_gather_into_tensor(output, everyone[rank].to(torch.float32).to(device))
        checks.check("all_gather_into_tensor", torch.equal(output.cpu().to(torch.float64), torch.cat(everyone)))

    checks.run("all_gather_into_tensor", all_gather)

    def reduce_scatter():
        inputs = [rank_values(torch, r, count * world, "float32") for r in range(world)]
        output = torch.empty(count, dtype=torch.float32, device=device)
        dist.reduce_scatter_tensor(output, inputs[rank].to(torch.float32).to(device))
        expected = sum(inputs)[rank * count:(rank + 1) * count]
        checks.check("reduce_scatter_tensor", torch.equal(output.cpu().to(torch.float64), expected))

    checks.run("reduce_scatter_tensor", reduce_scatter)

    def all_to_all():
        inputs = [rank_values(torch, r, count * world, "float32") for r in range(world)]
        output = torch.empty(count * world, dtype=torch.float32, device=device)
        dist.all_to_all_single(output, inputs[rank].to(torch.float32).to(device))
        expected = torch.cat([inputs[r][rank * count:(rank + 1) * count] for r in range(world)])
        checks.check("all_to_all_single", torch.equal(output.cpu().to(torch.float64), expected))

    checks.run("all_to_all_single", all_to_all)

    def send_recv():
        if world == 1:
            return
        right, left = (rank + 1) % world, (rank - 1) % world
        received = torch.empty(count, dtype=torch.float32, device=device)
        mine = everyone[rank].to(torch.float32).to(device)
        if rank % 2 == 0:
            dist.send(mine, right)
            dist.recv(received, left)
        else:
            dist.recv(received, left)
            dist.send(mine, right)
        checks.check("send/recv ring", torch.equal(received.cpu().to(torch.float64), everyone[left]))

    checks.run("send/recv", send_recv)
    checks.run("barrier", lambda: (dist.barrier(), checks.check("barrier", True)))

    def new_group():
        members = list(range(0, world, 2)) if world > 1 else [0]
        group = dist.new_group(members)
        if rank in members:
            tensor = everyone[rank].to(torch.float32).to(device)
            dist.all_reduce(tensor, group=group)
            checks.check("new_group all_reduce", torch.equal(tensor.cpu().to(torch.float64),
                                                            sum(everyone[r] for r in members)))

    checks.run("new_group", new_group)

    def ddp_step():
        from torch.nn.parallel import DistributedDataParallel
        torch.manual_seed(7)
        model = torch.nn.Linear(16, 4, dtype=torch.float64).to(device)
        reference = torch.nn.Linear(16, 4, dtype=torch.float64)
        reference.load_state_dict({key: value.cpu() for key, value in model.state_dict().items()})
        ddp = DistributedDataParallel(model, device_ids=[0] if args.device == "cuda" else None)
        data = [torch.randn(8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(50 + r))
                for r in range(world)]
        ddp(data[rank].to(device)).pow(2).sum().backward()
        for r in range(world):  # DDP averages the ranks' gradients
            reference(data[r]).pow(2).sum().div(world).backward()
        worst = max((p.grad.cpu() - q.grad).abs().max().item() for p, q in zip(model.parameters(),
                                                                             reference.parameters()))
        checks.check("DDP step gradients", worst < 1e-9, "off by %g" % worst)

    checks.run("DDP", ddp_step)

    def stream_order():
        if args.device != "cuda":
            return
        for attempt in range(3):
            tensor = torch.zeros(1 << 20, dtype=torch.float32, device=device)
            torch.cuda._sleep(50_000_000)  # the writing kernel starts late on torch's current stream
            tensor.fill_(rank + 1)
            dist.all_reduce(tensor)
            after = tensor * 2  # read on the current stream, no synchronize between
            expected = 2.0 * world * (world + 1) / 2
            ok = bool((after == expected).all().item())
            checks.check("current-stream order, try %d" % attempt, ok, "got %s" % after[:4].tolist())

    checks.run("stream order", stream_order)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if checks.failed else 0


def launch(args):
    port = free_port()
    ranks = []
    for rank in range(args.world_size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.world_size), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONUNBUFFERED="1")
        ranks.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"] + sys.argv[1:], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    passed = failed = 0
    hung = False
    for process in ranks:
        try:
            out, _ = process.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
            hung = True
        sys.stdout.write(out)
        passed += out.count(": PASS ")
        failed += out.count(": FAIL ") + (process.returncode != 0 and ": FAIL " not in out)
    stream = " side stream" if args.stream == "side" else ""
    print("torch %s %s%s world %d: %d passed, %d failed%s" % (args.backend, args.device, stream, args.world_size, passed,
                                                             failed, ", HUNG" if hung else ""), flush=True)
    return 1 if failed or hung or passed == 0 else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="nccl")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--stream", choices=["default", "side"], default="default",
                        help="the current stream of the calls: torch's default, or a side stream of the program's")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    return worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    sys.exit(main())
