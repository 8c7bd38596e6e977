"""The key forms beyond str, bytes and 64-bit ints (docs/FORMAT.md, "Keys"):
floats by Python's equality (42.0 is 42, -0.0 is 0, NaN is a null), ints of
any size (beyond 64 bits a form of their own), tuples and frozensets of
keys. Each form gives the same hash by every path (scalars, lists, object
and float arrays, Arrow and pandas columns, the counting and scalable
kinds), and the bytes of the golden vectors, which tests/data/make_vectors.py
wrote from the rules in plain Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mmh3
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(DATA))
from make_vectors import key_bytes  # noqa: E402  (the reference encoder, plain Python)


def hashes(keys: object, seed: int = 0) -> list[tuple[int, int]]:
    return [(int(h1), int(h2)) for h1, h2 in bloomline.hash_many(keys, seed).tolist()]


def reference(key: object, seed: int = 0) -> tuple[int, int]:
    h = mmh3.hash128(key_bytes(key), seed, x64arch=True, signed=False)
    return h & (2**64 - 1), h >> 64


def golden() -> list[tuple[int, str, object, bytes, int, int]]:
    rows = []
    for line in (DATA / "key_forms_v1.txt").read_text().splitlines():
        seed, form, literal, data, h1, h2 = line.split("\t")
        key = float.fromhex(literal) if form == "float" else eval(literal)  # noqa: S307 (our own file)
        rows.append((int(seed), form, key, bytes.fromhex(data), int(h1, 16), int(h2, 16)))
    return rows


@pytest.mark.parametrize("row", golden(), ids=lambda r: f"{r[1]}-{r[2]!r}"[:60])
def test_golden_vectors(row: tuple[int, str, object, bytes, int, int]) -> None:
    seed, _form, key, data, h1, h2 = row
    assert key_bytes(key) == data  # the rules in plain Python still write these bytes
    assert hashes([key], seed) == [(h1, h2)]  # the core hashes them
    f = BloomFilter(1000, 0.001, seed=seed)
    f.add(key)
    assert key in f and data in f  # the key is its bytes, as a str is its UTF-8


# ---- floats: Python's equality ------------------------------------------------

EQUAL = [(42, 42.0), (0, -0.0), (0, 0.0), (1, True), (2**63, 2.0**63), (2**64, 2.0**64), (2**70, 2.0**70),
         (-(2**70), -(2.0**70)), (-(2**63), -(2.0**63)), (3, np.float32(3.0)), (0.5, np.float32(0.5)),
         (0.5, np.float16(0.5)), (7, np.int8(7))]


@pytest.mark.parametrize(("a", "b"), EQUAL, ids=repr)
def test_equal_numbers_are_one_key(a: object, b: object) -> None:
    assert a == b
    assert hashes([a]) == hashes([b]) == [reference(a)]
    f = BloomFilter(1000, 0.001)
    assert f.add(a) is True and f.add(b) is False and b in f


def test_unequal_numbers_are_different_keys() -> None:
    # No wrap-around: 2**64 is not 0, -2**63 - 1 is not 2**63 - 1, 0.5 is no int.
    pairs = [(2**64, 0), (2**64 + 1, 1), (-(2**63) - 1, 2**63 - 1), (-(2**64), 0), (0.5, 0), (1.5, 1), (2**64, 2.0**64 + 4096)]
    for a, b in pairs:
        assert a != b and hashes([a]) != hashes([b]), (a, b)
    # The big-int form is never 8 bytes long, so it never meets the 64-bit form.
    for v in (2**64, -(2**63) - 1, 2**100, -(2**100)):
        assert len(key_bytes(v)) >= 10


def test_float_arrays_of_every_width_and_path_agree() -> None:
    values = [0.0, -0.0, 1.0, 0.5, -2.25, 1e10, 2.0**64, -(2.0**70), float("inf"), float("-inf"), 3.0e-5]
    want = [reference(v) for v in values]
    for dtype in (np.float64, np.float32):
        arr = np.array(values, dtype=dtype)
        assert hashes(arr) == [reference(float(v)) for v in arr]
    assert hashes(np.array(values)) == want
    assert hashes(values) == want
    assert hashes(np.array(values, dtype=object)) == want
    assert hashes(iter(values)) == want
    assert hashes(np.array(values, dtype=np.float64)[::2]) == want[::2]  # strided
    assert hashes(np.array(values, dtype=">f8")) == want  # big-endian
    assert hashes(np.array([0.5, 1.0], dtype=np.float16)) == [reference(0.5), reference(1)]


def test_arrow_and_pandas_float_columns() -> None:
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    values = [1.0, 0.5, -3.75, 2.0**70]
    want = [reference(v) for v in values]
    assert hashes(pa.array(values, type=pa.float64())) == want
    assert hashes(pa.array(values, type=pa.float32())) == want
    assert hashes(pa.chunked_array([values[:2], values[2:]])) == want
    assert hashes(pd.Series(values)) == want
    with pytest.raises(TypeError, match=r"half-precision floating point; cast it to float32 or float64"):
        bloomline.hash_many(pa.array(np.array([1.0], dtype=np.float16)))


def test_longdouble_is_refused_not_rounded() -> None:
    if np.finfo(np.longdouble).nmant <= np.finfo(np.float64).nmant:
        pytest.skip("longdouble is float64 on this platform")
    f = BloomFilter(1000, 0.01)
    with pytest.raises(TypeError, match=r"keys array dtype float128 holds values a float key cannot hold exactly"):
        f.add_many(np.zeros(2, dtype=np.longdouble))
    with pytest.raises(TypeError, match=r"key is a numpy.longdouble"):
        f.add(np.longdouble(1))


# ---- NaN: equal to nothing, so a null -------------------------------------------


def test_nan_is_not_a_scalar_key() -> None:
    for f in (BloomFilter(100, 0.01), CountingBloomFilter(100, 0.01), ScalableBloomFilter(100, 0.01)):
        for nan in (float("nan"), np.float32("nan"), np.float64("nan")):
            with pytest.raises(ValueError, match=r"key is NaN, which equals nothing, not even itself"):
                f.add(nan)
            with pytest.raises(ValueError, match=r"key is NaN"):
                _ = nan in f
        with pytest.raises(ValueError, match=r"key\[1\] is NaN"):
            f.add(("a", float("nan")))


def test_nan_in_a_batch_is_a_null_by_every_path() -> None:
    pa = pytest.importorskip("pyarrow")
    nan = float("nan")
    batches = [[1.0, nan, 2.5], np.array([1.0, nan, 2.5]), np.array([1.0, nan, 2.5], dtype=np.float32),
               np.array([1.0, nan, 2.5], dtype=object), iter([1.0, nan, 2.5]), pa.array([1.0, nan, 2.5]),
               pa.array([1.0, None, 2.5])]
    for keys in batches:
        f = BloomFilter(1000, 0.001)
        with pytest.raises(ValueError, match=r"keys\[1\] is null; pass nulls='skip'"):
            f.add_many(keys if not hasattr(keys, "__next__") else iter([1.0, nan, 2.5]))
        assert f.approx_count == 0  # refused before anything was added
        fresh = keys if not hasattr(keys, "__next__") else iter([1.0, nan, 2.5])
        assert f.add_many(fresh, nulls="skip").tolist() == [True, False, True]
        assert f.contains_many([1, 2.5]).tolist() == [True, True]


# ---- tuples and frozensets --------------------------------------------------------


def test_numpy_imported_after_bloomline_gives_the_same_keys() -> None:
    """bloomline leaves NumPy unimported until it is used: NumPy scalars made
    after a filter was, and NaN in a batch, are the keys and nulls they are
    when NumPy came first."""
    code = """
