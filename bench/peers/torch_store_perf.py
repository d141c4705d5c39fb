#!/usr/bin/python3
"""The store_perf measurements against torch.distributed's TCPStore (Debian's python3-torch).

Same shape as bench/store_perf: set+get round trips of small values from 1, 8 and 64 client
threads (torch releases the GIL inside store calls), then a rendezvous of N clients that each add
1 to a counter and wait until the last one sets a key. Prints the same CSV columns.

    /usr/bin/python3 bench/peers/torch_store_perf.py [--seconds 2] [--clients 1,8,64] [--rendezvous 1024]
"""
import argparse
import datetime
import statistics
import threading
import time

import torch.distributed as dist


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[int(fraction * (len(ordered) - 1))] if ordered else 0.0


def client(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(minutes=2))


def round_trips(port, clients, seconds, value_bytes):
    stores = [client(port) for _ in range(clients)]
    value = b"Z" * value_bytes
    latencies = [[] for _ in range(clients)]
    go, stop = threading.Event(), threading.Event()

    def work(i):
        key = f"bench/{i}"
        go.wait()
        while not stop.is_set():
            start = time.perf_counter()
            stores[i].set(key, value)
            got = stores[i].get(key)
            latencies[i].append((time.perf_counter() - start) * 1e6)
            assert len(got) == value_bytes

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    go.set()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    everything = [x for per_client in latencies for x in per_client]
    print(f"set_get,{clients},{value_bytes},{2 * len(everything) / elapsed:.0f},"
          f"{percentile(everything, 0.5):.1f},{percentile(everything, 0.99):.1f},{elapsed * 1000:.1f}", flush=True)


def rendezvous(port, clients):
    start = time.perf_counter()
    stores = [None] * clients

    def connect(c, step):
        for i in range(c, clients, step):
            stores[i] = client(port)

    connectors = [threading.Thread(target=connect, args=(c, 16)) for c in range(16)]
    for thread in connectors:
        thread.start()
    for thread in connectors:
        thread.join()
    connect_ms = (time.perf_counter() - start) * 1000
    go = threading.Event()

    def work(i):
        go.wait()
        if stores[i].add("rendezvous/count", 1) == clients:
            stores[i].set("rendezvous/done", "1")
        stores[i].wait(["rendezvous/done"])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    print(f"connect,{clients},0,,,,{connect_ms:.1f}")
    print(f"rendezvous,{clients},0,,,,{(time.perf_counter() - start) * 1000:.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--clients", default="1,8,64")
    parser.add_argument("--value-bytes", type=int, default=64)
    parser.add_argument("--rendezvous", type=int, default=1024)
    args = parser.parse_args()
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(minutes=2))
    print("test,clients,value_bytes,requests_per_s,p50_us,p99_us,total_ms")
    for clients in [int(c) for c in args.clients.split(",")]:
        round_trips(server.port, clients, args.seconds, args.value_bytes)
    if args.rendezvous > 0:
        rendezvous(server.port, args.rendezvous)


if __name__ == "__main__":
    main()
