"""WindowedBloomFilter's core loop (window_ring.hpp, bound as
_core.WindowProbe) against the Python logic it replaced: each live
generation's own lookups and adds, one call per generation. Batches and
single keys, refresh on and off, on random keys over many moments: every
answer and every generation's bits are the same."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bloomline import BloomFilter, WindowedBloomFilter

pytestmark = pytest.mark.core


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def old_add_many(w: WindowedBloomFilter, keys: Any, refresh: bool) -> np.ndarray:
    """The add of the Python ring before the core loop: lookups in each
    older generation by its own call, the add by the current one's."""
    now = w.current_generation
    cur = w._current(now)
    older = [g for g in w._live(now) if g is not cur]
    seen = np.zeros(len(keys), dtype=bool)
    for g in older:
        seen |= g.contains_many(keys)
    if refresh:
        return np.asarray(cur.add_many(keys)) & ~seen
    out = np.zeros(len(keys), dtype=bool)
    fresh = ~seen
    if fresh.any():
        out[fresh] = cur.add_many(np.asarray(keys)[fresh])
    return out


def old_contains_many(w: WindowedBloomFilter, keys: Any) -> np.ndarray:
    hit = np.zeros(len(keys), dtype=bool)
    for g in w._live(w.current_generation):
        hit |= g.contains_many(keys)
    return hit


def bits(w: WindowedBloomFilter) -> list[tuple[int, bytes]]:
    return [(n, bytes(memoryview(f))) for n, f in w.live_generations]


@pytest.mark.parametrize("layout", ["blocked", "standard"])
@pytest.mark.parametrize("generations", [1, 2, 4, 8])
def test_batches_and_single_keys_answer_as_the_python_ring_did(layout: str, generations: int) -> None:
    rng = np.random.default_rng(generations)
    clocks = [Clock() for _ in range(4)]
    # new: the core's batches; scalar: the core's single keys; old: the Python logic
    new, scalar, old, threaded = (WindowedBloomFilter(3000, 0.01, window=100.0, generations=generations, clock=c,
                                                      layout=layout) for c in clocks)  # type: ignore[arg-type]
    t = 0.0
    for step in range(60):
        t += float(rng.uniform(0, 100.0 / generations))
        for c in clocks:
            c.t = t
        keys = rng.integers(0, 4000, int(rng.integers(1, 400)), dtype=np.uint64)  # repeats within and across
        refresh = bool(rng.random() < 0.5)
        want = old_add_many(old, keys, refresh)
        assert np.array_equal(new.add_many(keys, refresh=refresh), want), step
        assert np.array_equal(threaded.add_many(keys, refresh=refresh, threads=2), want), step  # (the old calls)
        assert [scalar.add(int(k), refresh=refresh) for k in keys] == want.tolist(), step
        probe = rng.integers(0, 8000, 500, dtype=np.uint64)
        hit = old_contains_many(old, probe)
        assert np.array_equal(new.contains_many(probe), hit), step
        assert [int(k) in scalar for k in probe] == hit.tolist(), step
        assert bits(new) == bits(old) == bits(scalar) == bits(threaded), step


def test_str_keys_and_nulls_take_the_core_loop_too() -> None:
    clock = Clock()
    w = WindowedBloomFilter(1000, 0.01, window=10.0, generations=2, clock=clock)
    urls = [f"https://example.com/{i}" for i in range(300)]
    assert w.add_many(urls).all()
    clock.t = 6.0
    assert not w.add_many(urls[:100]).any()
    assert w.add_many(urls[100:] + ["https://example.com/new"], refresh=False).tolist() == [False] * 200 + [True]
    assert w.contains_many(["https://example.com/5", None], nulls="skip").tolist() == [True, False]
    assert "https://example.com/7" in w and "https://example.com/x" not in w
    clock.t = 15.5  # generation 3: generation 0 gone, the refreshed hundred (generation 1) still seen
    assert w.contains_many(urls).tolist() == [True] * 100 + [False] * 200


def test_a_probe_refuses_generations_of_another_geometry() -> None:
    from bloomline import _core
    with pytest.raises(ValueError, match="share one geometry"):
        _core.WindowProbe([BloomFilter(1000, 0.01), BloomFilter(2000, 0.01)])