import sys
import bloomline
f = bloomline.BloomFilter(1000, 0.001)
assert f.add(7) and f.add(2.5) and f.add(memoryview(b"m"))
try:
    f.add(object())  # checked against NumPy's types, which are none yet
except TypeError as e:
    assert "object" in str(e), e
assert "numpy" not in sys.modules
import numpy as np
assert not f.add(np.int64(7)) and not f.add(np.float32(2.5)) and np.uint8(7) in f and np.bool_(True) not in f
assert f.add_many([np.float64("nan"), "x"], nulls="skip").tolist() == [False, True]
try:
    f.add(np.arange(3))
except TypeError as e:
    assert "numpy.ndarray" in str(e), e
else:
    raise AssertionError("an array was taken as a key")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_tuples_are_keys_by_their_elements() -> None:
    f = BloomFilter(10_000, 0.0001)
    f.add(("example.com", "/a", 3))
    assert ("example.com", "/a", 3.0) in f  # 3.0 == 3
    assert ("example.com", "/a", "3") not in f
    assert ("example.com/a", 3) not in f and ("example.com", "/a") not in f
    assert ("example.com", "/a", 3, "") not in f
    assert f.add(()) is True and () in f and ((),) not in f
    # Unambiguous: the element lengths are in the bytes.
    assert hashes([("ab", "c")]) != hashes([("a", "bc")])
    assert hashes([(("a",), "b")]) != hashes([("a", ("b",))])
    # A tuple is not its elements joined, nor the bytes of one of them.
    assert hashes([("a",)]) != hashes(["a"])


