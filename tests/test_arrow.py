"""Arrow columns as batches of keys (the PyCapsule interface): every type,
chunks, slices, nulls, pandas and polars, and every filter kind. Each answer
is compared with the same keys given as a list (or a NumPy array)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

URLS = [f"https://site{i % 37}.example/page/{i}?q={i * 7}" for i in range(3000)]
SHORT = [f"k{i}" for i in range(3000)]  # at most 12 bytes: inline in a view


def reference_answers(f_make: Callable[[], Any], keys: list[Any], probe: list[Any]) -> tuple[Any, Any]:
    """(add answers, contains answers) of the list path."""
    f = f_make()
    added = f.add_many(keys)
    return added, f.contains_many(probe)


STRING_TYPES = ["string", "large_string", "binary", "large_binary", "string_view", "binary_view"]


def arrow_of(values: list[str], type_name: str) -> Any:
    t = getattr(pa, type_name)()
    if type_name.startswith(("binary", "large_binary")):
        return pa.array([v.encode() for v in values], t)
    return pa.array(values, t)


@pytest.mark.parametrize("type_name", STRING_TYPES)
@pytest.mark.parametrize("words", [URLS, SHORT], ids=["urls", "short"])
def test_each_string_type_answers_as_the_list_path(type_name: str, words: list[str], layout: str) -> None:
    keys, probe = words[:2000], words[1000:]
    added, hits = reference_answers(lambda: BloomFilter(5000, 0.01, layout=layout), keys, probe)
    f = BloomFilter(5000, 0.01, layout=layout)
    assert f.add_many(arrow_of(keys, type_name)).tolist() == added.tolist()
    assert f.contains_many(arrow_of(probe, type_name)).tolist() == hits.tolist()
    g = BloomFilter(5000, 0.01, layout=layout)
    g.add_many(keys)
    assert f == g  # the same bits


INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("type_name", INT_TYPES)
def test_each_integer_type_hashes_as_numpy_integers(type_name: str, layout: str) -> None:
    dtype = np.dtype(type_name)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    values = rng.integers(info.min, info.max, 5000, dtype=dtype, endpoint=True)
    values[:2] = [info.min, info.max]
    f = BloomFilter(8000, 0.01, layout=layout)
    g = BloomFilter(8000, 0.01, layout=layout)
    assert f.add_many(pa.array(values)).tolist() == g.add_many(values).tolist()
    assert f == g
    probe = rng.integers(info.min, info.max, 3000, dtype=dtype, endpoint=True)
    assert f.contains_many(pa.array(probe)).tolist() == g.contains_many(probe).tolist()
    # ... and as the same Python ints do
    assert f.contains_many(probe.tolist()).tolist() == f.contains_many(pa.array(probe)).tolist()


def test_booleans_hash_as_numpy_booleans() -> None:
    f = BloomFilter(100, 0.01)
    f.add(True)
    assert f.contains_many(pa.array([True, False, True])).tolist() == [True, False, True]
    assert f.contains_many(pa.array([True, False, True])).tolist() == f.contains_many(
        np.array([True, False, True])).tolist()


def test_chunked_arrays_with_empty_chunks() -> None:
    keys = URLS[:2500]
    chunks = pa.chunked_array([keys[:700], [], keys[700:701], keys[701:2000], [], keys[2000:]], pa.string())
    added, hits = reference_answers(lambda: BloomFilter(5000, 0.01), keys, URLS)
    f = BloomFilter(5000, 0.01)
    assert f.add_many(chunks).tolist() == added.tolist()
    assert f.contains_many(pa.chunked_array([URLS[:1], URLS[1:], []])).tolist() == hits.tolist()
    assert f.contains_many(pa.chunked_array([], pa.string())).shape == (0,)


@pytest.mark.parametrize("type_name", ["string", "large_string", "string_view", "int64", "bool_"])
@pytest.mark.parametrize("start", [1, 3, 8, 13])
def test_sliced_arrays_read_from_their_offset(type_name: str, start: int) -> None:
    if type_name == "int64":
        values: list[Any] = list(range(-50, 1950))
    elif type_name == "bool_":
        values = [i % 3 == 0 for i in range(2000)]
    else:
        values = URLS[:2000]
    # with nulls, so that the validity bitmap is read at the offset too
    with_nulls = [None if i % 11 == 5 else v for i, v in enumerate(values)]
    arr = pa.array(with_nulls, getattr(pa, type_name)()).slice(start, 1500)
    expected_keys = with_nulls[start : start + 1500]
    f = BloomFilter(5000, 0.01)
    f.update([v for v in values[::2]])
    got = f.contains_many(arr, nulls="skip")
    want = [False if v is None else v in f for v in expected_keys]
    assert got.tolist() == want
    first = next(i for i, v in enumerate(expected_keys) if v is None)
    with pytest.raises(ValueError, match=rf"keys\[{first}\] is null; pass nulls='skip'"):
        f.contains_many(arr)


def test_nulls_are_refused_by_index_or_skipped() -> None:
    f = BloomFilter(1000, 0.01)
    before = f.to_bytes()
    arr = pa.array(["a", "b", None, "c", None])
    with pytest.raises(ValueError, match=r"keys\[2\] is null"):
        f.add_many(arr)
    assert f.to_bytes() == before  # nothing was added
    assert f.add_many(arr, nulls="skip").tolist() == [True, True, False, True, False]
    assert f.approx_count == pytest.approx(3, abs=0.5)
    assert f.contains_many(arr, nulls="skip").tolist() == [True, True, False, True, False]
    # the index counts across chunks
    chunked = pa.chunked_array([["x", "y"], ["z", None]])
    with pytest.raises(ValueError, match=r"keys\[3\] is null"):
        f.contains_many(chunked)
    # None in a list is a null too
    assert f.contains_many(["a", None, "q"], nulls="skip").tolist() == [True, False, False]
    with pytest.raises(ValueError, match=r"keys\[1\] is null; pass nulls='skip'"):
        f.contains_many(["a", None])
    f.update(pa.array(["u", None]), ["v", None], (k for k in ["w", None]), nulls="skip")
    assert all(k in f for k in "uvw")
    with pytest.raises(ValueError, match="nulls must be 'raise' or 'skip', got 'drop'"):
        f.contains_many(arr, nulls="drop")


def test_counting_filter_takes_arrow_everywhere() -> None:
    c = CountingBloomFilter(1000, 0.01)
    c.update(pa.array(["a", "b", "a"]))
    assert c.count_many(pa.array(["a", "b", "z"])).tolist() == [2, 1, 0]
    assert c.remove_many(pa.array(["a", None, "z"]), nulls="skip").tolist() == [True, False, False]
    assert c.count_many(pa.array(["a", None]), nulls="skip").tolist() == [1, 0]
    assert c.add_many(pa.chunked_array([["q"], ["q"]])).tolist() == [True, False]


def test_scalable_chain_takes_arrow_with_nulls() -> None:
    s = ScalableBloomFilter(500, 0.01)
    keys = URLS[:2000]
    col = pa.array([None if i % 100 == 0 else k for i, k in enumerate(keys)])
    new = s.add_many(col, nulls="skip")
    assert new.shape == (2000,) and not new[::100].any()
    assert len(s.stages) > 1
    ref = ScalableBloomFilter(500, 0.01)
    assert ref.add_many([k for i, k in enumerate(keys) if i % 100]).tolist() == new[np.arange(2000) % 100 != 0].tolist()
    assert s.contains_many(col, nulls="skip").tolist() == [i % 100 != 0 for i in range(2000)]
    with pytest.raises(ValueError, match=r"keys\[0\] is null"):
        s.contains_many(col)


def test_pandas_series_answers_are_positional_masks() -> None:
    f = BloomFilter(1000, 0.01)
    f.update(["b", "d"])
    for dtype in ("str", "string[pyarrow]", object):
        s = pd.Series(["a", "b", "c", "d"], index=[10, 20, 30, 40], dtype=dtype)
        mask = f.contains_many(s)
        assert isinstance(mask, np.ndarray) and mask.tolist() == [False, True, False, True]
        assert s[mask].index.tolist() == [20, 40]  # usable as a mask; the index is the Series'
        assert s[~mask].tolist() == ["a", "c"]
    df = pd.DataFrame({"url": ["a", "b", "c"], "n": [1, 2, 3]}, index=["x", "y", "z"])
    assert df[f.contains_many(df["url"])].index.tolist() == ["y"]


def test_pandas_missing_values_are_nulls() -> None:
    f = BloomFilter(1000, 0.01)
    f.add("a")
    s = pd.Series(["a", None, "c"], dtype="string[pyarrow]")
    with pytest.raises(ValueError, match=r"keys\[1\] is null"):
        f.contains_many(s)
    assert f.contains_many(s, nulls="skip").tolist() == [True, False, False]
    assert f.contains_many(pd.Series(["a", None, "c"]), nulls="skip").tolist() == [True, False, False]


def test_pandas_series_of_mixed_objects_is_iterated_with_its_own_errors() -> None:
    f = BloomFilter(1000, 0.01)
    f.add("a")
    assert f.contains_many(pd.Series(["a", 5], dtype=object)).tolist() == [True, False]
    with pytest.raises(TypeError, match=r"keys\[1\] must be str, bytes-like, int, float, tuple or frozenset, got dict"):
        f.contains_many(pd.Series(["a", {}], dtype=object))


def test_polars_series_answers_as_the_list_path() -> None:
    pl = pytest.importorskip("polars")
    added, hits = reference_answers(lambda: BloomFilter(5000, 0.01), URLS[:2000], URLS)
    f = BloomFilter(5000, 0.01)
    assert f.add_many(pl.Series(URLS[:2000])).tolist() == added.tolist()
    assert f.contains_many(pl.Series(URLS)).tolist() == hits.tolist()
    assert f.contains_many(pl.Series(SHORT[:5])).tolist() == f.contains_many(SHORT[:5]).tolist()
    assert f.contains_many(pl.Series([1, 2, 3])).tolist() == f.contains_many(np.array([1, 2, 3])).tolist()
    assert f.contains_many(pl.Series(["a", None]), nulls="skip").tolist() == [False, False]
    # a DataFrame of one column is its column
    assert f.contains_many(pl.DataFrame({"u": URLS})).tolist() == hits.tolist()


def test_tables_of_one_column_and_refusals() -> None:
    f = BloomFilter(1000, 0.01)
    f.add("a")
    assert f.contains_many(pa.table({"u": ["a", "b"]})).tolist() == [True, False]
    assert f.contains_many(pa.record_batch({"u": ["b", "a"]})).tolist() == [False, True]
    with pytest.raises(TypeError, match="table or record batch of 2 columns"):
        f.contains_many(pa.table({"a": [1], "b": [2]}))
    with pytest.raises(TypeError, match=r"Arrow type 'e' \(half-precision floating point; cast it to float32"):
        f.contains_many(pa.array(np.array([1.5], dtype=np.float16)))
    with pytest.raises(TypeError, match="Arrow type 'tdD' .*date or time"):
        f.contains_many(pa.array([0], pa.date32()))
    with pytest.raises(TypeError, match="dictionary-encoded"):
        f.contains_many(pa.array(["a", "b"]).dictionary_encode())
    with pytest.raises(TypeError, match="dictionary-encoded"):
        f.contains_many(pd.Series(["a", "b"], dtype="category"))
    # The advice keeps the keys: astype(str) would make the int 101 the str '101'.
    ids = pd.Series([101, 102, 103])
    f.add_many(ids)
    cat = ids.astype("category")
    with pytest.raises(TypeError, match=r"pandas: series\.astype\(series\.cat\.categories\.dtype\)"):
        f.contains_many(cat)
    assert f.contains_many(cat.astype(cat.cat.categories.dtype)).all()


def test_an_empty_or_all_null_column_is_nulls_as_a_list_of_them_is() -> None:
    # Arrow's null type ("n", no buffers), which pyarrow makes of an empty or
    # all-missing object column, was "not a key type" even with nulls='skip'.
    pl = pytest.importorskip("polars")
    f = BloomFilter(1000, 0.01)
    columns = [pa.nulls(3), pa.chunked_array([pa.nulls(2), pa.nulls(0), pa.nulls(1)], pa.null()),
               pd.Series([None, None, None], dtype=object), pl.Series([None, None, None]),
               pa.table({"u": pa.nulls(3)})]
    for column in columns:
        assert f.add_many(column, nulls="skip").tolist() == [False] * 3
        assert f.contains_many(column, nulls="skip").tolist() == [False] * 3
        with pytest.raises(ValueError, match=r"keys\[0\] is null; pass nulls='skip'"):
            f.add_many(column)
    assert f.insert_count == 0 and f.bits_set == 0
    for empty in (pa.nulls(0), pd.Series([], dtype=object)):
        assert f.add_many(empty).tolist() == [] and f.contains_many(empty).tolist() == []
    assert bloomline.hash_many(pa.nulls(0)).shape == (0,)


def test_fixed_size_binary_columns_are_their_bytes_and_struct_columns_are_refused() -> None:
    # A UUID column (fixed_size_binary(16)) was "not a key type"; a Series
    # of one-field dicts (a struct column) was read as its field's values.
    import uuid

    ids = [uuid.UUID(int=i * 7919 + 3).bytes for i in range(1000)]
    f = BloomFilter(5000, 0.01)
    f.add_many(ids[:500])
    column = pa.array(ids, pa.binary(16))
    assert (bloomline.hash_many(column) == bloomline.hash_many(ids)).all()
    assert f.contains_many(column).tolist() == f.contains_many(ids).tolist()
    assert f.contains_many(column.slice(250, 500)).tolist() == f.contains_many(ids[250:750]).tolist()
    assert f.contains_many(pa.array([ids[0], None], pa.binary(16)), nulls="skip").tolist() == [True, False]
    pl = pytest.importorskip("polars")
    for records in (pd.Series([{"a": 1}, {"a": 2}]), pa.array([{"a": 1}]), pa.chunked_array([pa.array([{"a": 1}])]),
                    pl.Series([{"a": 1}]), pd.Series([{"a": 1}, {"a": 2}], index=["schema", "columns"])):
        with pytest.raises(TypeError, match=r"an Arrow struct column \(records, dicts\) is not a key type"):
            f.contains_many(records)
    assert f.contains_many(pa.table({"u": column})).sum() == 500  # (a table of one column is its column)
    batches = pa.table({"u": column}).to_batches(max_chunksize=300)
    assert f.contains_many(pa.RecordBatchReader.from_batches(batches[0].schema, batches)).sum() == 500


def test_an_object_series_arrow_cannot_hold_is_read_as_a_list() -> None:
    # An int past 64 bits made pyarrow raise OverflowError, which went out
    # bare instead of sending the Series to the list path.
    f = BloomFilter(1000, 0.01)
    keys = [-1, 2**63, 2**70, 5]
    assert f.add_many(keys).tolist() == [True, True, True, True]
    assert f.contains_many(pd.Series(keys)).all() and f.contains_many(pd.Series([2**70, 1])).tolist() == [True, False]


def test_a_producer_interrupted_by_ctrl_c_is_a_keyboard_interrupt() -> None:
    schema = pa.schema([("u", pa.string())])

    def batches(error: BaseException) -> Any:
        yield pa.record_batch({"u": ["a", "b"]})
        raise error

    f = BloomFilter(1000, 0.01)
    with pytest.raises(KeyboardInterrupt):
        f.add_many(pa.RecordBatchReader.from_batches(schema, batches(KeyboardInterrupt())))
    with pytest.raises(ValueError, match=r"reading the Arrow stream failed \(.*gone away"):
        f.add_many(pa.RecordBatchReader.from_batches(schema, batches(ConnectionError("gone away"))))
    assert f.bits_set == 0


def test_malformed_arrays_are_refused_not_read() -> None:
    f = BloomFilter(1000, 0.01)
    data = pa.py_buffer(b"abcdef")
    bad_offsets = pa.py_buffer(np.array([0, 4, 2, 6], dtype=np.int32).tobytes())
    arr = pa.Array.from_buffers(pa.string(), 3, [None, bad_offsets, data])
    with pytest.raises(ValueError, match="offsets decrease at element 1"):
        f.contains_many(arr)
    # a view pointing past its data buffer (a 20-byte key in a 6-byte buffer)
    view = np.zeros(16, dtype=np.uint8)
    view[0:4] = np.frombuffer(np.int32(20).tobytes(), dtype=np.uint8)
    views = pa.py_buffer(view.tobytes())
    sizes = pa.py_buffer(np.array([6], dtype=np.int64).tobytes())
    bad_view = pa.Array.from_buffers(pa.string_view(), 1, [None, views, data, sizes])
    with pytest.raises(ValueError, match="view 0 points outside its data buffers"):
        f.contains_many(bad_view)


class Capsules:
    """A producer whose export is not what the protocol says."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def __arrow_c_array__(self, requested_schema: object = None) -> Any:
        return self.result


