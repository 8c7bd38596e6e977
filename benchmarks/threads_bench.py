"""threads= on add_many / contains_many: one thread against several, on the
same keys, in one run. Writes the "threads" section of RESULTS.md.

    python benchmarks/threads_bench.py            # about 2 minutes
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402

import bloomline  # noqa: E402

KEYS = 10_000_000
REPEATS = 3


def median_ns(fn: object, setup: object) -> float:
    times = []
    for _ in range(REPEATS):
        arg = setup()  # type: ignore[operator]
        start = time.perf_counter()
        fn(arg)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) / KEYS * 1e9


def main() -> int:
    cpus = os.cpu_count() or 1
    counts = sorted({1, 2, cpus})
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 2**63, size=KEYS, dtype=np.uint64)
    probe = np.concatenate([keys[: KEYS // 2], rng.integers(0, 2**63, size=KEYS // 2, dtype=np.uint64)])
    rows = []
    for capacity, layout in ((10_000_000, "blocked"), (100_000_000, "blocked"), (10_000_000, "standard")):
        base: dict[str, float] = {}
        for t in counts:
            def fresh() -> bloomline.BloomFilter:
                bf = bloomline.BloomFilter(capacity, 0.01, layout=layout)
                bf.clear()  # touch every page first: page faults are not the add's cost
                return bf

            add = median_ns(lambda bf, t=t: bf.add_many(keys, threads=t), fresh)
            filled = fresh()
            filled.add_many(keys)
            look = median_ns(lambda _, t=t, f=filled: f.contains_many(probe, threads=t), lambda: None)
            if t == 1:
                base = {"add": add, "look": look}
            mb = filled.nbytes / 1e6
            rows.append(f"| {layout} | {mb:.0f} | {t} | {add:.1f} | {base['add'] / add:.2f}x | {look:.1f} "
                        f"| {base['look'] / look:.2f}x |")
            print(rows[-1], flush=True)
            del filled
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        "## threads= on batch calls",
        "",
        f"`python benchmarks/threads_bench.py`, {when}; {cpus} CPUs. {KEYS:,} uint64 keys from a NumPy array, "
        f"filters at 1%, medians of {REPEATS}. Speed-up is against threads=1 in this run. The answers are the "
        "same for every thread count (tests/test_threads.py compares the bytes).",
        "",
        "| layout | MB | threads | add_many ns/key | speed-up | contains_many ns/key | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Lookups split into slices and scale with the cores' memory parallelism. Blocked adds split by block "
        "range: every thread scans the whole hashed chunk for its own blocks, so they gain less. The standard "
        "layout adds on one thread (only its hashing is parallel).",
    ])
    write_section("threads", body)
    print("wrote the threads section of benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
