"""Every key rule (docs/design/keys.md): a value gives the same bytes, and so the same
answers, whichever path it arrives by."""

from __future__ import annotations

import array
import random

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, murmur3_128

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


@pytest.fixture
def bf(layout: str) -> BloomFilter:
    return BloomFilter(10_000, 0.001, layout=layout)


def fresh(bf: BloomFilter) -> BloomFilter:
    return BloomFilter(10_000, 0.001, layout=bf.layout)


def same_key(bf: BloomFilter, a: object, b: object) -> None:
    """a and b are one key: adding a makes b present, and b is not new."""
    f = fresh(bf)
    assert f.add(a) is True
    assert b in f
    assert f.add(b) is False
    assert f.contains_many([b]).tolist() == [True]


def test_str_is_its_utf8(bf: BloomFilter) -> None:
    same_key(bf, "abc", b"abc")
    same_key(bf, "héllo wörld ✓", "héllo wörld ✓".encode())
    same_key(bf, "", b"")
    assert murmur3_128("abc") == murmur3_128(b"abc")


def test_buffers_are_their_raw_bytes(bf: BloomFilter) -> None:
    same_key(bf, b"\x00\x01\x02", bytearray(b"\x00\x01\x02"))
    same_key(bf, b"\x00\x01\x02", memoryview(b"\x00\x01\x02"))
    same_key(bf, array.array("B", [1, 2, 3]), b"\x01\x02\x03")
    same_key(bf, np.bytes_(b"xyz"), b"xyz")
    same_key(bf, np.str_("xyz"), "xyz")


def test_non_contiguous_buffer_is_refused(bf: BloomFilter) -> None:
    view = memoryview(b"abcdef")[::2]
    with pytest.raises(ValueError, match="key of type memoryview is not a C-contiguous buffer"):
        bf.add(view)


def test_int_is_8_bytes_little_endian_twos_complement(bf: BloomFilter) -> None:
    same_key(bf, 5, (5).to_bytes(8, "little"))
    same_key(bf, -1, b"\xff" * 8)
    same_key(bf, -(2**63), (2**63).to_bytes(8, "little"))
    same_key(bf, 2**64 - 1, b"\xff" * 8)  # the same 8 bytes as -1
    same_key(bf, True, 1)
    same_key(bf, False, 0)


