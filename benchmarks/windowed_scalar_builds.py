"""Two builds of bloomline side by side on a windowed filter's single-key
calls (windowed_bench.scalar_case: a Python loop of `add` of new keys and
of `in` of absent keys, 200,000 str URLs, G = 4, beside a plain
BloomFilter's): each build in its own process, the builds taking turns,
medians over the rounds (each round's figure a median of 3), ns per call.

    python benchmarks/windowed_scalar_builds.py OLD_DIR NEW_DIR [--rounds 4]

OLD_DIR and NEW_DIR each hold a `bloomline` package with its compiled
`_core`; run it with a Python that has NumPy and does not import bloomline
itself.
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
import bloomline
if not bloomline._core.__file__.startswith(sys.argv[1]):
    sys.exit(f"bloomline came from {bloomline._core.__file__}, not {sys.argv[1]}")
import windowed_bench as wb
keys = [f"https://example.com/{i}/page" for i in range(200_000)]
print(json.dumps(wb.scalar_case(200_000, 0.01, 4, keys, 3)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(a.rounds):
        for name, where in (("old", a.old), ("new", a.new)):
            out = subprocess.run([sys.executable, "-c", CODE, str(Path(where).resolve()), str(HERE)],
                                 capture_output=True, text=True, check=True)
            runs[name].append(json.loads(out.stdout))
    for key in runs["old"][0]:
        old, new = ([r[key] for r in runs[n]] for n in ("old", "new"))
        print(f"{key:14s} old {statistics.median(old):7.1f} ({min(old):.1f}-{max(old):.1f})  "
              f"new {statistics.median(new):7.1f} ({min(new):.1f}-{max(new):.1f})  "
              f"new/old {statistics.median(new) / statistics.median(old):.3f}")


if __name__ == "__main__":
    main()
