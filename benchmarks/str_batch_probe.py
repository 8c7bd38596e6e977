"""Where a batch add of URL-like str keys spends its time: the key walk,
the hash (MurmurHash3 x64 128, fixed by the file format), the bits.

    python benchmarks/str_batch_probe.py [--keys 1000000] [--rounds 7]

Prints ns per key (medians) for: hashing a NumPy S array (hash_many), hashing
a list[str], add_many and contains_many of each, and abloom's update of the
list in its stable form when abloom is installed. The gaps between the rows
are the walk of a list (str objects) and the bit work; the hash row is the
floor an add of these keys cannot go under.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any, Callable

import numpy as np

import bloomline
from bloomline import _core


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    keys = [f"https://www.example{rng.integers(10**6)}.com/path/{rng.integers(10**9)}/item?id={i}"
            for i in range(args.keys)]
    arr = np.array(keys, dtype="S")
    n = len(keys)
    f = bloomline.BloomFilter(n, 0.01)
    f.add_many(arr)
    rows: dict[str, Callable[[], Any]] = {
        "hash_many, NumPy S": lambda: _core.hash_many(arr),
        "hash_many, list[str]": lambda: _core.hash_many(keys),
        "add_many, NumPy S (new filter)": lambda: bloomline.BloomFilter(n, 0.01).add_many(arr),
        "add_many, list[str] (new filter)": lambda: bloomline.BloomFilter(n, 0.01).add_many(keys),
        "contains_many, NumPy S": lambda: f.contains_many(arr),
        "contains_many, list[str]": lambda: f.contains_many(keys),
    }
    try:
        import abloom  # type: ignore[import-not-found]

        def abloom_update() -> None:
            g = abloom.BloomFilter(n, 0.01, serializable=True)
            g.update(keys)

        rows["abloom serializable=True, update(list[str])"] = abloom_update
    except ImportError:
        pass
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):  # the contenders take turns, round by round
        for name, fn in rows.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) / n * 1e9)
    print(f"{args.keys:,} keys, mean length {sum(map(len, keys)) / n:.1f} bytes; medians of {args.rounds} rounds; "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"bloomline {bloomline.__version__}\n")
    print("| step | ns/key |\n|---|---:|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.1f} |")


if __name__ == "__main__":
    main()
