"""Write the known-answer vectors of tests/data (run once, by hand; never
rewrite them): the Python tests (tests/test_murmur3.py, tests/test_keys.py)
and the C++ tests (tests/cpp) check the same files.

- murmur3_x64_128.txt: `seed data_hex h1_hex h2_hex` per line, from the
  reference `mmh3` package (mmh3.hash128(data, seed, x64arch=True,
  signed=False) == h1 | h2 << 64); data "-" is empty.
- positions_v1.txt: `layout num_bits num_hashes seed key_hex pos,pos,...`
  per line, from bloomline.key_positions when the format was at version 1.
  Its "standard" rows are the standard layout's first index, now named
  "standard-v1" (layout code 0). Files, pickles and Redis shards hold bits
  at these positions: a change to them is a format break, not a refactor.
- positions_layout2.txt: the same for the standard layout's second index
  (layout code 2), written from its definition here (slot i is the high
  64 bits of ((h1 + h2 * R**(i+1)) mod 2**64) * m, R the 64-bit golden
  ratio) and each key's hash (bloomline.murmur3_128, itself held to mmh3),
  not from bloomline's index.
- key_forms_v1.txt: `seed form literal bytes_hex h1_hex h2_hex` per line
  (tab-separated) for floats, ints beyond 64 bits, tuples and frozensets:
  the key's bytes by the key rules (docs/FORMAT.md, "Keys"), from
  `key_bytes` below, written from those rules and not from bloomline, and
  their hash from `mmh3`. `literal` is float.hex() for floats, else repr().

Files that exist are never rewritten.
"""

from __future__ import annotations

import random
import struct
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


GEOMETRIES = [("blocked", 512 * 100, 7, 0), ("blocked", 2**20, 10, 7), ("blocked", 512 * 3, 1, 2**40 + 3),
              ("standard", 1_000_003, 7, 0), ("standard", 10**6, 3, 2**40 + 3), ("standard", 64, 16, 7)]
POSITION_KEYS = [b"", b"golden-0", b"golden-999", *URLS, (2**64 - 1).to_bytes(8, "little")]


def positions_lines() -> list[str]:
    lines = []
    for layout, m, k, seed in GEOMETRIES:
        # (written when "standard" named the first index; it is "standard-v1" now)
        pos = bloomline.key_positions(POSITION_KEYS, m, k, layout="standard-v1" if layout == "standard" else layout,
                                      seed=seed)
        for key, row in zip(POSITION_KEYS, pos):
            lines.append(f"{layout} {m} {k} {seed} {key.hex() or '-'} {','.join(str(int(p)) for p in row)}")
    return lines


REMIX = 0x9E3779B97F4A7C15


def standard_slots(data: bytes, m: int, k: int, seed: int) -> list[int]:
    h = bloomline.murmur3_128(data, seed)  # (held to mmh3 by murmur3_x64_128.txt; mmh3 takes 32-bit seeds only)
    h1, h2 = h & (2**64 - 1), h >> 64
    return [((h1 + h2 * pow(REMIX, i + 1, 2**64)) % 2**64 * m) >> 64 for i in range(k)]


def positions_layout2_lines() -> list[str]:
    return [f"standard {m} {k} {seed} {key.hex() or '-'} {','.join(map(str, standard_slots(key, m, k, seed)))}"
            for layout, m, k, seed in GEOMETRIES if layout == "standard" for key in POSITION_KEYS]


FLOAT_TAG, BIG_INT_TAG, TUPLE_TAG, FROZENSET_TAG = b"\xf8", b"\xf9", b"\xfa", b"\xfb"


def key_bytes(key: object) -> bytes:
    """A key's bytes by the key rules, in plain Python (the reference the
    C++ core is held to): str its UTF-8; bytes as they are; an int in
    [-2**63, 2**64) its 8 bytes LE (two's complement when negative); a
    float equal to an int is that int; other floats the float tag and their
    8 IEEE-754 bytes LE; ints beyond 64 bits the big-int tag and their
    shortest two's-complement bytes LE; a tuple the tuple tag, then each
    element's key bytes after their length (8 bytes LE); a frozenset the
    same under its own tag, its elements' encodings sorted."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, float):
        if key != key:
            raise ValueError("NaN is not a key")
        if key.is_integer():
            return key_bytes(int(key))
        return FLOAT_TAG + struct.pack("<d", key)
    if isinstance(key, int):
        if -(2**63) <= key < 2**64:
            return (key % 2**64).to_bytes(8, "little")
        size = ((key if key >= 0 else ~key).bit_length() + 8) // 8
        return BIG_INT_TAG + key.to_bytes(size, "little", signed=True)
    if isinstance(key, (tuple, frozenset)):
        parts = [key_bytes(k) for k in key]
        if isinstance(key, frozenset):
            parts.sort()
        tag = TUPLE_TAG if isinstance(key, tuple) else FROZENSET_TAG
        return tag + b"".join(len(p).to_bytes(8, "little") + p for p in parts)
    raise TypeError(type(key).__name__)


KEY_FORMS: list[object] = [
    0.5, -0.5, 1.5, 1e-300, -2.5e-310, 3.141592653589793, 1e300, float("inf"), float("-inf"),
    42.0, -0.0, 2.0**63, 2.0**64, -(2.0**63), -(2.0**63) - 2048.0, 2.0**70, -(2.0**70), 1.7976931348623157e308,
    2**64, 2**64 + 1, -(2**63) - 1, -(2**64), 2**70, -(2**71), 2**71, 3**200, -(3**200),
    (), ("a",), ("a", 1), ("a", 1.5), ("ab", "c"), ("a", "bc"), (b"x", (1, (2, 3.25))), (2**70, "u\u00e9"),
    frozenset(), frozenset({"a"}), frozenset({"a", 1, 2.5}), frozenset({("a", 1), b"z"}),
]


def key_forms_lines() -> list[str]:
    lines = []
    for i, key in enumerate(KEY_FORMS):
        seed = SEEDS[i % len(SEEDS)]
        data = key_bytes(key)
        h = mmh3.hash128(data, seed, x64arch=True, signed=False)
        form = type(key).__name__
        literal = key.hex() if isinstance(key, float) else repr(key)
        lines.append(f"{seed}\t{form}\t{literal}\t{data.hex() or '-'}\t{h & (2**64 - 1):016x}\t{h >> 64:016x}")
    return lines


def main() -> None:
    for name, make in (("murmur3_x64_128.txt", murmur3_lines), ("positions_v1.txt", positions_lines),
                       ("key_forms_v1.txt", key_forms_lines), ("positions_layout2.txt", positions_layout2_lines)):
        if not (HERE / name).exists():
            (HERE / name).write_text("\n".join(make()) + "\n")


if __name__ == "__main__":
    main()
