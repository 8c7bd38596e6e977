"""The runtime-dispatched SIMD code gives the scalar path's answers, on the
AVX2 path and on the portable one (BLOOMLINE_SIMD=portable).

- The integer batch hash, for every integer width and every length (the
  AVX2 loop takes four keys per step, so lengths that are not a multiple of
  four exercise its tail).
- The blocked layout's batch lookups (layout_blocked.hpp, .cpp), which test eight
  offsets per AVX2 step and hash keys 16 at a time, 32 ahead of the test:
  for k across the eight-lane boundaries, every batch length around those
  steps, and every key source (integer and string arrays, lists, threads).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def cpu_has_avx2() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and " avx2" in line for line in text.splitlines())


def random_ints(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not sys.platform.startswith("linux"),
                    reason="reads x86 CPU flags from /proc/cpuinfo")
def test_avx2_is_used_when_the_cpu_has_it() -> None:
    assert bloomline.simd_level == ("avx2" if cpu_has_avx2() else "portable")


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("n", [1, 3, 4, 5, 7, 513, 1027])
def test_batch_hash_equals_scalar_hash(layout: str, dtype: type, n: int, rng: np.random.Generator) -> None:
    keys = random_ints(rng, dtype, n)
    for seed in (0, 2**64 - 1):
        batch = BloomFilter.from_params(1 << 16, 5, layout=layout, seed=seed)
        batch.add_many(keys)
        scalar = BloomFilter.from_params(1 << 16, 5, layout=layout, seed=seed)
        for k in keys.tolist():
            scalar.add(k)
        assert batch == scalar, (dtype, n, seed)
        assert batch.contains_many(keys).all()


def test_counting_filter_and_threads_use_the_same_hashes(rng: np.random.Generator) -> None:
    keys = random_ints(rng, np.int64, 300_001)
    one = CountingBloomFilter(400_000, 0.01)
    one.add_many(keys)
    two = CountingBloomFilter(400_000, 0.01)
    two.add_many(keys, threads=2)
    assert one == two
    assert one.contains_many(keys, threads=2).all()
    for k in keys[:1000].tolist():
        assert k in one


SCRIPT = """
import sys, numpy as np, bloomline
rng = np.random.default_rng(11)
out = [bloomline.simd_level]
for dtype in (np.int8, np.uint16, np.int32, np.uint64, np.int64):
    info = np.iinfo(dtype)
    keys = rng.integers(info.min, info.max, size=4099, dtype=dtype, endpoint=True)
    for layout in ("blocked", "standard"):
        f = bloomline.BloomFilter.from_params(1 << 15, 4, layout=layout, seed=12345)
        f.add_many(keys)
        out.append(f.to_bytes().hex())
sys.stdout.write("\\n".join(out))
"""


def run_script(script: str, env_simd: str | None) -> list[str]:
    env = dict(os.environ)
    env.pop("BLOOMLINE_SIMD", None)
    if env_simd is not None:
        env["BLOOMLINE_SIMD"] = env_simd
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.split("\n")


def test_portable_and_default_paths_write_identical_filters() -> None:
    default = run_script(SCRIPT, None)
    portable = run_script(SCRIPT, "portable")
    assert portable[0] == "portable"
    assert default[0] == bloomline.simd_level
    assert len(default) == len(portable) == 11
    assert default[1:] == portable[1:]


# k around the AVX2 lookup's eight-offset groups; lengths around its
# 16-key hashing groups and 32-key prefetch distance.
LOOKUP_KS = [1, 2, 6, 7, 8, 9, 15, 16, 17, 24, 31, 64]
LOOKUP_LENGTHS = [1, 15, 16, 17, 47, 48, 49, 2001]


def crowded_filter(k: int, rng: np.random.Generator) -> tuple[BloomFilter, np.ndarray]:
    """A small blocked filter filled until about 20% of absent keys are false
    positives (a fill of 0.2 ** (1 / k)), so that absent keys often find most
    but not all of their k bits set: a lookup that tests a wrong bit or drops
    a lane gives a different answer for many of them."""
    f = BloomFilter.from_params(1 << 14, k, layout="blocked", seed=int(rng.integers(0, 2**63)))
    fill = 0.2 ** (1 / k)
    n = int(-(1 << 14) / k * np.log(1 - fill))
    present = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    f.add_many(present)
    return f, present


@pytest.mark.parametrize("k", LOOKUP_KS)
def test_batch_lookup_equals_scalar_lookup(k: int, rng: np.random.Generator) -> None:
    f, present = crowded_filter(k, rng)
    absent = rng.integers(0, 2**63, size=6000, dtype=np.uint64)
    scalar_absent = np.array([int(x) in f for x in absent.tolist()])
    # A real mix: some absent keys are false positives, most are not.
    assert 0.05 < scalar_absent.mean() < 0.5, scalar_absent.mean()
    for n in LOOKUP_LENGTHS:
        keys = np.concatenate([present[: n // 2], absent[: n - n // 2]])
        expected = np.array([int(x) in f for x in keys.tolist()])
        assert (f.contains_many(keys) == expected).all(), (k, n)
    assert (f.contains_many(absent) == scalar_absent).all()
    assert (f.contains_many(absent, threads=2) == scalar_absent).all()
    assert (f.contains_many(absent.tolist()) == scalar_absent).all()  # hashed first, then looked up
    assert f.contains_many(present).all()


def test_batch_lookup_of_strings_equals_scalar(rng: np.random.Generator) -> None:
    f = BloomFilter.from_params(1 << 15, 7, layout="blocked")
    words = [f"https://example.com/{i}/{rng.integers(0, 10**9)}" for i in range(4000)]
    f.add_many(words[:2000])
    expected = np.array([w in f for w in words])
    assert expected[:2000].all() and not expected[2000:].all()
    for keys in (np.array(words), np.array(words, dtype="S"), words):
        assert (f.contains_many(keys) == expected).all()
        assert (f.contains_many(keys, threads=2) == expected).all()


LOOKUP_SCRIPT = """
import sys, numpy as np, bloomline
rng = np.random.default_rng(23)
out = [bloomline.simd_level]
for k in (3, 6, 8, 9, 17):
    f = bloomline.BloomFilter.from_params(1 << 14, k, layout="blocked", seed=99)
    n = int(-(1 << 14) / k * np.log(1 - 0.2 ** (1 / k)))  # about 20% false positives
    f.add_many(rng.integers(0, 2**63, size=n, dtype=np.uint64))
    keys = rng.integers(0, 2**63, size=5003, dtype=np.uint64)
    batch = f.contains_many(keys)
    scalar = np.array([int(x) in f for x in keys.tolist()])
    out.append(f"{int((batch != scalar).sum())} {np.packbits(batch).tobytes().hex()}")
sys.stdout.write("\\n".join(out))
"""


def test_portable_and_default_lookups_agree() -> None:
    default, portable = run_script(LOOKUP_SCRIPT, None), run_script(LOOKUP_SCRIPT, "portable")
    assert (default[0], portable[0]) == (bloomline.simd_level, "portable")
    assert len(default) == len(portable) == 6
    for line in default[1:] + portable[1:]:
        assert line.split()[0] == "0", line  # no key where batch and scalar differ
    assert default[1:] == portable[1:]
