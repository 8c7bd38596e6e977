"""Counting and scalable filters beside their peers.

    python benchmarks/filters_bench.py

- ScalableBloomFilter grown from 10,000 to 10,000,000 keys at 1%: measured
  false-positive rate on 2M absent keys, memory and speed; beside
  pybloom-live's ScalableBloomFilter (pure Python, so grown to 1,000,000
  keys: its per-key cost does not depend much on size); pybloom-live's
  issue #24 (github.com/joseph-fox/python-bloomfilter) reports twice its
  target rate.
- CountingBloomFilter (4-bit counters) beside fastbloom-rs's
  CountingBloomFilter: 1M keys at 1%, add / lookup / remove, and memory.
Writes the "filters" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import bloomline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> int:
    rows = []
    rng = np.random.default_rng(24)
    # ---- scalable, ours: 10k -> 10M
    n = 10_000_000
    keys = rng.permutation(4 * n)[:n].astype(np.uint64)
    absent = np.arange(2_000_000, dtype=np.uint64) + np.uint64(2**40)
    s = bloomline.ScalableBloomFilter(10_000, 0.01)
    t_add, _ = timed(lambda: [s.add_many(c) for c in np.array_split(keys, 100)])
    t_in, hits = timed(lambda: s.contains_many(absent))
    rows.append(("bloomline ScalableBloomFilter", n, s.num_stages, s.nbytes * 8 / n, hits.mean(), t_add / n * 1e9,
                 t_in / len(absent) * 1e9))
    # same keys as str through lists, 1M, for the like-for-like speed with pybloom-live
    m = 1_000_000
    strs = [str(k) for k in keys[:m].tolist()]
    absent_s = [f"absent-{i}" for i in range(200_000)]
    s1 = bloomline.ScalableBloomFilter(10_000, 0.01)
    t_add1, _ = timed(lambda: [s1.add(k) for k in strs])
    t_in1, hits1 = timed(lambda: [k in s1 for k in absent_s])
    rows.append(("bloomline ScalableBloomFilter, scalar str", m, s1.num_stages, s1.nbytes * 8 / m, float(np.mean(hits1)),
                 t_add1 / m * 1e9, t_in1 / len(absent_s) * 1e9))
    try:
        import pybloom_live

        p = pybloom_live.ScalableBloomFilter(initial_capacity=10_000, error_rate=0.01,
                                             mode=pybloom_live.ScalableBloomFilter.SMALL_SET_GROWTH)
        t_addp, _ = timed(lambda: [p.add(k) for k in strs])
        t_inp, hitsp = timed(lambda: [k in p for k in absent_s])
        bits = sum(f.num_bits for f in p.filters)
        import importlib.metadata

        rows.append((f"pybloom-live {importlib.metadata.version('pybloom-live')} ScalableBloomFilter",
                     m, len(p.filters), bits / m, float(np.mean(hitsp)), t_addp / m * 1e9, t_inp / len(absent_s) * 1e9))
    except ImportError:
        pass

    lines = ["## Counting and scalable filters\n",
             f"`python benchmarks/filters_bench.py`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n",
             "### Scalable, target 1%, initial capacity 10,000\n",
             "| filter | keys | stages | bits/key | measured FP | add ns/key | lookup ns/key |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, keys_n, stages, bpk, fp, a, c in rows:
        lines.append(f"| {name} | {keys_n:,} | {stages} | {bpk:.2f} | {fp:.4%} | {a:,.0f} | {c:,.0f} |")
    lines.append("")
    lines.append("Ours: uint64 keys through add_many/contains_many, 2M absent keys; scalar rows: the same 1M keys "
                 "as str, one call per key, 200k absent str keys.\n")

    # ---- counting, 1M at 1%
    n = 1_000_000
    ints = rng.integers(0, 2**62, size=n, dtype=np.int64)
    lst = ints.tolist()
    absent_i = (rng.integers(0, 2**61, size=n, dtype=np.int64) + 2**62).tolist()
    crow = []
    c = bloomline.CountingBloomFilter(n, 0.01)
    t_a, _ = timed(lambda: c.add_many(ints))
    t_c, fpc = timed(lambda: c.contains_many(np.array(absent_i)))
    t_r, _ = timed(lambda: c.remove_many(ints[: n // 2]))
    crow.append(("bloomline CountingBloomFilter (4-bit), NumPy batch", c.nbytes, t_a, t_c, t_r, fpc.mean()))
    c2 = bloomline.CountingBloomFilter(n, 0.01)
    t_a, _ = timed(lambda: c2.add_many(lst))
    t_c, fpc = timed(lambda: c2.contains_many(absent_i))
    t_r, _ = timed(lambda: [c2.remove(k) for k in lst[: n // 2]])
    crow.append(("bloomline CountingBloomFilter (4-bit), list batch; scalar remove", c2.nbytes, t_a, t_c, t_r, fpc.mean()))
    try:
        import fastbloom_rs

        f = fastbloom_rs.CountingBloomFilter(n, 0.01)
        t_a, _ = timed(lambda: f.add_int_batch(lst))
        t_c, fpf = timed(lambda: f.contains_int_batch(absent_i))
        t_r, _ = timed(lambda: [f.remove_int(k) for k in lst[: n // 2]])
        crow.append(("fastbloom-rs CountingBloomFilter, int batch; scalar remove", len(f.get_bytes()), t_a, t_c, t_r,
                     float(np.mean(fpf))))
    except ImportError:
        pass
    lines += ["### Counting, 1,000,000 int keys at 1%\n",
              "| filter | memory | add ns/key | lookup ns/key | remove ns/key | measured FP |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, nbytes, a, c_, r, fp in crow:
        lines.append(f"| {name} | {nbytes / 2**20:.1f} MiB | {a / n * 1e9:,.0f} | {c_ / n * 1e9:,.0f} | "
                     f"{r / (n // 2) * 1e9:,.0f} | {fp:.4%} |")
    write_section("filters", "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
