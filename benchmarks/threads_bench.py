"""threads= on add_many / contains_many: one thread against several, on the
same keys, in one run. Writes the "threads" section of RESULTS.md.

    python benchmarks/threads_bench.py            # about 1 minute
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402

import bloomline  # noqa: E402

KEYS = 10_000_000
REPEATS = 5


def seconds(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> int:
    cpus = os.cpu_count() or 1
    counts = sorted({1, 2, cpus})
    rng = np.random.default_rng(8)
    ints = rng.integers(0, 2**63, size=KEYS, dtype=np.uint64)
    int_probe = np.concatenate([ints[: KEYS // 2], rng.integers(0, 2**63, size=KEYS // 2, dtype=np.uint64)])
    urls = np.array([f"https://www.site{i % 5000:04d}.example/a/{i:012x}/index.html" for i in range(KEYS // 5)],
                    dtype="S")
    rows = []
    for keys_name, capacity, layout in (("uint64", 10_000_000, "blocked"), ("uint64", 100_000_000, "blocked"),
                                        ("uint64", 10_000_000, "standard"), ("S (URLs)", 2_000_000, "blocked"),
                                        ("U (URLs)", 2_000_000, "blocked"),
                                        ("Arrow string (URLs)", 2_000_000, "blocked"),
                                        ("list of str (URLs)", 2_000_000, "blocked")):
        keys: Any
        if keys_name == "uint64":
            keys, probe = ints, int_probe
        elif keys_name.startswith("S"):
            keys = probe = urls
        elif keys_name.startswith("U"):
            keys = probe = urls.astype("U")
        elif keys_name.startswith("Arrow"):
            import pyarrow as pa

            keys = probe = pa.array(urls.astype("U").tolist(), type=pa.string())
        else:
            keys = probe = urls.astype("U").tolist()
        n = len(keys)

        def fresh() -> bloomline.BloomFilter:
            bf = bloomline.BloomFilter(capacity, 0.01, layout=layout)
            bf.clear()  # touch every page first: page faults are not the add's cost
            return bf

        filled = fresh()
        filled.add_many(keys)
        # The thread counts take turns within each repeat, so this shared
        # machine's drift falls on all of them alike; speed-ups are medians
        # of the per-repeat ratios.
        add: dict[int, list[float]] = {t: [] for t in counts}
        look: dict[int, list[float]] = {t: [] for t in counts}
        for _ in range(REPEATS):
            for t in counts:
                bf = fresh()
                add[t].append(seconds(lambda t=t, bf=bf: bf.add_many(keys, threads=t)))
                look[t].append(seconds(lambda t=t: filled.contains_many(probe, threads=t)))
                del bf
        mb = filled.nbytes / 1e6
        for t in counts:
            add_up = statistics.median(a / b for a, b in zip(add[1], add[t]))
            look_up = statistics.median(a / b for a, b in zip(look[1], look[t]))
            rows.append(f"| {keys_name} | {layout} | {mb:.0f} | {t} | {statistics.median(add[t]) / n * 1e9:.1f} "
                        f"| {add_up:.2f}x | {statistics.median(look[t]) / n * 1e9:.1f} | {look_up:.2f}x |")
            print(rows[-1], flush=True)
        del filled
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        "## threads= on batch calls",
        "",
        f"`python benchmarks/threads_bench.py`, {when}; {cpus} CPUs. {KEYS:,} uint64 keys from a NumPy array, "
        f"and {KEYS // 5:,} URLs (about 50 bytes) as NumPy S and U arrays, a pyarrow string column and a list "
        "of str, filters at 1%, medians of "
        f"{REPEATS} repeats in which the thread counts take turns. Speed-up is the "
        "median of the per-repeat ratios to threads=1. The answers are the same for every thread count "
        "(tests/test_threads.py and tests/test_threaded_adds.py compare the bytes).",
        "",
        "| keys | layout | MB | threads | add_many ns/key | speed-up | contains_many ns/key | speed-up |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "What threads= spreads (parallel.hpp). Lookups: every input, cut into one slice per thread; they "
        "scale with the cores' memory parallelism. Adds: each thread owns a range of the "
        "filter's memory in whole 512-slot units and makes every write in it, in input order, so the "
        "answers, counts and bytes are one thread's (tests/test_threaded_adds.py); per super-chunk the keys "
        "are hashed on every thread and sorted to their owners, then each owner adds its keys (the blocked "
        "layout through its one-thread batch add, the standard layout slot by slot). The sorting costs CPU "
        "that one thread does not spend (benchmarks/NOTES.md, \"Threaded adds\"), so two threads gain less "
        "than two cores' memory parallelism would allow; benchmarks/threads_probe.cpp measures that floor. "
        "Lists (and other iterables) are read and hashed under the GIL, on one thread, first.",
    ])
    write_section("threads", body)
    print("wrote the threads section of benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
