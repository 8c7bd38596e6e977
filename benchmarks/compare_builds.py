"""Two builds of bloomline side by side: the same batch calls, each build in
its own process, the builds taking turns, medians of the rounds.

    python benchmarks/compare_builds.py OLD_DIR NEW_DIR [--rounds 5] [--keys 10000000] [--only TEXT]

OLD_DIR and NEW_DIR each hold a `bloomline` package with its compiled `_core`
(for instance each installed with `pip install --target DIR` from a
`git archive` of its commit). Run it with a Python that has NumPy but not
bloomline: an editable install's import hook would load its own build in
both processes (the script stops when it sees that). Prints, per workload,
the median seconds of each build and new/old. Used to check that a change of the core's structure
costs no speed (benchmarks/NOTES.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CODE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
n = int(sys.argv[2])
import numpy as np
import bloomline
from bloomline import BloomFilter, CountingBloomFilter
if not bloomline._core.__file__.startswith(sys.argv[1]):  # (an editable install's finder goes first)
    sys.exit(f"bloomline came from {bloomline._core.__file__}, not {sys.argv[1]}: use a Python without bloomline")
rng = np.random.default_rng(1)
ints = rng.integers(0, 2**63, size=n, dtype=np.uint64)
urls = [f"https://www.site{i % 5000:04d}.example/a/{i:012x}" for i in range(n // 10)]
only = [o for o in sys.argv[3].split(",") if o]  # time only the workloads whose names hold one
r = {}
def t(name, f):
    if only and not any(o in name for o in only):
        return
    s = time.perf_counter(); f(); r[name] = time.perf_counter() - s
for layout in ("blocked", "standard"):
    bf = BloomFilter(n, 0.01, layout=layout)
    t(layout + " add_many uint64", lambda: bf.add_many(ints))
    t(layout + " contains_many uint64", lambda: bf.contains_many(ints))
    t(layout + " add_many uint64, known", lambda: bf.add_many(ints[: n // 5]))
    big = BloomFilter(10 * n, 0.01, layout=layout)
    t(layout + " add_many uint64, 10x filter", lambda: big.add_many(ints))
    t(layout + " contains_many uint64, 10x filter", lambda: big.contains_many(ints))
    small = BloomFilter(len(urls), 0.01, layout=layout)
    t(layout + " add_many list[str]", lambda: small.add_many(urls))
    t(layout + " contains_many list[str]", lambda: small.contains_many(urls))
    one = BloomFilter(len(urls), 0.01, layout=layout)
    t(layout + " add, one call per str key", lambda: [one.add(u) for u in urls])
    t(layout + " in, one call per str key", lambda: [u in one for u in urls])
    if layout == "blocked":
        ints_list, blobs = [int(v) for v in ints[: n // 10]], [u.encode() for u in urls]
        two = BloomFilter(2 * len(urls), 0.01)  # (the ints and the bytes)
        t("blocked add, one call per int key", lambda: [two.add(v) for v in ints_list])
        t("blocked in, one call per int key", lambda: [v in two for v in ints_list])
        t("blocked add, one call per bytes key", lambda: [two.add(b) for b in blobs])
        t("blocked in, one call per bytes key", lambda: [b in two for b in blobs])
        t("blocked add_many list[int]", lambda: BloomFilter(len(urls), 0.01).add_many(ints_list))
        t("blocked contains_many list[bytes]", lambda: two.contains_many(blobs))
        # URLs of varying length, as a crawl's are (the keys above have one
        # length): a list, a NumPy S array, lines, and one call per key.
        varied = [f"https://www.example{i * 7919 % 10**6}.com/{'p' * (i % 23)}/{i * 104729 % 10**9}?id={i}"
                  for i in range(len(urls))]
        s_keys, lines = np.array(varied, dtype="S"), ("\n".join(varied) + "\n").encode()
        t("blocked hash_many list[str], varied", lambda: bloomline.hash_many(varied))
        t("blocked hash_many S array, varied", lambda: bloomline.hash_many(s_keys))
        t("blocked hash_lines, varied", lambda: bloomline.hash_lines(lines))
        t("blocked add_many list[str], varied", lambda: BloomFilter(len(urls), 0.01).add_many(varied))
        t("blocked add_many S array, varied", lambda: BloomFilter(len(urls), 0.01).add_many(s_keys))
        t("blocked contains_many S array, varied", lambda: two.contains_many(s_keys))
        t("blocked add_lines, varied", lambda: BloomFilter(len(urls), 0.01).add_lines(lines))
        three = BloomFilter(2 * len(urls), 0.01)
        t("blocked add, one call per str key, varied", lambda: [three.add(u) for u in varied])
        t("blocked in, one call per str key, varied", lambda: [u in three for u in varied])
cf = CountingBloomFilter(n // 10, 0.01)
t("counting add_many uint64", lambda: cf.add_many(ints[: n // 10]))
t("counting contains_many uint64", lambda: cf.contains_many(ints[: n // 10]))
bf = BloomFilter(n, 0.01)
t("blocked add_many uint64, threads=2", lambda: bf.add_many(ints, threads=2))
t("blocked contains_many uint64, threads=2", lambda: bf.contains_many(ints, threads=2))
# Set algebra on filters of n keys (each counts its operands' bits since the
# counts after | and & were mended), and a bool batch (checked for bytes
# other than 0 and 1 since bool views were mended).
other = BloomFilter(n, 0.01)
other.add_many(ints[: n // 2])
t("union |, two filters", lambda: bf | other)
t("intersection &, two filters", lambda: bf & other)
bools = rng.integers(0, 2, size=n, dtype=np.uint8).astype(bool)
t("add_many bool array", lambda: BloomFilter(16, 0.01).add_many(bools))
# Exports of a filter 10x the keys (a snapshot since the exports round).
import os, tempfile
big.add_many(ints)
t("to_bytes, 10x filter", lambda: big.to_bytes())
with tempfile.TemporaryDirectory() as d:
    t("save, 10x filter", lambda: big.save(os.path.join(d, "f.blf")))
print(json.dumps(r))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--only", default="", help="comma-separated: time only the workloads whose names contain one")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for which in ("old", "new"):
            out = subprocess.run([sys.executable, "-c", CODE, getattr(args, which), str(args.keys), args.only],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout
            runs[which].append(json.loads(out))
    print(f"{args.keys:,} keys, medians of {args.rounds} rounds (seconds)")
    for name in runs["old"][0]:
        old = statistics.median(r[name] for r in runs["old"])
        new = statistics.median(r[name] for r in runs["new"])
        print(f"  {name:42} old {old:7.3f}  new {new:7.3f}  new/old {new / old:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