def test_frozensets_are_keys_whatever_their_order() -> None:
    a = frozenset(["x", 1, 2.5, ("t", 1)])
    b = frozenset([("t", 1.0), 2.5, 1.0, "x"])
    assert a == b and hashes([a]) == hashes([b]) == [reference(a)]
    assert hashes([frozenset(["x", 1])]) != hashes([("x", 1)])
    with pytest.raises(TypeError, match=r"key must be str, bytes-like, int, float, tuple or frozenset, got set"):
        BloomFilter(100, 0.01).add({1, 2})


def test_composite_keys_in_batches_and_other_kinds() -> None:
    keys = [("a", 1), ("b", 2.0), frozenset({"c"}), (2**80, -0.5)]
    for f in (BloomFilter(1000, 0.001), CountingBloomFilter(1000, 0.001), ScalableBloomFilter(100, 0.001)):
        assert f.add_many(keys).tolist() == [True] * 4
        assert f.contains_many([("a", 1.0), ("b", 2), frozenset({"c"}), (2**80, -0.5), ("a", 2)]).tolist() == [
            True, True, True, True, False]
    arr = np.empty(len(keys), dtype=object)
    arr[:] = keys
    assert hashes(arr) == hashes(keys) == [reference(k) for k in keys]


def test_bad_elements_are_named_and_deep_nesting_raises() -> None:
    f = BloomFilter(100, 0.01)
    with pytest.raises(TypeError, match=r"key\[1\] must be .*, got dict"):
        f.add(("a", {}))
    with pytest.raises(TypeError, match=r"keys\[1\]\[0\] must be .*, got NoneType"):
        f.add_many([("a",), (None,)])
    deep: object = 1
    for _ in range(100_000):
        deep = (deep,)
    with pytest.raises(RecursionError):
        f.add(deep)
    assert f.approx_count == 0


def test_a_tuple_batch_is_still_a_batch() -> None:
    f = BloomFilter(100, 0.01)
    assert f.add_many(("a", "b")).tolist() == [True, True]  # two keys
    assert "a" in f and ("a", "b") not in f
    assert f.add(("a", "b")) is True  # one key


# ---- every form, drawn at random, against the plain-Python rules -------------------

scalars = (st.integers() | st.floats(allow_nan=False) | st.text(max_size=20) | st.binary(max_size=20)
           | st.booleans())
composite = st.recursive(scalars, lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=4).map(tuple)
                         | st.frozensets(scalars, max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(keys=st.lists(composite, min_size=1, max_size=8), seed=st.integers(0, 2**32 - 1))  # mmh3 takes 32-bit seeds
def test_random_keys_hash_as_the_rules_say(keys: list[object], seed: int) -> None:
    assert hashes(keys, seed) == [reference(k, seed) for k in keys]
    f = BloomFilter(1000, 0.001, seed=seed)
    f.add_many(keys)
    assert all(k in f for k in keys)
    # A whole float and the int it equals are one key.
    for k in keys:
        if isinstance(k, int) and not isinstance(k, bool) and abs(k) < 2**1000 and float(k) == k:
            assert hashes([float(k)], seed) == hashes([k], seed)
