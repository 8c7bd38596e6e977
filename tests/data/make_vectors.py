"""Write the known-answer vectors of tests/data (run once, by hand; never
rewrite them): the Python tests (tests/test_murmur3.py, tests/test_keys.py)
and the C++ tests (tests/cpp) check the same files.

- murmur3_x64_128.txt: `seed data_hex h1_hex h2_hex` per line, from the
  reference `mmh3` package (mmh3.hash128(data, seed, x64arch=True,
  signed=False) == h1 | h2 << 64); data "-" is empty.
- positions_v1.txt: `layout num_bits num_hashes seed key_hex pos,pos,...`
  per line, from bloomline.key_positions when the format was at version 1.
  Files, pickles and Redis shards hold bits at these positions: a change
  to them is a format break, not a refactor.
"""

from __future__ import annotations

import random
from pathlib import Path

import mmh3

import bloomline

HERE = Path(__file__).resolve().parent
SEEDS = [0, 1, 7, 2**31 + 5, 2**32 - 1]
URLS = [b"https://example.com/", b"https://a.example/path?q=1#frag", "https://ex\u00e4mple.org/\u00fc".encode()]


def murmur3_lines() -> list[str]:
    r = random.Random(28)
    cases = [(r.randbytes(n), SEEDS[n % len(SEEDS)]) for n in range(49)]
    cases += [(r.randbytes(n), SEEDS[n % len(SEEDS)]) for n in (63, 64, 65, 127, 128, 1000)]
    cases += [(u, s) for u in URLS for s in (0, 7)]
    cases += [((v % 2**64).to_bytes(8, "little"), 7) for v in (0, 1, 5, 2**63 - 1, -1, -(2**63), 123456789)]
    lines = []
    for data, seed in cases:
        h = mmh3.hash128(data, seed, x64arch=True, signed=False)
        lines.append(f"{seed} {data.hex() or '-'} {h & (2**64 - 1):016x} {h >> 64:016x}")
    return lines


def positions_lines() -> list[str]:
    geometries = [("blocked", 512 * 100, 7, 0), ("blocked", 2**20, 10, 7), ("blocked", 512 * 3, 1, 2**40 + 3),
                  ("standard", 1_000_003, 7, 0), ("standard", 10**6, 3, 2**40 + 3), ("standard", 64, 16, 7)]
    keys = [b"", b"golden-0", b"golden-999", *URLS, (2**64 - 1).to_bytes(8, "little")]
    lines = []
    for layout, m, k, seed in geometries:
        pos = bloomline.key_positions(keys, m, k, layout=layout, seed=seed)
        for key, row in zip(keys, pos):
            lines.append(f"{layout} {m} {k} {seed} {key.hex() or '-'} {','.join(str(int(p)) for p in row)}")
    return lines


def main() -> None:
    (HERE / "murmur3_x64_128.txt").write_text("\n".join(murmur3_lines()) + "\n")
    (HERE / "positions_v1.txt").write_text("\n".join(positions_lines()) + "\n")


if __name__ == "__main__":
    main()
