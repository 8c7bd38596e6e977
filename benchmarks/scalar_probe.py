"""One call per key: bloomline's `add` and `in` beside abloom's, in one process.

    python benchmarks/scalar_probe.py                # 1M keys, 9 rounds, prints a table
    python benchmarks/scalar_probe.py --section      # also writes RESULTS.md's "scalar" section
    python benchmarks/scalar_probe.py --methods add_a,add_b   # extra bound methods of ours, as adds

For str (URL-like, ASCII), bytes (the same URLs) and int keys (below 2**62):
each round makes a new filter per contender (capacity = keys, 1%), times a
Python loop of `f.add(k)` over the keys, then a loop of `k in f` over as
many lookups, half of them present. The contenders take turns within each
round, in an order that rotates from round to round, so that this shared
machine's drift falls on all of them alike; every round gets new key objects
(str and bytes are built anew), so that no library profits from a hash that
Python cached on the object. Times are ns per call, loop included (an empty
loop over the same list is reported too); medians over the rounds.

abloom is measured in both its forms: serializable=True hashes with XXH64,
stable across processes as ours is (the form to compare against), and the
default hashes with Python's salted hash(). `--methods` times further
methods of our filter that take one key, as adds (as lookups into the filled
filter when the name starts with "in"), for measuring variants of the entry
path side by side.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import bloomline

HERE = Path(__file__).resolve().parent


def url_bytes(n: int, seed: int) -> list[bytes]:
    """run.py's URL-like keys."""
    rng = np.random.default_rng(seed)
    hosts = rng.integers(0, 50_000, size=n)
    ids = rng.integers(0, 2**62, size=n)
    return [b"https://www.site%05d.example/articles/%016x/index.html" % (h, i) for h, i in zip(hosts.tolist(), ids.tolist())]


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def loop_add(add: Callable[[Any], Any], keys: list[Any]) -> None:
    for k in keys:
        add(k)


def loop_in(f: Any, keys: list[Any]) -> None:
    for k in keys:
        k in f  # noqa: B015


def loop_empty(keys: list[Any]) -> None:
    for _k in keys:
        pass


def timed(fn: Callable[[], object], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) / n * 1e9
    finally:
        gc.enable()


def contenders(methods: list[str]) -> dict[str, tuple[Callable[[int], Any], Callable[[Any], Callable[[Any], Any]]]]:
    """name -> (make(n), bound add of a filter)."""
    out: dict[str, tuple[Callable[[int], Any], Callable[[Any], Callable[[Any], Any]]]] = {
        "bloomline": (lambda n: bloomline.BloomFilter(n, 0.01), lambda f: f.add),
    }
    for m in methods:
        out[f"bloomline .{m}"] = (lambda n: bloomline.BloomFilter(n, 0.01), lambda f, m=m: getattr(f, m))
    try:
        import abloom

        out["abloom serializable=True"] = (lambda n: abloom.BloomFilter(n, 0.01, serializable=True), lambda f: f.add)
        out["abloom default"] = (lambda n: abloom.BloomFilter(n, 0.01), lambda f: f.add)
    except ImportError:
        print("abloom is not installed: pip install abloom", file=sys.stderr)
    return out


def run(n: int, rounds: int, methods: list[str], only: list[str], stat: Callable[[list[float]], float]) -> dict[str, dict[str, float]]:
    present = url_bytes(n, 1)
    absent = url_bytes(n // 2, 2)
    rng = np.random.default_rng(3)
    ints = rng.integers(0, 2**62, size=n + n // 2, dtype=np.int64).tolist()
    forms: dict[str, Callable[[], tuple[list[Any], list[Any]]]] = {
        "str": lambda: ([b.decode() for b in present], [b.decode() for b in present[: n // 2] + absent]),
        "bytes": lambda: ([bytes(bytearray(b)) for b in present], [bytes(bytearray(b)) for b in present[: n // 2] + absent]),
        "int": lambda: (ints[:n], ints[: n // 2] + ints[n:]),
    }
    forms = {k: v for k, v in forms.items() if not only or k in only}
    libs = contenders(methods)
    samples: dict[str, list[float]] = {}
    names = list(libs)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for form, make_keys in forms.items():
            for name in order:
                make, add = libs[name]
                keys, lookups = make_keys()
                f = make(n)
                bound = add(f)
                if name.startswith("bloomline .in"):  # a lookup method: fill the filter first, time the lookups
                    loop_add(f.add, keys)
                    samples.setdefault(f"{name}|in {form}", []).append(timed(lambda: loop_add(bound, lookups), len(lookups)))
                    del f, bound, keys, lookups
                    continue
                samples.setdefault(f"{name}|add {form}", []).append(timed(lambda: loop_add(bound, keys), n))
                if " ." not in name:  # further methods are adds; `in` is one slot for all of ours
                    samples.setdefault(f"{name}|in {form}", []).append(timed(lambda: loop_in(f, lookups), len(lookups)))
                del f, bound, keys, lookups
            keys = make_keys()[0]
            samples.setdefault(f"empty loop|{form}", []).append(timed(lambda: loop_empty(keys), n))
            del keys
        print(f"round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    out: dict[str, dict[str, float]] = {}
    for key, v in samples.items():
        name, op = key.split("|")
        out.setdefault(name, {})[op] = stat(v)
    return out


def table(res: dict[str, dict[str, float]]) -> str:
    cols = ["add str", "in str", "add bytes", "in bytes", "add int", "in int"]
    cols = [c for c in cols if any(c in r for r in res.values())]
    lines = ["| | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, r in res.items():
        if name == "empty loop":
            continue
        lines.append(f"| {name} | " + " | ".join(f"{r[c]:.1f}" if c in r else "" for c in cols) + " |")
    ref = res.get("abloom serializable=True")
    if ref and "bloomline" in res:
        ours = res["bloomline"]
        lines.append("| bloomline / abloom serializable=True | "
                     + " | ".join(f"{ours[c] / ref[c]:.2f}x" for c in cols) + " |")
    e = res["empty loop"]
    lines.append("\nAn empty loop over the same lists: " + ", ".join(f"{v:.1f} ({k})" for k, v in e.items()) + " ns per key.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--methods", default="",
                    help="comma-separated further methods of ours, timed as adds (as lookups if named in*)")
    ap.add_argument("--forms", default="", help="comma-separated key forms to time (str,bytes,int; default all)")
    ap.add_argument("--min", action="store_true", help="the fastest round instead of the median (for variants: "
                    "other processes on the machine only ever add time)")
    ap.add_argument("--section", action="store_true", help='write the "scalar" section of RESULTS.md')
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    only = [f for f in args.forms.split(",") if f]
    res = run(args.keys, args.rounds, methods, only, min if args.min else statistics.median)
    text = table(res)
    print(text)
    print(json.dumps(res))
    if args.section:
        sys.path.insert(0, str(HERE))
        from _sections import write_section

        import os

        cpu = "?"
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        head = (f"## Scalar calls beside abloom\n\n`scalar_probe.py --keys {args.keys} --rounds {args.rounds}`, "
                f"run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: one process, the contenders taking turns, "
                f"medians of {args.rounds} rounds, ns per call (the Python loop included). Machine: {cpu}, "
                f"{os.cpu_count()} CPUs; Python {platform.python_version()}, bloomline {bloomline.__version__} "
                f"(blocked layout), abloom {version_of('abloom')}. {args.keys:,} keys a call loop; lookups half "
                f"present.\n\n")
        write_section("scalar", head + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
