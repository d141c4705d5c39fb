#!/usr/bin/env python3
"""torch.distributed on libcomm: every ProcessGroup operation the backend implements, on CPU
tensors of every dtype libcomm has, checked on every rank against results computed here from
all ranks' inputs (in float64 where it matters); then the errors torch users must get instead of
wrong results. World sizes 2 and 3, through mp.spawn and tcp:// (torch's own TCPStore).

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_backend.py
"""
import json
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist

import torch_libcomm  # noqa: F401  registers "libcomm"
from launchers import free_port, open_sockets, spawn_and_report

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
       "BXOR": dist.ReduceOp.BXOR}


def values(rank, count, dtype):
    """Small exact values: every reduction of them is exact in every dtype."""
    base = torch.arange(count, dtype=torch.int64) % 5 + rank + 1
    return base.to(dtype)


def reference(op, inputs):
    """The reduction of the ranks' inputs, in float64 (bitwise ones in int64)."""
    if op in ("BAND", "BOR", "BXOR"):
        combine = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        result = inputs[0].to(torch.int64)
        for other in inputs[1:]:
            result = combine(result, other.to(torch.int64))
        return result.to(torch.float64)
    stack = torch.stack([t.to(torch.float64) for t in inputs])
    return {"SUM": lambda: stack.sum(0), "PRODUCT": lambda: stack.prod(0), "MIN": lambda: stack.min(0).values,
            "MAX": lambda: stack.max(0).values, "AVG": lambda: stack.mean(0)}[op]()


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.count = 0

    def equal(self, what, got, want, tolerance=0.0):
        self.count += 1
        got64 = got.to(torch.float64)
        want64 = want.to(torch.float64)
        if got64.shape != want64.shape or not torch.allclose(got64, want64, rtol=tolerance, atol=tolerance):
            self.failures.append("rank %d: %s: got %s, want %s" % (self.rank, what, got.tolist()[:8],
                                                                    want.tolist()[:8]))

    def raises(self, what, call, words):
        self.count += 1
        try:
            call()
        except RuntimeError as error:
            if words not in str(error):
                self.failures.append("rank %d: %s: error without '%s': %s" % (self.rank, what, words, error))
            return
        self.failures.append("rank %d: %s: no error" % (self.rank, what))


