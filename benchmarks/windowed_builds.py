"""Two builds of bloomline side by side on the windowed filter's batch
calls that window_ring.hpp's picker and slices changed: lookups of batches
of which a share is in the newest generation, and adds with and without
refresh into a new generation over G full ones (windowed_bench.py's cases,
G = 2, uint64 keys; and G = 8, absent keys). Each build in its own process, the builds taking
turns, medians of the rounds' medians, ns per key.

    python benchmarks/windowed_builds.py OLD_DIR NEW_DIR [--rounds 3] [--capacity 1000000]

OLD_DIR and NEW_DIR each hold a `bloomline` package with its compiled `_core`
(for instance `pip install --target DIR` of a `git archive` of its commit);
run it with a Python that has NumPy and does not import bloomline itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CODE = r"""
import json, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import numpy as np
import bloomline
if not bloomline._core.__file__.startswith(sys.argv[1]):
    sys.exit(f"bloomline came from {bloomline._core.__file__}, not {sys.argv[1]}")
import windowed_bench as wb
cap = int(sys.argv[3])
ints = np.random.default_rng(36).integers(0, 2**40, cap, dtype=np.uint64)
r = {f"lookup, {share:.0%} found": ns for share, ns in wb.mixed_case(cap, 0.01, 2, 5).items()}
add = wb.case(cap, 0.01, 2, ints, cap, 6)
r["add, refresh=True"] = add["windowed add"]
r["add, refresh=False"] = add["windowed add, refresh=False"]
eight = wb.case(cap, 0.01, 8, ints, cap, 3)  # (nine generations: each one's pass over a slice reuses its lines)
r["G = 8: lookup, absent keys"] = eight["windowed lookup"]
r["G = 8: add, refresh=True"] = eight["windowed add"]
r["G = 8: add, refresh=False"] = eight["windowed add, refresh=False"]
print(json.dumps(r))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--capacity", type=int, default=1_000_000)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for name, folder in (("old", args.old), ("new", args.new)):
            out = subprocess.run([sys.executable, "-c", CODE, str(folder.resolve()), str(HERE), str(args.capacity)],
                                 check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    print(f"| uint64, {args.capacity:,} keys a call (G = 2 unless named) | old ns/key | new ns/key | new/old |")
    print("|---|---:|---:|---:|")
    for case in runs["old"][0]:
        old = statistics.median(r[case] for r in runs["old"])
        new = statistics.median(r[case] for r in runs["new"])
        print(f"| {case} | {old:.1f} | {new:.1f} | {new / old:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