def test_a_bad_producer_gets_a_type_error() -> None:
    f = BloomFilter(1000, 0.01)
    with pytest.raises(TypeError, match=r"__arrow_c_array__\(\) did not return \(schema, array\)"):
        f.contains_many(Capsules(42))
    with pytest.raises(TypeError, match="did not give a 'arrow_schema' capsule"):
        f.contains_many(Capsules((1, 2)))
    schema, array = pa.array(["a"]).__arrow_c_array__()
    good = Capsules((schema, array))
    assert f.contains_many(good).tolist() == [False]
    with pytest.raises(ValueError, match="already consumed"):
        f.contains_many(good)  # its capsules were moved out by the first call


def test_hash_many_and_key_positions_take_arrow() -> None:
    col = pa.array(URLS[:100])
    assert bloomline.hash_many(col, 5).tobytes() == bloomline.hash_many(URLS[:100], 5).tobytes()
    assert (bloomline.key_positions(col, 4096, 3) == bloomline.key_positions(URLS[:100], 4096, 3)).all()
    hashed, valid = bloomline._core.hash_valid(pa.array(["a", None, "b"]), 5, nulls="skip")
    assert valid.tolist() == [True, False, True]
    assert hashed.tobytes() == bloomline.hash_many(["a", "b"], 5).tobytes()


def test_unicode_arrays_hash_as_their_utf8(layout: str) -> None:
    words = ["https://a.example/", "naïve", "日本語のページ", "", "x" * 40, "emoji 🎉", "tail\x00mid"]
    arr = np.array(words)  # padded to the longest, with NULs
    f = BloomFilter(100, 0.01, layout=layout)
    g = BloomFilter(100, 0.01, layout=layout)
    assert f.add_many(arr).tolist() == g.add_many(words).tolist()
    assert f == g
    assert f.contains_many(np.array(words[::-1])).all()
    bad = np.array(["ok", "a\ud800b"])
    with pytest.raises(ValueError, match=r"keys\[1\] is not encodable as UTF-8 \(code point 0xd800\)"):
        f.add_many(bad)