def check_collectives(rank, size, check):
    count = 37
    for dtype in DTYPES:
        floating = dtype.is_floating_point
        tolerance = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 0.0
        for name, op in OPS.items():
            if name in ("BAND", "BOR", "BXOR") and floating:
                continue
            if name == "AVG" and not floating:
                continue
            if name == "PRODUCT" and dtype in (torch.int8, torch.uint8):
                count_here = 3  # 4*5*... stays in range for three ranks of small values
            else:
                count_here = count
            tensor = values(rank, count_here, dtype)
            dist.all_reduce(tensor, op=op)
            want = reference(name, [values(r, count_here, dtype) for r in range(size)])
            if not floating:
                want = want.to(dtype).to(torch.float64)
            check.equal("all_reduce %s %s" % (name, dtype), tensor, want, tolerance)
        # broadcast from every root
        for root in range(size):
            tensor = values(rank, count, dtype)
            dist.broadcast(tensor, root)
            check.equal("broadcast root %d %s" % (root, dtype), tensor, values(root, count, dtype))
        # reduce to the last rank: the others keep their input
        root = size - 1
        tensor = values(rank, count, dtype)
        dist.reduce(tensor, root, op=dist.ReduceOp.MAX)
        want = reference("MAX", [values(r, count, dtype) for r in range(size)]) if rank == root else \
            values(rank, count, dtype)
        check.equal("reduce %s" % dtype, tensor, want)
        # all_gather, list and flat
        outputs = [torch.zeros(count, dtype=dtype) for _ in range(size)]
        dist.all_gather(outputs, values(rank, count, dtype))
        for r in range(size):
            check.equal("all_gather block %d %s" % (r, dtype), outputs[r], values(r, count, dtype))
        flat = torch.zeros(count * size, dtype=dtype)
        dist._all_gather_base(flat, values(rank, count, dtype))
        check.equal("_all_gather_base %s" % dtype, flat, torch.cat([values(r, count, dtype) for r in range(size)]))
        # gather and scatter to and from rank 0
        gathered = [torch.zeros(count, dtype=dtype) for _ in range(size)] if rank == 0 else None
        dist.gather(values(rank, count, dtype), gathered, dst=0)
        if rank == 0:
            for r in range(size):
                check.equal("gather block %d %s" % (r, dtype), gathered[r], values(r, count, dtype))
        received = torch.zeros(count, dtype=dtype)
        pieces = [values(10 + r, count, dtype) for r in range(size)] if rank == 0 else None
        dist.scatter(received, pieces, src=0)
        check.equal("scatter %s" % dtype, received, values(10 + rank, count, dtype))
        # reduce_scatter, list and flat
        inputs = [values(rank * size + r, count, dtype) for r in range(size)]
        output = torch.zeros(count, dtype=dtype)
        dist.reduce_scatter(output, inputs)
        want = reference("SUM", [values(r * size + rank, count, dtype) for r in range(size)])
        check.equal("reduce_scatter %s" % dtype, output, want.to(dtype), tolerance)
        output = torch.zeros(count, dtype=dtype)
        dist._reduce_scatter_base(output, torch.cat(inputs))
        check.equal("_reduce_scatter_base %s" % dtype, output, want.to(dtype), tolerance)
        # Unequal sizes (rank r's (2r + 1) % 5 elements, a zero among them from 3 ranks): libcomm's
        # all_gather_v and reduce_scatter_v.
        sizes = [(2 * r + 1) % 5 for r in range(size)]
        outputs = [torch.full((sizes[r],), -1, dtype=dtype) for r in range(size)]
        dist.all_gather(outputs, values(rank, sizes[rank], dtype))
        for r in range(size):
            check.equal("all_gather unequal block %d %s" % (r, dtype), outputs[r], values(r, sizes[r], dtype))
        inputs = [values(rank * size + r, sizes[r], dtype) for r in range(size)]
        output = torch.full((sizes[rank],), -1, dtype=dtype)
        dist.reduce_scatter(output, inputs)
        want = reference("SUM", [values(r * size + rank, sizes[rank], dtype) for r in range(size)])
        check.equal("reduce_scatter unequal %s" % dtype, output, want.to(dtype), tolerance)
        # all_to_all: equal blocks, uneven blocks, lists
        block = 4
        source = torch.cat([values(rank * 100 + r, block, dtype) for r in range(size)])
        target = torch.zeros(block * size, dtype=dtype)
        dist.all_to_all_single(target, source)
        check.equal("all_to_all_single %s" % dtype, target,
                    torch.cat([values(r * 100 + rank, block, dtype) for r in range(size)]))
        # rank r sends r + peer + 1 rows to peer
        send_splits = [rank + peer + 1 for peer in range(size)]
        receive_splits = [peer + rank + 1 for peer in range(size)]
        source = torch.cat([values(rank * 100 + peer, rank + peer + 1, dtype) for peer in range(size)])
        target = torch.zeros(sum(receive_splits), dtype=dtype)
        dist.all_to_all_single(target, source, receive_splits, send_splits)
        check.equal("all_to_all_single uneven %s" % dtype, target,
                    torch.cat([values(peer * 100 + rank, peer + rank + 1, dtype) for peer in range(size)]))
        # Rows of 3, some splits 0 (the peer one past this rank gets none): libcomm's all_to_all_v.
        rows = [0 if peer == (rank + 1) % size and size > 1 else rank + 2 * peer + 1 for peer in range(size)]
        coming = [0 if rank == (peer + 1) % size and size > 1 else peer + 2 * rank + 1 for peer in range(size)]
        source = torch.cat([values(rank * 100 + peer, 3 * rows[peer], dtype).reshape(-1, 3) for peer in range(size)])
        target = torch.full((sum(coming), 3), -1, dtype=dtype)
        dist.all_to_all_single(target, source, coming, rows)
        check.equal("all_to_all_single uneven rows of 3 %s" % dtype, target,
                    torch.cat([values(peer * 100 + rank, 3 * coming[peer], dtype).reshape(-1, 3)
                               for peer in range(size)]))
    # The uneven all_to_all_single went through libcomm's collective, not per-peer messages.
    with tempfile.TemporaryDirectory() as folder:
        with open(torch_libcomm.dump_trace(folder)) as dump:
            operations = [entry["op"] for entry in json.load(dump)["entries"]]
        check.equal("all_to_all_single as all_to_all_v", torch.tensor(operations.count("all_to_all_v")),
                    torch.tensor(2 * len(DTYPES)))
        unequal = 1 if size > 1 else 0  # one rank's sizes are always "equal"
        check.equal("unequal all_gather as all_gather_v", torch.tensor(operations.count("all_gather_v")),
                    torch.tensor(unequal * len(DTYPES)))
        check.equal("unequal reduce_scatter as reduce_scatter_v", torch.tensor(operations.count("reduce_scatter_v")),
                    torch.tensor(unequal * len(DTYPES)))
    # bool: min/max are and/or
    flags = torch.tensor([rank == 0, True, False, rank % 2 == 1])
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    check.equal("all_reduce MAX bool", flags.to(torch.int64), torch.tensor([1, 1, 0, 1 if size > 1 else 0]))
    # coalesced
    tensors = [torch.full((5,), float(rank + 1)), torch.full((3,), 2.0 * (rank + 1))]
    dist.all_reduce_coalesced(tensors)
    total = size * (size + 1) / 2
    check.equal("all_reduce_coalesced 0", tensors[0], torch.full((5,), total))
    check.equal("all_reduce_coalesced 1", tensors[1], torch.full((3,), 2 * total))


