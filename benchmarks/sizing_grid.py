"""The blocked layout's sizes and rates over a grid, as exact hex floats, for
comparing two builds (a change to how the exact rate is computed must give
the same filters), and the time of the first filter a process sizes.

    python benchmarks/sizing_grid.py DIR OUT.json     (then: cmp OLD.json NEW.json)

DIR holds a built `bloomline` package. benchmarks/NOTES.md quotes it.
"""

from __future__ import annotations

import json
import sys
import time

sys.path.insert(0, sys.argv[1])
import bloomline  # noqa: E402  (from the build given)

assert bloomline.__file__.startswith(sys.argv[1]), bloomline.__file__
start = time.perf_counter()
bloomline.BloomFilter(10**7, 1e-6)  # dedup's default filter, the first this process sizes
first = time.perf_counter() - start
out: list[list[object]] = []
for cap in (1, 7, 100, 1000, 12345, 10**6, 10**7, 3 * 10**8, 10**9, 10**12):
    for p in (0.5, 0.1, 0.01, 0.003, 1e-3, 1e-4, 1e-6, 1e-9, 1e-12, 1e-15):
        try:
            q = bloomline.optimal_params(cap, p, "blocked")
            out.append([cap, p, q.num_bits, q.num_hashes, q.expected_fp_rate.hex()])
        except ValueError as e:
            out.append([cap, p, str(e)])
for n in (0, 1, 10, 1000, 10**6, 10**9):
    for m in (512, 512 * 1000, 512 * 10**6):
        for k in (1, 2, 7, 13, 20, 40, 64):
            out.append([n, m, k, bloomline.false_positive_rate(n, m, k, "blocked").hex()])
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
print(f"first BloomFilter(10**7, 1e-6): {first * 1e3:.1f} ms; {len(out)} cases written to {sys.argv[2]}")
