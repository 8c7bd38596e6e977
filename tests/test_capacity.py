"""Capacity honesty: a fixed filter that takes more new keys than its
capacity says so once (bloomline.CapacityWarning), by every add path;
filters without a capacity (from_params) and a scalable chain's stages
(in memory or in files) never do."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bloomline import BloomFilter, CapacityWarning, CountingBloomFilter, ScalableBloomFilter
from bloomline.scalable import DirectoryStages

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

CAPACITY = 1_000
KEYS = [f"https://site{i % 97}.example/page/{i}" for i in range(30_000)]


class Said:
    """The CapacityWarnings recorded so far (a live view)."""

    def __init__(self, caught: list[warnings.WarningMessage]) -> None:
        self.caught = caught

    def all(self) -> list[warnings.WarningMessage]:
        return [w for w in self.caught if issubclass(w.category, CapacityWarning)]

    def __len__(self) -> int:
        return len(self.all())

    def __getitem__(self, i: int) -> warnings.WarningMessage:
        return self.all()[i]


@contextmanager
def capacity_warnings() -> Iterator[Said]:
    """Every CapacityWarning raised inside, each one recorded ("always":
    Python's own once-per-place filter must not hide a second warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield Said(caught)


def one_by_one(f: Any, keys: list[str]) -> None:
    for k in keys:
        f.add(k)


def batches(f: Any, keys: list[str]) -> None:
    for i in range(0, len(keys), 700):
        f.add_many(keys[i : i + 700])


def one_batch(f: Any, keys: list[str]) -> None:
    f.add_many(keys)


def u_array_on_two_threads(f: Any, keys: list[str]) -> None:
    f.add_many(np.array(keys), threads=2)


def update_iterator(f: Any, keys: list[str]) -> None:
    f.update(iter(keys))


def update_lists(f: Any, keys: list[str]) -> None:
    f.update(keys[:15_000], keys[15_000:])


def lines(f: Any, keys: list[str]) -> None:
    f.add_lines("\n".join(keys).encode())


ADD_PATHS: dict[str, Callable[[Any, list[str]], None]] = {
    "add": one_by_one,
    "add_many batches": batches,
    "add_many one batch": one_batch,
    "add_many U array threads=2": u_array_on_two_threads,
    "update iterator": update_iterator,
    "update lists": update_lists,
    "add_lines": lines,
}


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
@pytest.mark.parametrize("how", ADD_PATHS)
def test_one_warning_after_30000_keys_into_capacity_1000(kind: Any, how: str, layout: str) -> None:
    f = kind(CAPACITY, 0.01, layout=layout)
    with capacity_warnings() as got:
        ADD_PATHS[how](f, KEYS)
        f.add("one more")
        f.add_many(["and", "more"])
    assert len(got) == 1, [str(w.message) for w in got.all()]
    assert issubclass(CapacityWarning, UserWarning)
    message = str(got[0].message)
    # What happened, and what to use instead.
    assert f"{kind.__name__} has taken" in message and "past its capacity of 1,000" in message
    assert "a larger capacity" in message and "ScalableBloomFilter" in message
    assert got[0].filename == __file__  # points at the caller's line


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_the_warning_comes_with_the_add_that_passes_capacity(kind: Any) -> None:
    f = kind(CAPACITY, 0.01)
    with capacity_warnings() as got:
        for key in KEYS:
            f.add(key)
            if got:
                break
    assert len(got) == 1 and f.insert_count == CAPACITY + 1


def test_at_capacity_is_quiet() -> None:
    f = BloomFilter(CAPACITY, 0.01)
    with capacity_warnings() as got:
        f.add_many(KEYS[:CAPACITY])
        f.add_many(KEYS[:CAPACITY])  # known keys are not new keys
    assert f.insert_count <= CAPACITY and not got


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_from_params_has_no_capacity_and_stays_quiet(kind: Any) -> None:
    f = kind.from_params(8192, 7, layout="standard")
    with capacity_warnings() as got:
        f.add_many(KEYS)
        f.update(KEYS)
        [f.add(k) for k in KEYS[:100]]
    assert f.capacity is None and f.expected_fp_rate > 0.9 and not got


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_once_per_filter_object(kind: Any, tmp_path: Path) -> None:
    f = kind(CAPACITY, 0.01)
    with capacity_warnings() as got:
        f.add_many(KEYS[:5000])
        g = f.copy()
        g.add("new to the copy")  # a copy is another filter: it says so once too
        g.add("again")
        h = pickle.loads(pickle.dumps(f))
        h.add_many(["new", "to", "the", "unpickled", "one"])
        f.add("new to the first")
    assert len(got) == 3


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_a_mapped_file_warns_once_per_handle(kind: Any, tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    kind(CAPACITY, 0.01).save(path)
    with capacity_warnings() as got:
        with kind.open(path, "r+") as f:
            f.add_many(KEYS[:10_000])
            f.update(KEYS[10_000:20_000])
            for k in KEYS[20_000:20_100]:
                f.add(k)
        assert len(got) == 1
        # The file keeps its count: another handle, adding on, says so once.
        with kind.open(path, "r+") as f:
            f.add_many(KEYS[20_100:])
            f.add("one more")
    assert len(got) == 2


def test_a_read_only_map_never_adds_and_never_warns(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    f = BloomFilter(CAPACITY, 0.01)
    with capacity_warnings() as got:
        f.add_many(KEYS)
    assert len(got) == 1
    f.save(path)
    with capacity_warnings() as got:
        ro = BloomFilter.load(path, mmap=True)
        assert ro.contains_many(KEYS).all()
        with pytest.raises(ValueError, match="read-only"):
            ro.add("x")
    assert not got


@pytest.mark.parametrize("how", [h for h in ADD_PATHS if "threads" not in h])  # (a chain has no threads=)
def test_a_scalable_chain_never_warns(how: str, layout: str) -> None:
    s = ScalableBloomFilter(CAPACITY, 0.01, layout=layout)
    with capacity_warnings() as got:
        ADD_PATHS[how](s, KEYS)
        s.add_many(KEYS)
    assert s.num_stages >= 4 and not got


def test_a_chain_in_files_never_warns_and_resumes_quietly(tmp_path: Path) -> None:
    with capacity_warnings() as got:
        with ScalableBloomFilter(CAPACITY, 0.01, store=DirectoryStages(tmp_path)) as s:
            s.add_many(KEYS[:20_000])
            for k in KEYS[20_000:20_500]:
                s.add(k)
        with ScalableBloomFilter(CAPACITY, 0.01, store=DirectoryStages(tmp_path, verify=True)) as s:
            s.update(iter(KEYS[20_500:]))
            assert s.contains_many(KEYS).all() and s.num_stages >= 4
    assert not got


def test_a_chain_read_back_from_bytes_never_warns() -> None:
    s = ScalableBloomFilter(CAPACITY, 0.01)
    s.add_many(KEYS[:20_000])
    with capacity_warnings() as got:
        again = pickle.loads(pickle.dumps(s))
        again.add_many(KEYS)
        (s | again).add_many(KEYS[:100])
    assert not got


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_a_union_sets_an_estimate_and_stays_quiet_but_update_with_a_filter_warns(kind: Any) -> None:
    """| and |= set insert_count to the estimate from the fill and say
    nothing (a chain's union uses them on its stages); update(), an add,
    says it once when it takes the filter past capacity."""
    a, b = kind(CAPACITY, 0.01), kind(CAPACITY, 0.01)
    a.add_many(KEYS[:900])
    b.add_many(KEYS[900:1800])
    with capacity_warnings() as got:
        c = a | b
        a_copy = a.copy()
        a_copy |= b
    assert not got and c.insert_count > CAPACITY and a_copy.insert_count > CAPACITY
    with capacity_warnings() as got:
        a.update(b)
        a.update(b)
    assert len(got) == 1 and a.insert_count > CAPACITY
