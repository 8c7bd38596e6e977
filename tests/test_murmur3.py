"""Our MurmurHash3_x64_128 against the reference `mmh3` package, bit for bit."""

from __future__ import annotations

import random
from pathlib import Path

import mmh3
import numpy as np
import pytest

import bloomline

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


def test_matches_mmh3_on_random_inputs_of_every_length() -> None:
    r = random.Random(12345)
    checked = 0
    for length in range(0, 101):
        for _ in range(100):
            data = r.randbytes(length)
            seed = r.randrange(0, 2**32)
            assert bloomline.murmur3_128(data, seed) == mmh3.hash128(data, seed, x64arch=True, signed=False), (
                length,
                seed,
            )
            checked += 1
    assert checked >= 10_000


def test_default_seed_is_zero() -> None:
    assert bloomline.murmur3_128(b"hello") == mmh3.hash128(b"hello", 0, x64arch=True, signed=False)


def test_keys_hash_by_their_bytes() -> None:
    # str -> UTF-8, int -> 8 little-endian bytes (the integer fast path must
    # agree with hashing those bytes).
    assert bloomline.murmur3_128("héllo") == bloomline.murmur3_128("héllo".encode())
    for value in [0, 1, 5, 2**63 - 1, 2**64 - 1, -1, -(2**63), 123456789]:
        le = (value % 2**64).to_bytes(8, "little")
        expected = mmh3.hash128(le, 7, x64arch=True, signed=False)
        assert bloomline.murmur3_128(value, 7) == expected
        assert bloomline.murmur3_128(np.int64(value) if -(2**63) <= value < 2**63 else np.uint64(value), 7) == expected


def test_seed_range_is_checked() -> None:
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\), got -1"):
        bloomline.murmur3_128(b"x", -1)
    # 64-bit seeds are accepted (h1 = h2 = seed), distinct from their low half.
    assert bloomline.murmur3_128(b"x", 2**40 + 3) != bloomline.murmur3_128(b"x", 3)


# ---- known-answer vectors, shared with the C++ tests (tests/cpp) ------------

DATA = Path(__file__).resolve().parent / "data"


def _murmur3_vectors() -> list[tuple[int, bytes, int, int]]:
    rows = []
    for line in (DATA / "murmur3_x64_128.txt").read_text().splitlines():
        seed, data, h1, h2 = line.split()
        rows.append((int(seed), b"" if data == "-" else bytes.fromhex(data), int(h1, 16), int(h2, 16)))
    return rows


def test_known_vectors_are_the_reference_and_ours() -> None:
    rows = _murmur3_vectors()
    assert len(rows) == 68
    for seed, data, h1, h2 in rows:
        assert mmh3.hash128(data, seed, x64arch=True, signed=False) == h1 | h2 << 64, (seed, data)
        assert bloomline.murmur3_128(data, seed) == h1 | h2 << 64, (seed, data)


def _check_positions(name: str, standard_is: str) -> int:
    rows = 0
    for line in (DATA / name).read_text().splitlines():
        layout, m, k, seed, key, positions = line.split()
        layout = standard_is if layout == "standard" else layout
        data = b"" if key == "-" else bytes.fromhex(key)
        got = bloomline.key_positions([data], int(m), int(k), layout=layout, seed=int(seed))  # type: ignore[arg-type]
        assert got[0].tolist() == [int(p) for p in positions.split(",")], (name, line)
        rows += 1
    return rows


def test_positions_are_those_recorded_at_format_version_1() -> None:
    """Files and Redis shards hold bits at these positions: they never
    change. The file's "standard" is the first index, "standard-v1" now."""
    assert _check_positions("positions_v1.txt", "standard-v1") == 42


def test_positions_of_the_standard_layouts_second_index_are_its_definitions() -> None:
    """positions_layout2.txt is written from the index's definition
    (tests/data/make_vectors.py), not from bloomline's index."""
    assert _check_positions("positions_layout2.txt", "standard") == 21