# Where an int's digits (30 bits each in CPython) run out, and where 64 bits do:
# single calls read small ints in place, batches of NumPy integers never do.
INT_EDGES = [2**30 - 1, 2**30, 2**60 - 1, 2**60, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize("v", INT_EDGES + [-v for v in INT_EDGES if v <= 2**63])
def test_ints_at_digit_edges_are_their_64_bits(bf: BloomFilter, v: int) -> None:
    same_key(bf, v, (v % 2**64).to_bytes(8, "little"))
    f = fresh(bf)
    f.add(v)
    assert f.contains_many(np.array([v % 2**64], dtype=np.uint64)).tolist() == [True]


@pytest.mark.parametrize("v", [2**64, -(2**63) - 1, 2**90])
def test_ints_beyond_64_bits_are_not_their_low_bits(bf: BloomFilter, v: int) -> None:
    f = fresh(bf)
    assert f.add(v) is True
    assert (v % 2**64) not in f
    assert v in f


def test_single_int_calls_match_numpy_batches(bf: BloomFilter) -> None:
    rng = np.random.default_rng(8)
    ints = (rng.integers(-(2**63), 2**63, size=3000, dtype=np.int64) >> rng.integers(0, 64, size=3000)).astype(np.int64)
    f = fresh(bf)
    for v in ints.tolist():
        f.add(v)
    g = fresh(bf)
    g.add_many(ints)
    assert f == g


def test_numpy_integer_scalars_are_ints(bf: BloomFilter) -> None:
    for t in [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]:
        same_key(bf, t(5), 5)
    same_key(bf, np.int8(-3), -3)
    same_key(bf, np.uint64(2**64 - 1), 2**64 - 1)
    same_key(bf, np.bool_(True), 1)


@pytest.mark.parametrize("key", [None, {"a": 1}, [1, 2], {1, 2}, object(), 2j])
def test_other_types_are_refused(bf: BloomFilter, key: object) -> None:
    with pytest.raises(TypeError, match="key must be str, bytes-like, int, float, tuple or frozenset, got"):
        bf.add(key)
    with pytest.raises(TypeError, match="key must be str, bytes-like, int, float, tuple or frozenset, got"):
        _ = key in bf


def test_ndarray_as_single_key_is_refused(bf: BloomFilter) -> None:
    with pytest.raises(TypeError, match="pass arrays to add_many/contains_many"):
        bf.add(np.arange(3))


# ---- batches ---------------------------------------------------------------

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arrays_widen_to_64_bits(bf: BloomFilter, dtype: type) -> None:
    values = [0, 1, 5, 100, 127]
    if np.issubdtype(dtype, np.signedinteger):
        values += [-1, -128]
    f = fresh(bf)
    f.update(values)  # Python ints
    arr = np.array(values, dtype=dtype)
    assert f.contains_many(arr).all()
    g = fresh(bf)
    assert g.add_many(arr).all()
    assert all(v in g for v in values)
    # e.g. add(5) then contains_many(np.array([5], dtype=np.int32))
    h = fresh(bf)
    h.add(5)
    assert h.contains_many(np.array([5], dtype=dtype)).tolist() == [True]


def test_bool_arrays_are_0_and_1(bf: BloomFilter) -> None:
    f = fresh(bf)
    f.add_many(np.array([True, False]))
    assert 1 in f and 0 in f


def test_non_native_byte_order_and_strides(bf: BloomFilter) -> None:
    f = fresh(bf)
    f.update([5, 7, 9, 1000])
    assert f.contains_many(np.array([5, 1000], dtype=">i4")).all()
    assert f.contains_many(np.array([5, 6, 7, 8, 9], dtype=np.int64)[::2]).all()
    f.add("x")
    assert f.contains_many(np.array(["x", "zzz"], dtype=">U3")).tolist() == [True, False]


def test_S_arrays_drop_trailing_nuls(bf: BloomFilter) -> None:
    f = fresh(bf)
    arr = np.array([b"abc", b"a", b""], dtype="S5")
    assert f.add_many(arr).all()
    assert b"abc" in f and b"a" in f and b"" in f
    assert b"abc\x00\x00" not in f  # the raw 5-byte element is not the key
    # embedded NULs are kept, only trailing ones go
    g = fresh(bf)
    g.add(b"a\x00b")
    assert g.contains_many(np.array([b"a\x00b"], dtype="S6")).tolist() == [True]


def _hash_pairs(keys: object) -> list[tuple[int, int]]:
    return [(int(h1), int(h2)) for h1, h2 in bloomline.hash_many(keys, 3).tolist()]


def test_fixed_width_arrays_hash_their_keys_at_every_width_and_nul_place() -> None:
    # The trailing NULs are dropped a word at a time, then a character at a
    # time: every width up to three words, with NULs inside, at the word
    # edges and at the end, must hash as its key does alone.
    r = random.Random(11)
    for width in range(1, 26):
        keys = []
        for length in range(width + 1):
            for _ in range(3):
                key = bytes(r.choice(b"ab\x00") for _ in range(length)).rstrip(b"\x00")
                keys.append(key)
        want = _hash_pairs(keys)
        assert _hash_pairs(np.array(keys, dtype=f"S{width}")) == want, width
        text = [k.decode() for k in keys]
        assert _hash_pairs(np.array(text, dtype=f"U{width}")) == want, width


def test_U_arrays_are_utf8(bf: BloomFilter) -> None:
    words = ["abc", "héllo", "日本語", "😀 emoji", ""]
    f = fresh(bf)
    f.add_many(np.array(words))
    for w in words:
        assert w in f
        assert w.encode() in f
    g = fresh(bf)
    g.update(words)
    assert g.contains_many(np.array(words, dtype="U20")).all()


def test_U_array_with_surrogate_is_a_clear_error(bf: BloomFilter) -> None:
    arr = np.array(["ok", "\ud800"])
    with pytest.raises(ValueError, match=r"keys\[1\] is not encodable as UTF-8 \(code point 0xd800\)"):
        bf.contains_many(arr)


def test_lone_surrogate_str_is_refused(bf: BloomFilter) -> None:
    with pytest.raises(ValueError, match=r"key is not encodable as UTF-8 \(code point 0xd800\)"):
        bf.add("\ud800")


def test_lists_tuples_iterables_and_object_arrays(bf: BloomFilter) -> None:
    keys: list[object] = ["a", b"b", 3, np.int16(4), bytearray(b"e")]
    for container in [list(keys), tuple(keys), iter(keys), (k for k in keys), np.array(keys, dtype=object)]:
        f = fresh(bf)
        assert f.add_many(container).tolist() == [True] * 5  # type: ignore[arg-type]
        assert f.contains_many(["a", "b", 3, 4, "e"]).all()


def test_bad_elements_in_batches_are_named(bf: BloomFilter) -> None:
    with pytest.raises(TypeError, match=r"keys\[2\] must be str, bytes-like, int, float, tuple or frozenset, got set"):
        bf.add_many(["a", "b", {2.5}])
    with pytest.raises(TypeError, match=r"keys\[1\]\[1\] must be .*, got list"):
        bf.contains_many(iter([1, ("a", [1])]))
    with pytest.raises(TypeError, match=r"keys\[1\] must be .*, got dict"):
        bf.add_many(np.array(["a", {}], dtype=object))
    # None in a batch is a null: refused by its index unless nulls='skip'
    with pytest.raises(ValueError, match=r"keys\[0\] is null; pass nulls='skip'"):
        bf.add_many(np.array([None], dtype=object))


@pytest.mark.parametrize("dtype", [np.complex128, "datetime64[s]", "V4"])
def test_bad_array_dtypes(bf: BloomFilter, dtype: object) -> None:
    with pytest.raises(TypeError, match="array dtype .* is not a key type"):
        bf.add_many(np.zeros(3, dtype=dtype))  # type: ignore[call-overload]


@pytest.mark.parametrize("bad", ["abc", b"abc", 5, None, 1.5, bytearray(b"abc"), memoryview(b"abc"),
                                 array.array("B", b"abc"), array.array("q", [1, 2])])
def test_a_single_key_is_not_a_batch(bf: BloomFilter, bad: object) -> None:
    """A bytes-like object is one key to add() (a memoryview or array.array
    was iterated as a batch of its byte values: other keys, silently)."""
    f = fresh(bf)
    with pytest.raises(TypeError, match="keys must be an iterable of keys or a NumPy array"):
        f.add_many(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys must be an iterable of keys or a NumPy array"):
        f.contains_many(bad)  # type: ignore[arg-type]
    assert f.insert_count == 0


def test_batch_result_shape_follows_the_input(bf: BloomFilter) -> None:
    f = fresh(bf)
    grid = np.arange(12, dtype=np.uint32).reshape(3, 4)
    out = f.add_many(grid)
    assert out.shape == (3, 4) and out.dtype == np.bool_
    assert f.contains_many(grid).all()
    assert f.contains_many(np.array([], dtype=np.int64)).shape == (0,)
    assert f.contains_many([]).shape == (0,)
    assert f.contains_many(np.array(7)).shape == ()


def test_scalar_and_batch_paths_agree_on_random_keys(bf: BloomFilter, rng: np.random.Generator) -> None:
    ints = rng.integers(-(2**63), 2**63, size=2000, dtype=np.int64)
    words = [f"https://example.com/{i}" for i in rng.integers(0, 10**9, size=2000)]
    f = fresh(bf)
    f.add_many(ints)
    f.add_many(np.array(words))
    g = fresh(bf)
    for i in ints.tolist():
        g.add(i)
    for w in words:
        g.add(w)
    assert f == g


# ---- pre-hashed batches (bloomline.hash_many) ---------------------------------------


def test_hash_many_gives_each_keys_murmur3_halves() -> None:
    keys = ["a", b"bc", 5, np.uint8(7), "é"]
    h = bloomline.hash_many(keys, seed=11)
    assert h.shape == (5,) and h.dtype.names == ("h1", "h2")
    for key, (h1, h2) in zip(keys, h.tolist()):
        assert h1 | h2 << 64 == bloomline.murmur3_128(key, seed=11)


@pytest.mark.filterwarnings("ignore::bloomline.CapacityWarning")  # the filter is filled past capacity on purpose
def test_hashed_batches_answer_as_the_keys_do(layout: str, rng: np.random.Generator) -> None:
    keys = rng.integers(0, 2**63, size=20_000, dtype=np.uint64)
    a = BloomFilter(10_000, 0.01, layout=layout, seed=3)
    b = BloomFilter(10_000, 0.01, layout=layout, seed=3)
    h = bloomline.hash_many(keys, seed=3)
    assert a.add_many(keys).tolist() == b.add_many(h).tolist()
    assert a == b
    probe = rng.integers(0, 2**63, size=20_000, dtype=np.uint64)
    hp = bloomline.hash_many(probe, seed=3)
    assert a.contains_many(probe).tolist() == b.contains_many(hp).tolist()
    # slices (strided too) and masks keep the hashes usable
    assert b.contains_many(hp[::3]).tolist() == a.contains_many(probe[::3]).tolist()
    mask = probe % 2 == 0
    assert b.contains_many(hp[mask]).tolist() == a.contains_many(probe[mask]).tolist()


def test_hashes_of_another_seed_are_refused() -> None:
    h = bloomline.hash_many(["x"], seed=1)
    with pytest.raises(ValueError, match="keys were hashed with seed 1, the filter's seed is 0"):
        BloomFilter(100).add_many(h)
    with pytest.raises(TypeError, match="seed must be an int"):
        bloomline.hash_many(["x"], seed=1.5)  # type: ignore[arg-type]


def test_a_look_alike_dtype_without_the_seed_is_not_hashes() -> None:
    fake = np.zeros(3, dtype=[("h1", "<u8"), ("h2", "<u8")])
    with pytest.raises(TypeError, match="is not a key type"):
        BloomFilter(100).add_many(fake)


# ---- nulls wherever pandas has them, with and without pyarrow ------------------------------

NULL_CASES = r"""
import json, sys
if sys.argv[1] == "without":
    sys.modules["pyarrow"] = None  # import pyarrow now raises ImportError, in pandas too
    try:
        import pyarrow  # noqa: F401
        raise SystemExit("pyarrow was not blocked")
    except ImportError:
        pass
import numpy as np, pandas as pd
import bloomline

py_na = pd.StringDtype("python")
py_nan = pd.StringDtype("python", na_value=np.nan)
cases = {
    "object None": lambda: pd.Series(["a", "b", None, "c"], dtype=object),
    "object NaN": lambda: pd.Series(["a", "b", np.nan, "c"], dtype=object),
    "object pd.NA": lambda: pd.Series(["a", "b", pd.NA, "c"], dtype=object),
    "object pd.NaT": lambda: pd.Series(["a", "b", pd.NaT, "c"], dtype=object),
    "object mixed": lambda: pd.Series(["a", 7, np.nan, "c"], dtype=object),
    "default str": lambda: pd.Series(["a", "b", None, "c"]),
    "string python NA": lambda: pd.Series(["a", "b", None, "c"], dtype=py_na),
    "string python NaN": lambda: pd.Series(["a", "b", None, "c"], dtype=py_nan),
    "string": lambda: pd.Series(["a", "b", None, "c"], dtype="string"),
    "array string": lambda: pd.array(["a", "b", None, "c"], dtype="string"),
    "array string python": lambda: pd.array(["a", "b", None, "c"], dtype=py_na),
    "array Int64": lambda: pd.array([1, 2, None, 3], dtype="Int64"),
    "Series Int64": lambda: pd.Series([1, 2, None, 3], dtype="Int64"),
    "Series UInt8": lambda: pd.Series([1, 2, None, 3], dtype="UInt8"),
    "Index": lambda: pd.Index(["a", "b", None, "c"], dtype=object),
    "list None": lambda: ["a", "b", None, "c"],
    "list pd.NA": lambda: ["a", "b", pd.NA, "c"],
    "list NaN": lambda: ["a", "b", float("nan"), "c"],
    "object array NaN": lambda: np.array(["a", "b", np.nan, "c"], dtype=object),
    "Series float": lambda: pd.Series([1.0, 2.0, np.nan, 3.0]),
    "Series Float64": lambda: pd.Series([1.0, 2.0, None, 3.0], dtype="Float64"),
}
out = {}
for name, make in cases.items():
    for kind in ("bloom", "counting", "scalable"):
        f = {"bloom": bloomline.BloomFilter(1000, 0.001), "counting": bloomline.CountingBloomFilter(1000, 0.001),
             "scalable": bloomline.ScalableBloomFilter(100, 0.001)}[kind]
        f.update(["a", "c", 1, 3, 7])
        row = {}
        for nulls in ("skip", "raise"):
            try:
                row[nulls] = f.contains_many(make(), nulls=nulls).tolist()
            except (TypeError, ValueError) as e:
                row[nulls] = f"{type(e).__name__}: {e}"
        g = {"bloom": bloomline.BloomFilter(1000, 0.001), "counting": bloomline.CountingBloomFilter(1000, 0.001),
             "scalable": bloomline.ScalableBloomFilter(100, 0.001)}[kind]
        try:
            g.update(make(), nulls="skip")
            row["update"] = [k in g for k in ("a", "b", "c", 1, 2, 3)]
        except (TypeError, ValueError) as e:
            row["update"] = f"{type(e).__name__}: {e}"
        out[f"{name} / {kind}"] = row
print(json.dumps(out))
"""

NULL = ("ValueError: keys[2] is null; pass nulls='skip' to leave null keys out (their answers are False), or drop "
        "them first where a call takes no nulls= (hash_many, DedupQueue.push_many)")
NULL_EXPECTED = {
    **{name: ([True, False, False, True], NULL, [True, True, True, False, False, False])
       for name in ("object None", "object NaN", "object pd.NA", "object pd.NaT", "default str", "string python NA",
                    "string python NaN", "string", "array string", "array string python", "Index", "list None",
                    "list pd.NA", "list NaN", "object array NaN")},
    "object mixed": ([True, True, False, True], NULL, [True, False, True, False, False, False]),
    **{name: ([True, False, False, True], NULL, [False, False, False, True, True, True])
       for name in ("array Int64", "Series Int64", "Series UInt8", "Series float", "Series Float64")},
}


@pytest.mark.parametrize("pyarrow", ["without", "with"])
def test_pandas_nulls_are_skipped_or_refused_by_index(pyarrow: str) -> None:
    """None, NaN, pd.NA and pd.NaT wherever pandas puts them (object and
    python-storage string Series, extension arrays, float columns) are
    nulls, with pyarrow importable or not; so is a NaN in a list or a NumPy
    array (it equals nothing, not even itself); a float column's other
    values are keys, 1.0 being the key 1."""
    import json
    import subprocess
    import sys

    pytest.importorskip("pandas")
    if pyarrow == "with":
        pytest.importorskip("pyarrow")
    r = subprocess.run([sys.executable, "-c", NULL_CASES, pyarrow], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    for case, row in got.items():
        name = case.split(" / ")[0]
        skip, raised, updated = NULL_EXPECTED[name]
        assert row == {"skip": skip, "raise": raised, "update": updated}, case
