"""Write the golden files of tests/data (run once per format version, by hand).

These files are never rewritten: tests/test_files.py checks that every later
bloomline still reads them and gives the same answers. Keys: "golden-0" ..
"golden-999" (present), "absent-0" .. "absent-999" (expected counts of false
positives are recorded in golden.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import bloomline

HERE = Path(__file__).resolve().parent
PRESENT = [f"golden-{i}" for i in range(1000)]
ABSENT = [f"absent-{i}" for i in range(1000)]


def main() -> None:
    filters = {
        "v1_bloom_blocked.blf": bloomline.BloomFilter(1000, 0.01, layout="blocked", seed=7),
        "v1_bloom_standard.blf": bloomline.BloomFilter(1000, 0.01, layout="standard", seed=7),
        "v1_counting4_blocked.blf": bloomline.CountingBloomFilter(1000, 0.01, counter_bits=4, seed=7),
        "v1_counting16_standard.blf": bloomline.CountingBloomFilter(1000, 0.01, counter_bits=16, layout="standard"),
        "v1_scalable.blf": bloomline.ScalableBloomFilter(200, 0.01, seed=7),
    }
    meta = {}
    for name, f in filters.items():
        f.update(PRESENT)
        f.save(HERE / name)
        meta[name] = {
            "kind": type(f).__name__,
            "absent_hits": int(f.contains_many(ABSENT).sum()),
            "bloomline": bloomline.__version__,
        }
    (HERE / "golden.json").write_text(json.dumps(meta, indent=1) + "\n")


def windowed() -> None:
    """v1_windowed.blf (kind 4, added after the others), written once, beside the
    others (which are not rewritten): `python make_golden.py windowed`. Its
    window is 10**12 s (about 31,700 years) in 4 generations of 2.5e11 s, so
    its generations 0 and 1 stay live by any system clock for as long as
    the file is kept (no reader's clock reaches generation 5)."""
    name = "v1_windowed.blf"
    assert not (HERE / name).exists(), f"{name} is golden: never rewritten"
    at = [1e9]
    w = bloomline.WindowedBloomFilter(1000, 0.01, window=10**12, seed=7, clock=lambda: at[0])
    w.update(PRESENT[:500])
    at[0] = 3e11  # generation 1
    w.update(PRESENT[500:])
    w.save(HERE / name)
    meta = json.loads((HERE / "golden.json").read_text())
    meta[name] = {"kind": type(w).__name__, "absent_hits": int(w.contains_many(ABSENT).sum()),
                  "bloomline": bloomline.__version__}
    (HERE / "golden.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    import sys

    windowed() if sys.argv[1:] == ["windowed"] else main()
