"""threads= far past the CPUs: a threaded add's team against one thread, on
the same keys, for the build importable here (run it under two builds to
compare them, e.g. PYTHONPATH=<an older build's package dir>).

    python benchmarks/team_limit.py        # about 20 s with the team limit

A threaded add sorts keys to owners; its bookkeeping grows with the team
(the blocked answers step with its square, a slot-by-slot add's merge per
key with it), so the team is held to max(CPUs available, 8). 2**22 keys:
batches of under 16,384 keys a thread use fewer threads, so 256 is the most
this batch runs on.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np

import bloomline
from bloomline import BloomFilter, CountingBloomFilter

KEYS = 1 << 22


def main() -> None:
    keys = np.random.default_rng(1).integers(0, 2**64, KEYS, dtype=np.uint64)
    print(f"bloomline from {os.path.dirname(bloomline.__file__)}; {os.cpu_count()} CPUs; "
          f"{platform.processor() or platform.machine()}; {KEYS:,} uint64 keys; seconds, best of 3")
    makes = {"blocked": lambda: BloomFilter(KEYS, 0.01), "standard": lambda: BloomFilter(KEYS, 0.01, layout="standard"),
             "counting": lambda: CountingBloomFilter(KEYS, 0.01)}
    for name, make in makes.items():
        row = []
        for threads in (1, 8, 256):
            best = float("inf")
            for _ in range(3):
                f = make()
                start = time.perf_counter()
                f.add_many(keys, threads=threads)
                best = min(best, time.perf_counter() - start)
            row.append(f"threads={threads}: {best:.3f}")
        print(f"{name:9s} " + "   ".join(row), flush=True)


if __name__ == "__main__":
    main()
