"""The standard layout's second index, and the first kept for what was made
with it.

The first index ("standard-v1", layout code 0) stepped each slot from the
last by plain double hashing in effect: small filters and tiny rates ran
above their error rate (docs/design/layouts.md). The second ("standard",
code 2) draws each slot by its own multiply. A filter made with the first
keeps it in every file, pickle and Redis meta, and "standard" asked of it
attaches to it with its index.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter
from bloomline.scalable import DirectoryStages

DATA = Path(__file__).parent / "data"


def measured_rate(capacity: int, error_rate: float, layout: str, filters: int, probes: int) -> float:
    """False positives of fresh keys over `filters` filters (seeds 0..), each
    filled to capacity with its own random keys and probed `probes` times."""
    rng = np.random.default_rng(20261130)
    hits = 0
    for seed in range(filters):
        f = BloomFilter(capacity, error_rate, layout=layout, seed=seed)  # type: ignore[arg-type]
        f.add_many(rng.integers(0, 2**63, capacity, dtype=np.uint64))
        hits += int(f.contains_many(rng.integers(2**63, 2**64 - 1, probes, dtype=np.uint64)).sum())
    return hits / (filters * probes)


def test_a_small_standard_filter_meets_its_rate_and_the_first_index_did_not() -> None:
    # 100 filters of 100 keys at 1e-4, 2e7 probes: about 2,000 false
    # positives at the rate (sd 2.2%). The first index measured 2.2x.
    now = measured_rate(100, 1e-4, "standard", 100, 200_000)
    v1 = measured_rate(100, 1e-4, "standard-v1", 100, 200_000)
    assert now <= 1.15e-4, now
    assert v1 >= 1.6e-4, v1


@pytest.mark.parametrize(("capacity", "error_rate"), [(1, 0.01), (10, 1e-4), (10, 0.01), (100, 1e-4), (1000, 1e-6)])
def test_small_standard_filters_are_sized_by_the_exact_rate(capacity: int, error_rate: float) -> None:
    """The textbook rate under-counts on small filters (1.12x at capacity 10
    and 1e-4); the second index is sized, and reports expected_fp_rate, by
    the exact occupancy rate (sizing.false_positive_rate(formula="exact"),
    computed there in 120-digit decimals), and the first keeps its sizes."""
    from bloomline.sizing import false_positive_rate

    p, v1 = bloomline.optimal_params(capacity, error_rate, "standard"), bloomline.optimal_params(capacity, error_rate,
                                                                                                 "standard-v1")
    exact = false_positive_rate(capacity, p.num_bits, p.num_hashes, "standard", formula="exact")
    assert exact <= error_rate
    assert p.expected_fp_rate == pytest.approx(exact, rel=1e-9)
    # the first index's sizes are the textbook's, as its filters were made
    assert false_positive_rate(capacity, v1.num_bits, v1.num_hashes, "standard", formula="textbook") <= error_rate
    assert p.num_bits >= v1.num_bits
    f = BloomFilter(capacity, error_rate, layout="standard")
    f.add_many(range(capacity))
    # (an estimated count between two whole ones: the rate between theirs)
    lo, w = math.floor(f.approx_count), f.approx_count - math.floor(f.approx_count)
    at = [false_positive_rate(n, f.num_bits, f.num_hashes, "standard", formula="exact") if n else 0.0
          for n in (lo, lo + 1)]
    assert f.expected_fp_rate == pytest.approx((1 - w) * at[0] + w * at[1], rel=1e-9)


def test_a_new_standard_filter_writes_layout_code_2_and_keeps_its_index_through_every_copy(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(2000)]
    for layout, code in (("standard", 2), ("standard-v1", 0), ("blocked", 1)):
        f = BloomFilter(2000, 0.001, layout=layout)  # type: ignore[arg-type]
        f.add_many(keys)
        assert f.layout == layout
        assert f.to_bytes()[11] == code
        f.save(tmp_path / f"{layout}.blf")
        for again in (BloomFilter.from_bytes(f.to_bytes()), BloomFilter.load(tmp_path / f"{layout}.blf"),
                      pickle.loads(pickle.dumps(f)), f.copy()):
            assert again.layout == layout
            assert again == f
            assert again.contains_many(keys).all()
    # The two indexes put one key's bits in other places.
    a, b = BloomFilter.from_params(28_756, 10, layout="standard"), BloomFilter.from_params(28_756, 10, layout="standard-v1")
    a.add("x")
    b.add("x")
    assert bytes(memoryview(a)) != bytes(memoryview(b))


def test_filters_of_the_two_indexes_never_combine() -> None:
    a, b = BloomFilter(1000, 0.01, layout="standard"), BloomFilter(1000, 0.01, layout="standard-v1")
    for combine in (lambda: a | b, lambda: a & b, lambda: a.union(b), lambda: a.approx_union_count(b)):
        with pytest.raises(ValueError, match=r"filters differ in layout \(standard != standard-v1\)"):
            combine()
    c, d = CountingBloomFilter(1000, 0.01, layout="standard"), CountingBloomFilter(1000, 0.01, layout="standard-v1")
    with pytest.raises(ValueError, match="differ in layout"):
        c.union(d)


@pytest.mark.parametrize("name", ["v1_bloom_standard.blf", "v1_counting16_standard.blf"])
def test_files_saved_before_the_second_index_load_with_the_first(name: str) -> None:
    f = bloomline.from_bytes((DATA / name).read_bytes())
    assert f.layout == "standard-v1"
    assert f.contains_many([f"golden-{i}" for i in range(1000)]).all()
    # A filter made now with the first index sets the same bits for the same keys.
    again = type(f)(f.capacity, f.error_rate, layout="standard-v1", seed=f.seed)
    if isinstance(f, CountingBloomFilter):
        again = CountingBloomFilter(f.capacity, f.error_rate, layout="standard-v1", seed=f.seed,
                                    counter_bits=f.counter_bits)
    again.add_many([f"golden-{i}" for i in range(1000)])
    assert again == f


def test_a_chain_or_a_window_of_the_first_index_keeps_it(tmp_path: Path) -> None:
    keys = [f"u{i}" for i in range(3000)]
    # A directory chain made with the first index, opened by code that asks for "standard".
    with ScalableBloomFilter(1000, 0.01, layout="standard-v1", store=DirectoryStages(tmp_path / "chain")) as s:
        s.add_many(keys)
        assert s.num_stages > 1
    with ScalableBloomFilter(1000, 0.01, layout="standard", store=DirectoryStages(tmp_path / "chain")) as s:
        assert s.layout == "standard-v1"
        assert s.contains_many(keys).all()
        s.add_many([f"more{i}" for i in range(5000)])  # new stages take the chain's index
        assert {st.layout for st in s.stages} == {"standard-v1"}
    with pytest.raises(bloomline.scalable.ChainMismatch, match="layout"):
        ScalableBloomFilter(1000, 0.01, layout="blocked", store=DirectoryStages(tmp_path / "chain"))
    chain = ScalableBloomFilter(1000, 0.01, layout="standard-v1")
    chain.add_many(keys)
    again = ScalableBloomFilter.from_bytes(chain.to_bytes())
    assert again.layout == "standard-v1" and again.contains_many(keys).all()
    clock = [1000.0]
    w = WindowedBloomFilter(1000, 0.01, window=60, layout="standard-v1", clock=lambda: clock[0])
    w.add_many(keys[:500])
    w2 = WindowedBloomFilter.from_bytes(w.to_bytes(), clock=lambda: clock[0])
    assert w2.layout == "standard-v1" and w2.contains_many(keys[:500]).all()


def test_layout_names_in_errors_and_stubs() -> None:
    with pytest.raises(ValueError, match=r"layout must be 'blocked' or 'standard', got 'standard-v2'"):
        BloomFilter(10, 0.01, layout="standard-v2")  # type: ignore[arg-type]
    # One sizing for both indexes on large filters (the textbook rate); see test_small_standard_filters_are_sized_by_the_exact_rate.
    big_v1, big = bloomline.optimal_params(10**6, 0.01, "standard-v1"), bloomline.optimal_params(10**6, 0.01, "standard")
    assert (big_v1.num_bits, big_v1.num_hashes) == (big.num_bits, big.num_hashes)
    stubs = (Path(bloomline.__file__).parent / "_core.pyi").read_text()
    assert 'Layout: TypeAlias = Literal["blocked", "standard", "standard-v1"]' in stubs


# ---- Redis ---------------------------------------------------------------------


def test_redis_filters_of_the_first_index_are_recorded_as_older_bloomline_wrote_them_and_attach_as_standard(
        redis_server: Any) -> None:
    redis = pytest.importorskip("redis")
    from bloomline.redis import RedisBloomFilter, RedisWindowedFilter

    r = redis.Redis(host="127.0.0.1", port=redis_server.port)
    keys = [f"p{i}" for i in range(500)]
    old = RedisBloomFilter(r, "old", 1000, 0.01, layout="standard-v1")
    old.add_many(keys)
    # What a bloomline before the second index wrote, and reads: version 2, "standard".
    assert r.hget("old:meta", "version") == b"2" and r.hget("old:meta", "layout") == b"standard"
    # Code asking for "standard" attaches with the filter's own index.
    again = RedisBloomFilter(r, "old", 1000, 0.01, layout="standard")
    assert again.layout == "standard-v1"
    assert again.contains_many(keys).all()
    assert RedisBloomFilter(r, "old").layout == "standard-v1"
    with pytest.raises(ValueError, match="differs in layout"):
        RedisBloomFilter(r, "old", 1000, 0.01, layout="blocked")
    # A new standard filter is version 3, which a bloomline that reads 2 only refuses.
    new = RedisBloomFilter(r, "new", 1000, 0.01, layout="standard")
    new.add_many(keys)
    assert r.hget("new:meta", "version") == b"3" and r.hget("new:meta", "layout") == b"standard"
    assert RedisBloomFilter(r, "new").layout == "standard"
    with pytest.raises(ValueError, match="differs in layout"):
        RedisBloomFilter(r, "new", 1000, 0.01, layout="standard-v1")
    # Blocked filters stay at version 2: a fleet of old and new bloomline shares them.
    RedisBloomFilter(r, "blocked", 1000, 0.01)
    assert r.hget("blocked:meta", "version") == b"2"
    # Their bits are where a local filter of the same index puts them.
    for name, layout in (("old", "standard-v1"), ("new", "standard")):
        local = BloomFilter(1000, 0.01, layout=layout)  # type: ignore[arg-type]
        local.add_many(keys)
        assert RedisBloomFilter(r, name).to_filter() == local

    w = RedisWindowedFilter(r, "w-old", 1000, 0.01, window=60, layout="standard-v1")
    w.add_many(keys)
    assert r.hget("{w-old}:meta", "version") == b"2" and r.hget("{w-old}:meta", "layout") == b"standard"
    w2 = RedisWindowedFilter(r, "w-old", 1000, 0.01, window=60, layout="standard")
    assert w2.layout == "standard-v1" and w2.contains_many(keys).all()
    RedisWindowedFilter(r, "w-new", 1000, 0.01, window=60, layout="standard")
    assert r.hget("{w-new}:meta", "version") == b"3"
    with pytest.raises(ValueError, match=r"differs in layout \(stored standard != given standard-v1\)"):
        RedisWindowedFilter(r, "w-new", 1000, 0.01, window=60, layout="standard-v1")


def test_a_redis_chain_of_the_first_index_keeps_it(redis_server: Any) -> None:
    redis = pytest.importorskip("redis")
    from bloomline.redis import RedisStages

    r = redis.Redis(host="127.0.0.1", port=redis_server.port)
    keys = [f"c{i}" for i in range(3000)]
    s = ScalableBloomFilter(1000, 0.01, layout="standard-v1", store=RedisStages(r, "chain"))
    s.add_many(keys)
    assert s.num_stages > 1
    assert r.hget("{chain}:chain", "layout") == b"standard" and r.hget("{chain}:chain", "version") == b"1"
    again = ScalableBloomFilter(1000, 0.01, layout="standard", store=RedisStages(r, "chain"))
    assert again.layout == "standard-v1"
    assert again.contains_many(keys).all()
    again.add_many([f"more{i}" for i in range(5000)])
    assert {st.layout for st in again.stages} == {"standard-v1"}
    new = ScalableBloomFilter(1000, 0.01, layout="standard", store=RedisStages(r, "chain2"))
    new.add_many(keys)
    assert r.hget("{chain2}:chain", "version") == b"2"
    assert ScalableBloomFilter(1000, 0.01, layout="standard", store=RedisStages(r, "chain2")).layout == "standard"


def test_a_crawls_recrawl_file_of_the_first_index_resumes_under_layout_standard(tmp_path: Path) -> None:
    pytest.importorskip("scrapy")
    from scrapy.settings import Settings

    from bloomline.scrapy import dupefilter as d

    job = tmp_path / "job"
    f = d.BloomDupeFilter(str(job), recrawl_after=3600.0, capacity=1000, layout="standard")
    f.close()
    # The file as a crawl before the second index left it: its filter of the first index.
    made = WindowedBloomFilter.load(job / d.RECRAWL_FILE)
    old = WindowedBloomFilter(made.capacity, made.error_rate, window=made.window, generations=made.generations,
                              layout="standard-v1")
    old.add_many([b"a", b"b"])
    old.save(job / d.RECRAWL_FILE)
    settings = Settings({"JOBDIR": str(job), "BLOOMLINE_RECRAWL_AFTER": 3600, "BLOOMLINE_CAPACITY": 1000,
                         "BLOOMLINE_LAYOUT": "standard"})
    again = d.BloomDupeFilter.from_settings(settings)
    assert again.seen.layout == "standard-v1"
    assert again.has_fingerprint(b"a") and again.has_fingerprint(b"b") and again.record_fingerprint(b"c")
    again.close()
    # A crawl with another layout is told the setting that crawl had, one the settings take.
    settings.set("BLOOMLINE_LAYOUT", "blocked")
    with pytest.raises(ValueError, match=r"was made with BLOOMLINE_LAYOUT='standard', this crawl has 'blocked'"):
        d.BloomDupeFilter.from_settings(settings)


@pytest.mark.parametrize(("num_bits", "num_hashes"), [(16, 64), (20, 64), (24, 64), (30, 64), (64, 13)])
def test_expected_rate_of_a_filter_with_fewer_bits_than_hashes_is_a_probability(num_bits: int, num_hashes: int) -> None:
    from bloomline.sizing import false_positive_rate

    f = BloomFilter.from_params(num_bits, num_hashes, layout="standard")
    for i in range(3):
        f.add(f"x{i}")
        n = f.approx_count
        rate = f.expected_fp_rate
        assert 0.0 <= rate <= 1.0
        if math.isfinite(n) and n == int(n):
            assert rate == pytest.approx(false_positive_rate(int(n), num_bits, num_hashes, "standard", formula="exact"))
    assert bloomline._core.expected_rate(2, num_bits, num_hashes, "standard") == pytest.approx(
        false_positive_rate(2, num_bits, num_hashes, "standard", formula="exact"), rel=1e-9)


def test_a_filter_kept_by_the_servers_own_bloom_commands_records_its_layout_as_given(tmp_path: Path) -> None:
    """backend="bf": the server's filter, read by no index of ours, stays at
    meta version 2 and says "standard" (an older bloomline attaches)."""
    redis = pytest.importorskip("redis")
    from conftest import RedisServer, redisbloom_path

    from bloomline.redis import RedisBloomFilter

    server = RedisServer(tmp_path, "--loadmodule", redisbloom_path())
    try:
        r = redis.Redis(host="127.0.0.1", port=server.port)
        f = RedisBloomFilter(r, "bf", 1000, 0.01, layout="standard", backend="bf")
        f.add_many(["a", "b"])
        assert r.hget("bf:meta", "version") == b"2" and r.hget("bf:meta", "layout") == b"standard"
        again = RedisBloomFilter(r, "bf", 1000, 0.01, layout="standard")
        assert again.layout == "standard" and again.contains_many(["a", "b"]).all()
        # One made from a first-index filter is recorded as older bloomline wrote it, and attaches either way.
        RedisBloomFilter(r, "bf1", 1000, 0.01, layout="standard-v1", backend="bf")
        assert r.hget("bf1:meta", "version") == b"2" and r.hget("bf1:meta", "layout") == b"standard"
        for asked in ("standard", "standard-v1"):
            assert RedisBloomFilter(r, "bf1", 1000, 0.01, layout=asked).layout == "standard"  # type: ignore[arg-type]
        r.close()
    finally:
        server.stop()
