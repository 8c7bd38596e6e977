"""The standard layout's two indexes side by side, in one process and build:
the false-positive rates they reach, sized filters at capacity, and the
speed of their batch calls.

    python benchmarks/standard_index.py [--rates] [--speed] [--scale 1.0] [--out benchmarks/standard_index.json]

Rates: per cell, `filters` filters (seeds 0..) each filled to capacity with
its own random uint64 keys and probed with fresh ones (a disjoint range);
the cells of the hostile read that found the first index's defect
(docs/design/layouts.md). `--scale` multiplies every cell's probes.
Speed: add_many then contains_many of 1M and 20M uint64 keys and 1M
URL-like str keys at 1%, medians of 5 rounds, the two indexes taking turns.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import bloomline
from bloomline import BloomFilter

LAYOUTS = ("standard", "standard-v1", "blocked")
# capacity, error_rate, filters, probes per filter (at scale 1)
CELLS = [(10, 1e-4, 2000, 100_000), (100, 1e-4, 200, 500_000), (1_000, 1e-4, 20, 5_000_000),
         (10_000, 1e-6, 4, 250_000_000), (100_000, 1e-8, 1, 2_000_000_000)]
CHUNK = 10_000_000


def rate(capacity: int, error_rate: float, layout: str, filters: int, probes: int) -> dict[str, Any]:
    rng = np.random.default_rng(20261130)
    hits = 0
    for seed in range(filters):
        f = BloomFilter(capacity, error_rate, layout=layout, seed=seed)  # type: ignore[arg-type]
        f.add_many(rng.integers(0, 2**63, capacity, dtype=np.uint64))
        left = probes
        while left:
            n = min(left, CHUNK)
            hits += int(f.contains_many(rng.integers(2**63, 2**64 - 1, n, dtype=np.uint64, endpoint=True)).sum())
            left -= n
    return {"capacity": capacity, "error_rate": error_rate, "layout": layout, "num_bits": f.num_bits,
            "num_hashes": f.num_hashes, "probes": filters * probes, "hits": hits,
            "measured": hits / (filters * probes)}


def speed(rounds: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    work = [("uint64, 1M keys", rng.integers(0, 2**64 - 1, 1_000_000, dtype=np.uint64, endpoint=True)),
            ("uint64, 20M keys", rng.integers(0, 2**64 - 1, 20_000_000, dtype=np.uint64, endpoint=True)),
            ("URL-like str, 1M keys", [f"https://example.com/item/{i}?ref={i * 7919 % 1000}" for i in range(1_000_000)])]
    rows = []
    for name, keys in work:
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for layout in ("standard", "standard-v1"):
                f = BloomFilter(len(keys), 0.01, layout=layout)  # type: ignore[arg-type]
                t = time.perf_counter()
                f.add_many(keys)
                times.setdefault((layout, "add_many"), []).append(time.perf_counter() - t)
                t = time.perf_counter()
                f.contains_many(keys)
                times.setdefault((layout, "contains_many"), []).append(time.perf_counter() - t)
        for call in ("add_many", "contains_many"):
            new = statistics.median(times[("standard", call)]) / len(keys) * 1e9
            old = statistics.median(times[("standard-v1", call)]) / len(keys) * 1e9
            rows.append({"workload": name, "call": call, "standard_ns": new, "standard_v1_ns": old, "ratio": new / old})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/standard_index.json")
    a = ap.parse_args()
    out: dict[str, Any] = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}  # (a part not re-run stays)
    out.update(machine=platform.processor() or platform.machine(), python=platform.python_version(),
               bloomline=bloomline.__version__, numpy=np.__version__)
    if a.rates:
        out["rates"] = []
        for capacity, error_rate, filters, probes in CELLS:
            for layout in LAYOUTS:
                row = rate(capacity, error_rate, layout, filters, max(1, int(probes * a.scale)))
                out["rates"].append(row)
                print(f"capacity {capacity:>7,} at {error_rate:g}, {layout:<11}: {row['measured']:.3g} "
                      f"({row['hits']:,} of {row['probes']:,}), {row['measured'] / error_rate:.2f}x", flush=True)
    if a.speed:
        out["speed"] = speed(a.rounds)
        for r in out["speed"]:
            print(f"{r['workload']:<24} {r['call']:<14} standard {r['standard_ns']:6.1f} ns/key, "
                  f"standard-v1 {r['standard_v1_ns']:6.1f}: {r['ratio']:.2f}x", flush=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
