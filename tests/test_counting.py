"""CountingBloomFilter: removal without false negatives, saturation, exact
refusals, batches, to_bloom, union, bytes and pickle."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from bloomline import BloomFilter, CapacityWarning, CountingBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


@pytest.fixture(params=[4, 8, 16])
def counter_bits(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def test_add_remove_count(layout: str, counter_bits: int) -> None:
    f = CountingBloomFilter(1000, 0.01, counter_bits=counter_bits, layout=layout)
    assert f.add("a") is True
    assert f.add("a") is False
    assert "a" in f and f.count("a") >= 2
    f.remove("a")
    assert "a" in f and f.count("a") >= 1
    f.remove("a")
    assert "a" not in f and f.count("a") == 0
    with pytest.raises(KeyError):
        f.remove("a")
    assert f.discard("a") is False
    f.add("b")
    assert f.discard("b") is True and "b" not in f


def test_remove_of_absent_key_changes_nothing(layout: str) -> None:
    f = CountingBloomFilter(1000, 0.01, layout=layout)
    f.update(range(500))
    before = f.to_bytes()
    with pytest.raises(KeyError, match="'never-added'"):
        f.remove("never-added")
    assert f.to_bytes() == before
    out = f.remove_many(["never-1", "never-2"])
    assert out.tolist() == [False, False]
    assert f.to_bytes() == before


@pytest.mark.parametrize("counter_bits", [4, 8])
def test_churn_never_a_false_negative(layout: str, counter_bits: int, rng: np.random.Generator) -> None:
    f = CountingBloomFilter(1_000_000, 0.01, counter_bits=counter_bits, layout=layout)
    universe = rng.permutation(10_000_000).astype(np.uint64)
    present = universe[:1_000_000]
    next_new = 1_000_000
    f.add_many(present)
    for _ in range(4):
        drop = rng.permutation(len(present))[: len(present) // 2]
        keep = np.ones(len(present), dtype=bool)
        keep[drop] = False
        assert f.remove_many(present[drop]).all()
        present = present[keep]
        new = universe[next_new : next_new + 500_000]
        next_new += 500_000
        f.add_many(new)
        present = np.concatenate([present, new])
        assert f.contains_many(present).all()  # never a false negative
    assert f.remove_many(present).all()
    absent_hits = f.contains_many(universe[:next_new]).mean()
    assert absent_hits < 1e-3  # after removing everything, (almost) nothing is present
    assert f.approx_count < 1000


def test_saturation_keeps_neighbours_findable(layout: str) -> None:
    f = CountingBloomFilter.from_params(512, 6, counter_bits=4, layout=layout)
    neighbours = [f"n{i}" for i in range(40)]  # a small filter: they share counters
    f.update(neighbours)
    for _ in range(100):
        f.add("hot")
    assert f.saturated_counters > 0
    for _ in range(100):
        f.discard("hot")
    assert all(n in f for n in neighbours)
    assert f.count("hot") >= 1  # its saturated counters stuck


def test_batches(layout: str) -> None:
    f = CountingBloomFilter(10_000, 0.001, layout=layout)
    keys = np.arange(1000, dtype=np.int64)
    assert f.add_many(keys).all()
    assert f.add_many(keys).sum() == 0
    assert f.count_many(keys).min() >= 2 and f.count_many(keys).dtype == np.uint32
    assert f.contains_many(list(range(1000))).all()
    assert f.remove_many(keys).all()
    assert f.contains_many(keys).all()
    assert f.remove_many(keys).all()
    assert not f.contains_many(keys).any()


def test_to_bloom_equals_the_bloom_filter_of_the_same_keys(layout: str) -> None:
    cf = CountingBloomFilter(5000, 0.01, layout=layout, seed=7)
    bf = BloomFilter(5000, 0.01, layout=layout, seed=7)
    keys = [f"k{i}" for i in range(3000)]
    cf.update(keys)
    bf.update(keys)
    assert cf.to_bloom() == bf
    cf.update(["x", "y"])
    cf.remove("x")
    cf.remove("y")
    assert cf.to_bloom() == bf


def test_union_is_a_saturating_sum(layout: str) -> None:
    a = CountingBloomFilter.from_params(512, 3, counter_bits=4, layout=layout)
    b = CountingBloomFilter.from_params(512, 3, counter_bits=4, layout=layout)
    for _ in range(10):
        a.add("k")
        b.add("k")
    u = a | b
    assert u.count("k") == 15  # 20, saturated at 15
    a |= b
    assert a == u
    with pytest.raises(ValueError, match=r"filters differ in counter_bits \(4 != 8\)"):
        _ = a | CountingBloomFilter.from_params(512, 3, counter_bits=8, layout=layout)
    with pytest.raises(ValueError, match=r"filters differ in num_counters \(512 != 1024\)"):
        _ = a | CountingBloomFilter.from_params(1024, 3, layout=layout)


def test_a_union_counts_the_keys_present_once(layout: str) -> None:
    # insert_count counts keys present, not adds: a filter united with its own
    # copy holds the same 600 keys (twice each), and warns at capacity, not at
    # half of it. A union with an empty filter is a copy and keeps the count.
    a = CountingBloomFilter(1000, 0.01, layout=layout, seed=1)
    a.update(f"k{i}" for i in range(600))
    u = a | a.copy()
    assert abs(u.insert_count - 600) <= 30 and u.insert_count == pytest.approx(u.approx_count, abs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        u.add_many([f"more{i}" for i in range(300)])
    empty = CountingBloomFilter(1000, 0.01, layout=layout, seed=1)
    assert (empty | a).insert_count == a.insert_count == (a | empty).insert_count
    other = CountingBloomFilter(1000, 0.01, layout=layout, seed=1)
    other.update(f"j{i}" for i in range(300))
    assert abs((a | other).insert_count - 900) <= 45


def test_bytes_pickle_and_buffer(layout: str, counter_bits: int) -> None:
    f = CountingBloomFilter(1000, 0.01, counter_bits=counter_bits, layout=layout, seed=3)
    f.update(range(300))
    f.add(5)
    g = CountingBloomFilter.from_bytes(f.to_bytes())
    assert g == f and g.counter_bits == counter_bits and g.count(5) >= 2
    h = pickle.loads(pickle.dumps(f))
    assert h == f and isinstance(h, CountingBloomFilter)
    arr = np.asarray(f)
    assert not arr.flags.writeable
    if counter_bits == 16:
        assert arr.dtype == np.dtype("<u2") and int(arr.astype(int).sum()) == f.num_hashes * 301
        assert arr.max() >= 2
        assert memoryview(f).tolist() == arr.tolist()  # (memoryview reads native formats only)
    elif counter_bits == 8:
        assert arr.dtype == np.uint8 and int(arr.astype(int).sum()) == f.num_hashes * 301
    else:
        assert ((arr & 0x0F).astype(int) + (arr >> 4)).sum() == f.num_hashes * 301
    with pytest.raises(ValueError, match="this holds a CountingBloomFilter, not a BloomFilter"):
        BloomFilter.from_bytes(f.to_bytes())
    with pytest.raises(ValueError, match="this holds a BloomFilter, not a CountingBloomFilter"):
        CountingBloomFilter.from_bytes(BloomFilter(10).to_bytes())


def test_counters_per_key_sum_to_k_times_adds() -> None:
    f = CountingBloomFilter(1000, 0.01, counter_bits=8)
    f.update(range(200))
    assert int(np.asarray(f).astype(int).sum()) == 200 * f.num_hashes
    assert f.nonzero_counters == int(np.count_nonzero(np.asarray(f)))


def test_errors_and_repr() -> None:
    with pytest.raises(ValueError, match="counter_bits must be 4, 8 or 16, got 3"):
        CountingBloomFilter(100, counter_bits=3)
    with pytest.raises(TypeError, match="counter_bits must be an int"):
        CountingBloomFilter(100, counter_bits="4")  # type: ignore[arg-type]
    f = CountingBloomFilter(100)
    r = repr(f)
    assert r.startswith("<CountingBloomFilter capacity=100") and "counter_bits=4" in r
    assert f" num_counters={f.num_counters} " in r and "num_bits" not in r  # (its slots are counters)
    with pytest.raises(TypeError):
        hash(f)
