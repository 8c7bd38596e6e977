"""Memory of Scrapy's RFPDupeFilter beside bloomline's BloomDupeFilter at 1M
and 10M fingerprints (issue 7). Each measurement runs in its own process and
reports its resident-memory growth while the filter fills.

    python benchmarks/scrapy_bench.py

RFPDupeFilter keeps every fingerprint as a 20-byte bytes object in a set; the
fingerprints are fed to its set directly (building 10M Request objects would
measure Scrapy's Request, not the filter). BloomDupeFilter gets the same
fingerprints through its seen-set, at the default 1e-4 error rate and a
capacity equal to the count (its first stage is sized for 1e-5, so that the
chain stays under 1e-4 if it grows).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402

CHILD = r"""
import gc, json, sys, time, tracemalloc
import numpy as np

kind, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
chunk = 1_000_000
if kind == "rfp":
    from scrapy.dupefilters import RFPDupeFilter
    df = RFPDupeFilter()
    tracemalloc.start()
    t = time.perf_counter()
    for start in range(0, n, chunk):
        raw = rng.bytes(20 * min(chunk, n - start))
        df._fingerprints.update(raw[i:i + 20] for i in range(0, len(raw), 20))
        del raw
    elapsed = time.perf_counter() - t
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]  # the set and its bytes objects
else:
    from bloomline.scrapy import BloomDupeFilter
    df = BloomDupeFilter(capacity=n, error_rate=1e-4)
    t = time.perf_counter()
    for start in range(0, n, chunk):
        raw = rng.bytes(20 * min(chunk, n - start))
        df.seen.add_many(np.frombuffer(raw, dtype="S20"))
    elapsed = time.perf_counter() - t
    held = df.seen.nbytes  # the filter's bits (C++ memory, exact)
    assert df.seen.contains_many(np.frombuffer(raw, dtype="S20")).all()
print(json.dumps({"held": held, "seconds": elapsed}))
"""


def measure(kind: str, n: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    import scrapy

    lines = ["## Scrapy dupefilter memory (issue 7)\n",
             f"`python benchmarks/scrapy_bench.py`, Scrapy {scrapy.__version__}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Memory the seen-set holds once full: "
             "RFPDupeFilter's set and its fingerprint objects (tracemalloc), BloomDupeFilter's bits (exact).\n",
             "| fingerprints | RFPDupeFilter | BloomDupeFilter (1e-4) | ratio |",
             "|---:|---:|---:|---:|"]
    for n in (1_000_000, 10_000_000):
        rfp, ours = measure("rfp", n), measure("bloom", n)
        lines.append(f"| {n:,} | {rfp['held'] / 2**20:,.0f} MiB | {ours['held'] / 2**20:,.1f} MiB | "
                     f"{rfp['held'] / max(ours['held'], 1):,.0f}x |")
    write_section("scrapy", "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
