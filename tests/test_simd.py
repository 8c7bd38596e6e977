"""The integer batch hash: its AVX2 path and its portable path give the same
hashes as the scalar path, for every integer width and every length (the
AVX2 loop takes four keys per step, so lengths that are not a multiple of
four exercise its tail)."""

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


def run_script(env_simd: str | None) -> list[str]:
    env = dict(os.environ)
    env.pop("BLOOMLINE_SIMD", None)
    if env_simd is not None:
        env["BLOOMLINE_SIMD"] = env_simd
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.split("\n")


def test_portable_and_default_paths_write_identical_filters() -> None:
    default = run_script(None)
    portable = run_script("portable")
    assert portable[0] == "portable"
    assert default[0] == bloomline.simd_level
    assert len(default) == len(portable) == 11
    assert default[1:] == portable[1:]