def check_point_to_point(rank, size, check):
    peer = (rank + 1) % size
    source = (rank - 1) % size
    outgoing = torch.arange(10, dtype=torch.float64) + 100 * rank
    incoming = torch.zeros(10, dtype=torch.float64)
    request = dist.irecv(incoming, source, tag=3)
    dist.isend(outgoing, peer, tag=3).wait()
    request.wait()
    check.equal("isend/irecv ring", incoming, torch.arange(10, dtype=torch.float64) + 100 * source)
    if rank == 0:
        senders = set()
        for _ in range(size - 1):
            message = torch.zeros(1)
            sender = dist.recv(message)
            senders.add(sender)
            check.equal("recv from any source: the sender's value", message, torch.tensor([float(sender)]))
        check.count += 1
        if senders != set(range(1, size)):
            check.failures.append("rank 0: any-source senders %s" % sorted(senders))
    else:
        dist.send(torch.tensor([float(rank)]), 0)


def check_async(rank, size, check):
    tensors = [torch.full((1000,), float(rank + i)) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futures = [work.get_future() for work in works]
    chained = futures[-1].then(lambda future: future.value()[0] * 2)
    for i, work in enumerate(works):
        work.wait()
        check.equal("async all_reduce %d" % i, tensors[i], torch.full((1000,), float(sum(r + i for r in range(size)))))
    check.equal("future chained with then()", chained.wait(), torch.full((1000,), 2.0 * sum(r + 7 for r in range(size))))
    check.count += 1
    if not all(work.is_completed() and work.is_success() for work in works):
        check.failures.append("rank %d: completed works say they are not" % rank)
    dist.barrier()


def check_groups(rank, size, check):
    """new_group shares the world's connections: torch creates it on members only."""
    before = open_sockets()
    evens = [r for r in range(size) if r % 2 == 0]
    groups = [dist.new_group(evens), dist.new_group(list(range(size))), dist.new_group([size - 1])]
    tensor = torch.full((6,), float(rank + 1))
    if rank in evens:
        dist.all_reduce(tensor, group=groups[0])
        check.equal("all_reduce in the even ranks' group", tensor, torch.full((6,), float(sum(r + 1 for r in evens))))
    everyone = torch.full((3,), float(rank))
    dist.all_reduce(everyone, group=groups[1])
    check.equal("all_reduce in a group of everyone", everyone, torch.full((3,), float(sum(range(size)))))
    if rank == size - 1:
        alone = torch.ones(2)
        dist.all_reduce(alone, group=groups[2])
        check.equal("all_reduce in a group of one", alone, torch.ones(2))
    check.count += 1
    if open_sockets() > before:
        check.failures.append("rank %d: new_group opened %d sockets" % (rank, open_sockets() - before))
    dist.barrier()


def check_errors(rank, size, check):
    columns = torch.zeros(4, 4)[:, 0]  # not contiguous
    check.raises("non-contiguous", lambda: dist.all_reduce(columns), "contiguous")
    # (complex tensors reach a backend as float views, which is right for SUM)
    check.raises("int16, a dtype libcomm lacks", lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)), "dtype")
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    check.raises("a sparse tensor", lambda: dist.all_reduce(sparse), "dense tensors")
    check.raises("bitwise op on floats", lambda: dist.all_reduce(torch.zeros(2), op=dist.ReduceOp.BAND), "")
    check.raises("all_gather of the wrong length",
                 lambda: dist.all_gather([torch.zeros(2)] * (size + 1), torch.zeros(2)), "one tensor per rank")
    dist.barrier()


def worker(rank, size, port, results):
    dist.init_process_group("libcomm", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    check = Checker(rank)
    try:
        assert dist.get_backend() == "libcomm"
        check_collectives(rank, size, check)
        check_point_to_point(rank, size, check)
        check_async(rank, size, check)
        check_groups(rank, size, check)
        check_errors(rank, size, check)
    except Exception:  # an error is a failure of this rank, reported with the others
        check.failures.append("rank %d: %s" % (rank, traceback.format_exc()))
    results.put((rank, check.count, check.failures))
    dist.destroy_process_group()


def main():
    failed = sum(spawn_and_report(worker, size, (size, free_port()), "world %d" % size) for size in (2, 3))
    print("torch backend: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
