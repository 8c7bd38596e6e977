"""A 1-billion-key filter at 1% (about 1.24 GB): build with add_many in
chunks, save, load(mmap=True), spot-check. Records time and peak memory in
the "billion" section of benchmarks/RESULTS.md.

    python benchmarks/billion.py [--keys 1000000000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import bloomline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    n = args.keys
    chunk = 10_000_000
    base_rss = rss_mb()
    t0 = time.perf_counter()
    bf = bloomline.BloomFilter(n, 0.01)
    t_create = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, n, chunk):
        bf.add_many(np.arange(start, min(n, start + chunk), dtype=np.uint64))
    t_build = time.perf_counter() - t0
    rss_build = rss_mb()
    path = Path(args.dir) / "billion.blf"
    t0 = time.perf_counter()
    bf.save(path)
    t_save = time.perf_counter() - t0
    nbytes, approx = bf.nbytes, bf.approx_count
    del bf
    t0 = time.perf_counter()
    m = bloomline.BloomFilter.load(path, mmap=True)
    t_open = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    present = rng.integers(0, n, size=1_000_000, dtype=np.uint64)
    absent = rng.integers(0, 2**62, size=1_000_000, dtype=np.uint64) + np.uint64(2**62)
    t0 = time.perf_counter()
    found = m.contains_many(present)
    fp = m.contains_many(absent).mean()
    t_check = time.perf_counter() - t0
    assert found.all(), "a false negative"
    size_on_disk = path.stat().st_size
    os.unlink(path)
    body = "\n".join([
        "## A 1-billion-key filter at 1%\n",
        f"`python benchmarks/billion.py`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n",
        "| step | time | notes |",
        "|---|---:|---|",
        f"| create BloomFilter({n:,}, 0.01) | {t_create * 1e3:.1f} ms | {nbytes / 1e9:.2f} GB of bits, zero pages mapped lazily |",
        f"| add_many, {n // chunk} chunks of {chunk:,} uint64 | {t_build:.1f} s | {t_build / n * 1e9:.0f} ns/key; approx_count {approx:,.0f} |",
        f"| save (atomic: temp, fsync, rename) | {t_save:.1f} s | {size_on_disk / 1e9:.2f} GB file |",
        f"| load(mmap=True) | {t_open * 1e3:.2f} ms | constant time: header checked, pages fault in on use |",
        f"| spot-check 1M present + 1M absent | {t_check:.2f} s | all present found; FP {fp:.4%} (target 1%) |",
        "",
        f"Peak resident memory: {rss_build:,.0f} MB after the build (the process started at {base_rss:,.0f} MB).",
    ])
    write_section("billion", body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
