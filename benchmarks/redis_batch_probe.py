"""Module backend batches alone, for comparing two builds of bloomline on
one machine (the redesign of bloomline.redis was checked this way, old
build against new, benchmarks/NOTES.md "Redis").

    PYTHONPATH=<a tree's python dir, its _core and redis_module built in> python benchmarks/redis_batch_probe.py NAME

Starts a redis-server on a free loopback port with that tree's module,
makes a filter of capacity 1,000,000 at 0.01, and prints the best of three
repeats of 200,000 URL keys added, then looked up, in batches of 10,000.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import redis

from bloomline.redis import RedisBloomFilter, module_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                             "no", "--dir", tempfile.mkdtemp(), "--loadmodule", module_path()],
                            stdout=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(100):  # (bounded: 5 s for the server to answer)
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        f = RedisBloomFilter(r, "probe", 1_000_000, 0.01, backend="module")
        keys = np.array([f"https://site.example/{i}/path/to/page?x={i}" for i in range(600_000)])
        best_add = best_has = float("inf")
        for rep in range(3):
            f.clear()
            t = time.perf_counter()
            for lo in range(0, 200_000, 10_000):
                f.add_many(keys[rep * 200_000 + lo : rep * 200_000 + lo + 10_000])
            best_add = min(best_add, (time.perf_counter() - t) / 200_000 * 1e9)
            t = time.perf_counter()
            for lo in range(0, 200_000, 10_000):
                f.contains_many(keys[lo : lo + 10_000])
            best_has = min(best_has, (time.perf_counter() - t) / 200_000 * 1e9)
        print(f"{sys.argv[1] if len(sys.argv) > 1 else 'this build'}: add {best_add:.0f} ns/key, "
              f"lookup {best_has:.0f} ns/key")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
