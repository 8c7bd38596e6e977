"""What users of pybloom-live, pyprobables and rbloom reach for first: `|`
for scalable chains, `&` for counting filters, save/load with binary file
objects, an approximate Jaccard index, update() taking filters, and a
remove that lowers insert_count."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter
from bloomline.scalable import DirectoryStages

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


def urls(lo: int, hi: int) -> list[str]:
    return [f"https://peer.example/{i}" for i in range(lo, hi)]


# ---- | for ScalableBloomFilter ---------------------------------------------------


def test_union_of_chains_is_stage_by_stage(layout: str) -> None:
    a = ScalableBloomFilter(1000, 0.01, layout=layout, seed=5)
    b = ScalableBloomFilter(1000, 0.01, layout=layout, seed=5)
    a.add_many(urls(0, 6000))  # 3 stages
    b.add_many(urls(100_000, 101_500))  # 2 stages
    assert (a.num_stages, b.num_stages) == (3, 2)
    u = a | b
    assert u.num_stages == 3
    for i, stage in enumerate(u.stages):
        want = a.stages[i] | b.stages[i] if i < b.num_stages else a.stages[i]
        assert stage == want, i
    assert u.contains_many(urls(0, 6000)).all() and u.contains_many(urls(100_000, 101_500)).all()
    assert (b | a) == u  # the longer chain's extra stages are kept either way round
    # Each stage's count is what its bits say (the union's keys are not counted one by one), at most
    # its capacity (the format's bound: a fuller one is full).
    for stage, count in zip(u.stages, u._stage_counts):
        assert count == min(stage.insert_count, stage.capacity)
    before = a.to_bytes()
    a |= b
    assert a == u and a.to_bytes() != before
    # The union goes on growing like any chain; its first stages hold the
    # keys of two, so it answers "seen" for a new key more often than one
    # chain would, and says so.
    rate = u.expected_fp_rate
    assert rate > u.error_rate
    fresh = u.add_many(urls(200_000, 210_000))
    assert u.num_stages > 3 and 1 - fresh.mean() < 2 * rate


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial_capacity": 2000}, r"chains differ in initial_capacity \(1000 != 2000\)"),
        ({"error_rate": 0.001}, r"chains differ in error_rate \(0.01 != 0.001\)"),
        ({"growth": 4}, r"chains differ in growth \(2 != 4\)"),
        ({"tightening": 0.8}, r"chains differ in tightening \(0.9 != 0.8\)"),
        ({"layout": "standard"}, r"chains differ in layout \('blocked' != 'standard'\)"),
        ({"seed": 7}, r"chains differ in seed \(0 != 7\)"),
    ],
)
def test_union_of_different_chains_names_what_differs(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"initial_capacity": 1000, "error_rate": 0.01} | kwargs
    a = ScalableBloomFilter(1000, 0.01)
    b = ScalableBloomFilter(args.pop("initial_capacity"), args.pop("error_rate"), **args)
    with pytest.raises(ValueError, match=message):
        a | b
    with pytest.raises(ValueError, match=message):
        a |= b
    with pytest.raises(ValueError, match=message):
        a.update(b)


def test_union_with_another_kind_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        ScalableBloomFilter(1000) | BloomFilter(1000)  # type: ignore[operator]


def test_union_in_place_of_a_chain_in_files(tmp_path: Path) -> None:
    other = ScalableBloomFilter(1000, 0.01)
    other.add_many(urls(0, 5000))
    with ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path)) as s:
        s.add_many(urls(50_000, 51_000))
        s |= other
        assert s.num_stages == other.num_stages
    with ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path)) as s:  # in the files
        assert s.contains_many(urls(0, 5000)).all() and s.contains_many(urls(50_000, 51_000)).all()


# ---- & for CountingBloomFilter ---------------------------------------------------------


def test_counting_intersection_takes_the_smaller_counter(layout: str) -> None:
    a = CountingBloomFilter(1000, 0.01, counter_bits=8, layout=layout)
    b = CountingBloomFilter(1000, 0.01, counter_bits=8, layout=layout)
    for _ in range(3):
        a.add("both")
    b.add("both")
    a.update(urls(0, 300))
    b.update(urls(200, 500))
    c = a & b
    assert np.array_equal(np.asarray(c), np.minimum(np.asarray(a), np.asarray(b)))
    assert c.count("both") == 1
    assert c.contains_many(urls(200, 300)).all()
    assert c.contains_many(urls(0, 200)).mean() < 0.05 and c.contains_many(urls(300, 500)).mean() < 0.05
    assert c.nonzero_counters == int(np.count_nonzero(np.asarray(c)))
    a &= b
    assert a == c


def test_counting_intersection_of_4_bit_counters() -> None:
    a = CountingBloomFilter.from_params(1024, 3, layout="standard")
    b = CountingBloomFilter.from_params(1024, 3, layout="standard")
    for i in range(40):
        for _ in range(i % 5):
            a.add(i)
        for _ in range(i % 3):
            b.add(i)
    c = a & b
    for i in range(40):
        assert c.count(i) <= min(a.count(i), b.count(i))
        if min(i % 5, i % 3):
            assert c.count(i) >= 1  # in both: never lost


def test_counting_intersection_names_what_differs() -> None:
    with pytest.raises(ValueError, match=r"filters differ in counter_bits \(4 != 8\)"):
        CountingBloomFilter(1000) & CountingBloomFilter(1000, counter_bits=8)
    with pytest.raises(ValueError, match=r"filters differ in num_counters"):
        CountingBloomFilter(1000) & CountingBloomFilter(2000)


# ---- approx_jaccard ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_approx_jaccard_estimates_the_keys_jaccard_index(kind: Any, layout: str) -> None:
    a = kind(100_000, 0.001, layout=layout)
    b = kind(100_000, 0.001, layout=layout)
    a.update(range(0, 30_000))
    b.update(range(20_000, 50_000))  # 10,000 shared of 50,000: 0.2
    assert a.approx_jaccard(b) == pytest.approx(0.2, abs=0.01)
    assert b.approx_jaccard(a) == a.approx_jaccard(b)
    assert a.approx_jaccard(a) == pytest.approx(1.0)
    c = kind(100_000, 0.001, layout=layout)
    c.update(range(60_000, 90_000))
    assert a.approx_jaccard(c) == pytest.approx(0.0, abs=0.01)
    # From the counts the filters report.
    u = a.approx_union_count(b)
    i = a.approx_intersection_count(b)
    assert a.approx_jaccard(b) == pytest.approx(i / u)


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_approx_jaccard_edges(kind: Any) -> None:
    assert kind(1000).approx_jaccard(kind(1000)) == 1.0  # two empty sets are the same set
    full = kind.from_params(512, 2)
    full.update(range(100_000))
    assert np.isnan(full.approx_jaccard(full.copy()))  # every slot set: nothing can be estimated
    with pytest.raises(ValueError, match="filters differ in seed"):
        kind(1000).approx_jaccard(kind(1000, seed=1))


# ---- update(*others) ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_update_takes_filters_and_iterables_mixed(kind: Any) -> None:
    a, b = kind(10_000, 0.01), kind(10_000, 0.01)
    a.update(urls(0, 100))
    b.update(urls(100, 200))
    want = a | b
    want.update(urls(200, 210), ["x"])
    a.update(b, urls(200, 210), iter(["x"]))
    assert a == want
    with pytest.raises(TypeError, match=rf"update\(\) takes {kind.__name__}s of the same geometry or iterables of keys, got"):
        a.update(ScalableBloomFilter(100))
    with pytest.raises(ValueError, match="filters differ in num_"):
        a.update(kind(20_000, 0.01))


def test_update_of_a_bloom_filter_with_a_counting_filter_is_refused() -> None:
    with pytest.raises(TypeError, match=r"got CountingBloomFilter"):
        BloomFilter(1000).update(CountingBloomFilter(1000))


def test_scalable_update_takes_chains_and_iterables() -> None:
    a, b = ScalableBloomFilter(1000, 0.01), ScalableBloomFilter(1000, 0.01)
    b.add_many(urls(0, 3000))
    a.update(urls(10_000, 10_100), b, iter(urls(20_000, 20_010)))
    for keys in (urls(0, 3000), urls(10_000, 10_100), urls(20_000, 20_010)):
        assert a.contains_many(keys).all()
    with pytest.raises(TypeError, match=r"update\(\) takes ScalableBloomFilters"):
        a.update(BloomFilter(1000))


# ---- remove lowers insert_count ---------------------------------------------------------


def test_remove_lowers_insert_count_when_the_key_leaves(layout: str) -> None:
    f = CountingBloomFilter(1000, 0.01, layout=layout)
    f.add("a")
    f.add("b")
    f.add("b")
    assert f.insert_count == 2
    f.remove("a")
    assert f.insert_count == 1  # "a" is gone
    f.remove("b")
    assert f.insert_count == 1 and "b" in f  # one "b" is left
    assert f.discard("b") and f.insert_count == 0
    f.update(urls(0, 100))
    assert f.insert_count == 100
    removed = f.remove_many(urls(0, 60) + ["never added"])
    assert removed.sum() == 60 and f.insert_count == 40
    assert f.remove_many(urls(60, 100)).all() and f.insert_count == 0 and f.nonzero_counters == 0


# ---- save / load with binary file objects -----------------------------------------------------


def every_kind() -> list[Any]:
    a = BloomFilter(1000, 0.01)
    c = CountingBloomFilter(1000, 0.01, counter_bits=8)
    s = ScalableBloomFilter(100, 0.01)
    for f in (a, c, s):
        f.update(urls(0, 500))
    return [a, c, s]


@pytest.mark.parametrize("f", every_kind(), ids=lambda f: type(f).__name__)
def test_save_and_load_binary_file_objects(f: Any, tmp_path: Path) -> None:
    kind = type(f)
    buf = io.BytesIO()
    assert f.save(buf) is None
    assert buf.getvalue() == f.to_bytes()
    buf.seek(0)
    assert kind.load(buf) == f
    path = tmp_path / "f.blf"
    with open(path, "wb") as out:
        f.save(out)
    with open(path, "rb") as src:
        assert kind.load(src) == f
    assert kind.load(path) == f  # the same bytes as a save to a path
    assert bloomline.from_bytes(path.read_bytes()) == f


def test_a_stream_holds_several_filters_one_after_another() -> None:
    a, c, s = every_kind()
    buf = io.BytesIO()
    for f in (a, c, s, a):
        f.save(buf)
    buf.write(b"trailing")
    buf.seek(0)
    assert BloomFilter.load(buf) == a
    assert CountingBloomFilter.load(buf) == c
    assert ScalableBloomFilter.load(buf) == s
    assert BloomFilter.load(buf) == a
    assert buf.read() == b"trailing"  # each load read exactly its own filter


def test_file_object_errors(tmp_path: Path) -> None:
    f = BloomFilter(1000)
    with open(tmp_path / "t.txt", "w") as text:
        with pytest.raises(TypeError, match=r"file must be opened in binary mode \('wb'\)"):
            f.save(text)
    with open(tmp_path / "t.txt") as text:
        with pytest.raises(TypeError, match=r"file must be opened in binary mode \('rb'\)"):
            BloomFilter.load(text)
    with pytest.raises(TypeError, match="path must be str, bytes, os.PathLike or a binary file object"):
        f.save(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mmap=True needs a path"):
        BloomFilter.load(io.BytesIO(f.to_bytes()), mmap=True)
    with pytest.raises(ValueError, match="this holds a BloomFilter, not a CountingBloomFilter"):
        CountingBloomFilter.load(io.BytesIO(f.to_bytes()))
    with pytest.raises(ValueError, match="truncated"):
        BloomFilter.load(io.BytesIO(f.to_bytes()[:-10]))
    with pytest.raises(ValueError, match="truncated"):
        BloomFilter.load(io.BytesIO(b""))
    with pytest.raises(ValueError, match="truncated"):
        ScalableBloomFilter.load(io.BytesIO(ScalableBloomFilter(10).to_bytes()[:200]))
