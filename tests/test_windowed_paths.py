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
    now, cur = w._current(now)
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


def test_long_batches_answer_as_the_python_ring_did() -> None:
    """Long batches take the keys they still need 4,096 at a time, in order,
    through a buffer (window_ring.hpp, Picker): refresh=False adds the keys
    no older generation has, and lookups probe the keys not found yet; runs
    of keys none seen, all seen and mixed, repeats within a buffer's keys and
    across them; answers and bits as the Python ring's and the single calls'."""
    clocks = [Clock() for _ in range(3)]
    new, scalar, old = (WindowedBloomFilter(60_000, 0.01, window=100.0, generations=2, clock=c)  # type: ignore[arg-type]
                        for c in clocks)
    seen_keys = np.arange(10_000, 30_000, dtype=np.uint64)
    for w in (new, scalar, old):
        w.add_many(seen_keys)
    for c in clocks:
        c.t = 60.0  # the next generation: the first is older now, still live
    rng = np.random.default_rng(4)
    mixed = np.where(rng.random(4096 * 5) < 0.4, rng.integers(10_000, 30_000, 4096 * 5),
                     rng.integers(40_000, 50_000, 4096 * 5)).astype(np.uint64)  # repeats within and across buffers
    batch = np.concatenate([np.arange(100_000, 104_096, dtype=np.uint64),  # a run of none seen
                            seen_keys[:4096],                                 # a run of all seen
                            mixed, np.arange(100_000, 100_100, dtype=np.uint64)])  # repeats at the end
    want = old_add_many(old, batch, False)
    got = new.add_many(batch, refresh=False)
    assert np.array_equal(got, want)
    assert want[:4096].all() and not want[4096:8192].any() and 0 < want[8192:].sum() < len(mixed)
    assert [scalar.add(int(k), refresh=False) for k in batch] == want.tolist()
    assert bits(new) == bits(old) == bits(scalar)
    # Lookups of a long batch of which more than a quarter is found in the
    # first generation probed: the rest is probed through the buffer too;
    # and a refresh=True add of it, whose older lookups ask only the keys
    # new to the current generation.
    again = np.concatenate([batch, rng.integers(200_000, 300_000, 20_000).astype(np.uint64)])
    hit = old_contains_many(old, again)
    assert np.array_equal(new.contains_many(again), hit)
    assert 0.25 < hit.mean() < 0.75
    assert [int(k) in scalar for k in again] == hit.tolist()
    for c in clocks:
        c.t = 110.0  # a generation on: the first is gone, the second older
    want = old_add_many(old, again, True)
    assert np.array_equal(new.add_many(again), want)
    assert 0 < want.sum() < len(again)
    assert [scalar.add(int(k)) for k in again] == want.tolist()
    assert bits(new) == bits(old) == bits(scalar)


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


# ---- single keys: the cursor (one core call) against Python's way ----------------------------------


class PythonWay:
    """A cursor that never answers: every single-key call goes Python's way."""

    armed = False

    def arm(self, *args: Any) -> bool:
        return False

    def disarm(self) -> None:
        pass

    def advance(self, newest: int) -> None:
        pass

    def contains(self, key: Any, t: Any) -> None:
        return None


class PythonCalls:
    """Counts the calls that went Python's way (the cursor had no answer)."""

    def __init__(self, w: WindowedBloomFilter) -> None:
        self.calls = 0
        for name in ("_add_at", "_contains_at"):
            setattr(w, name, self.counted(getattr(w, name)))

    def counted(self, way: Any) -> Any:
        def call(*args: Any) -> Any:
            self.calls += 1
            return way(*args)
        return call


class Readings:
    """A clock whose readings are given as a list, in a given type (float,
    int, NumPy float64), going back at times."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self.t = 0.0

    def __call__(self) -> Any:
        return self.kind(self.t)


@pytest.mark.parametrize("kind", [float, int, np.float64])
@pytest.mark.parametrize("generations", [1, 4])
def test_single_keys_answer_alike_through_the_cursor_and_python(kind: Any, generations: int) -> None:
    """Random single adds and lookups on a clock that moves on, stands and
    goes back, with clears and capacity warnings between: the cursor's
    answers, bits and warnings are Python's, and the cursor answered most
    calls (float and int readings; a NumPy reading always goes Python's way).
    Through the class's C entry points, and its Python __contains__ (a subclass's `in`)."""
    import warnings

    rng = np.random.default_rng(7 + generations)
    clock = Readings(kind)
    fast, slow = (WindowedBloomFilter(150, 0.01, window=100.0, generations=generations, clock=clock)
                  for _ in range(2))
    slow._cursor = PythonWay()  # type: ignore[assignment]
    python_way = PythonCalls(fast)
    warned = 0
    for step in range(300):
        move = rng.random()
        if move < 0.6:
            clock.t += float(rng.uniform(0, 30.0 / generations))
        elif move < 0.7:
            clock.t = max(0.0, clock.t - float(rng.uniform(0, 60.0)))  # back: the newest generation stays
        if rng.random() < 0.02:
            fast.clear()
            slow.clear()
        keys = rng.integers(0, 3000, 20).tolist()
        refresh = bool(rng.random() < 0.5)
        through_python = step % 2 == 1  # (the Python __contains__, a subclass's `in`)
        with warnings.catch_warnings(record=True) as fast_warned:
            warnings.simplefilter("always")
            got = [fast.add(k, refresh=refresh) for k in keys]
        with warnings.catch_warnings(record=True) as slow_warned:
            warnings.simplefilter("always")
            want = [slow.add(k, refresh=refresh) for k in keys]
        assert got == want, step
        assert [str(w.message) for w in fast_warned] == [str(w.message) for w in slow_warned], step
        warned += len(fast_warned)
        probe = rng.integers(0, 6000, 40).tolist()
        if through_python:
            assert [WindowedBloomFilter.__contains__(fast, k) for k in probe] == [k in slow for k in probe], step
        else:
            assert [k in fast for k in probe] == [k in slow for k in probe], step
        assert bits(fast) == bits(slow), step
    assert warned >= 3  # (generations past their capacity of 150)
    if kind is np.float64:
        assert python_way.calls == 18_000  # (6,000 adds, 12,000 lookups)
    else:
        assert python_way.calls < 9000


def test_single_adds_on_threads_across_generation_changes_say_new_once() -> None:
    """Four threads add the same 3,000 keys one call at a time (each in its
    own order) while the clock, moved on by every reading, crosses five
    generations (all still live at the end): each key is new to exactly
    one thread, and every key is present."""
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    readings = itertools.count()
    w = WindowedBloomFilter(20_000, 0.001, window=100.0, generations=4,
                            clock=lambda: min(next(readings) * 0.01, 99.0))
    keys = [f"https://example.com/{i}" for i in range(3000)]

    def adder(k: int) -> list[str]:
        order = list(keys)
        np.random.default_rng(k).shuffle(order)  # type: ignore[arg-type]
        return [key for key in order if w.add(key)]

    with ThreadPoolExecutor(4) as pool:  # (an error in a thread is raised here)
        news = list(pool.map(adder, range(4)))
    assert w.current_generation == 3 and len(w.live_generations) == 4, w.live_generations
    assert sorted(itertools.chain(*news)) == sorted(keys)  # each new once (no false positive at 1e-3 here)
    assert all(k in w for k in keys)


def test_a_newer_generation_seen_by_any_call_holds_single_keys() -> None:
    """The cursor is armed at generation 0; a batch lookup at generation 2
    moves the newest on; the clock steps back: a single add goes to
    generation 2 (the current one never goes back), not to 0."""
    clock = Clock()
    w = WindowedBloomFilter(1000, 0.01, window=40.0, generations=4, clock=clock)
    clock.t = 5.0
    assert w.add("a") and w._cursor.armed
    clock.t = 25.0
    w.contains_many(["x"])
    assert w._cursor.armed  # (armed again, at generation 2)
    clock.t = 5.0
    assert w.add("b") and "b" in w
    gens = dict(w.live_generations)
    assert "b" in gens[2] and "b" not in gens[0] and "a" in gens[0]
    w.clear()
    assert not w._cursor.armed and "a" not in w and "b" not in w
    assert w.add("a")


def test_the_c_entry_points_take_and_refuse_arguments_as_the_python_methods() -> None:
    import inspect

    clock = Clock()
    w = WindowedBloomFilter(1000, 0.01, window=40.0, clock=clock)
    assert str(inspect.signature(WindowedBloomFilter.add)) == "(self, key, /, *, refresh=True)"
    assert "True if no live generation had it" in (WindowedBloomFilter.add.__doc__ or "")
    assert w.add("a") is True and w.add("a", refresh=False) is False and w.add("a", refresh=0) is False
    # (Python's own words: the C entry point hands calls it does not take to the Python method)
    with pytest.raises(TypeError, match=r"^WindowedBloomFilter.add\(\) takes 2 positional arguments but 3 were given$"):
        w.add("a", True)  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"add\(\) missing 1 required positional argument: 'key'$"):
        w.add()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"add\(\) got some positional-only arguments passed as keyword arguments: 'key'"):
        w.add(key="a")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"add\(\) got an unexpected keyword argument 'refreshed'$"):
        w.add("a", refreshed=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="refresh"):  # (a bool by pybind11's rules, as before the cursor)
        w.add("a", refresh="no")
    with pytest.raises(TypeError, match="key must be"):
        w.add(["a list"])
    with pytest.raises(TypeError, match="key must be"):
        ["a list"] in w  # noqa: B015

    def broken() -> float:
        raise OSError("no clock")

    w._clock = broken
    with pytest.raises(OSError, match="no clock"):
        w.add("b")
    with pytest.raises(OSError, match="no clock"):
        "b" in w  # noqa: B015
    w._clock = lambda: "noon"  # type: ignore[assignment,return-value]
    with pytest.raises(ValueError, match="clock must return a finite number of seconds, got 'noon'"):
        w.add("b")
    w._clock = lambda: float("-inf")
    with pytest.raises(ValueError, match="clock must return a finite number of seconds, got -inf"):
        "b" in w  # noqa: B015

    class Sub(WindowedBloomFilter):
        pass

    s = Sub(1000, 0.01, window=40.0, clock=clock)
    assert s.add("a") and "a" in s and "b" not in s and s._cursor.armed


@pytest.mark.parametrize("change", ["clear", "rotate"])
def test_a_key_whose_hashing_changes_the_ring_is_answered_as_python_would(change: str) -> None:
    """A key whose __index__ clears the filter, or moves the clock on and
    adds (a new generation): the cursor never reads a ring that changed
    under it (such keys go Python's way), and the answers are Python's."""
    answers = []
    for way in ("cursor", "python"):
        clock = Clock()
        clock.t = 5.0
        w = WindowedBloomFilter(1000, 0.01, window=40.0, clock=clock)
        if way == "python":
            w._cursor = PythonWay()  # type: ignore[assignment]
        for i in range(50):
            w.add(f"k{i}")

        class Key:
            def __index__(self) -> int:
                if change == "clear":
                    w.clear()
                else:
                    clock.t += 20.0
                    w.add("other")
                return 12345

        got = []
        for _ in range(3):
            got.append(w.add("z"))
            got.append(Key() in w)
            got.append(w.add(Key()))
            got.append("k1" in w)
        answers.append((got, bits(w)))
    assert answers[0] == answers[1]


def test_daemon_threads_adding_at_interpreter_exit_end_cleanly() -> None:
    """Four daemon threads add one key at a time (a clock that runs Python
    code, the filter past its capacity so that Python's way runs too) when
    the interpreter exits: the process ends with 0, not an abort (a thread
    ended at exit unwinds through the C entry point)."""
    import subprocess
    import sys

    script = """
import threading, time, warnings
from bloomline import WindowedBloomFilter
warnings.simplefilter("ignore")
w = WindowedBloomFilter(1000, 0.01, window=40.0)
def clock():
    time.sleep(0)  # (the GIL let go inside the C entry point's call)
    s = 0
    for i in range(50):
        s += i
    return time.time()
w._clock = clock
def worker(k):
    i = 0
    while True:
        w.add(i * 4 + k)
        (i + 1) in w
        i += 1
for k in range(4):
    threading.Thread(target=worker, args=(k,), daemon=True).start()
time.sleep(0.3)
"""
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


def test_a_clock_reading_of_none_is_refused_after_one_reading() -> None:
    reads = []

    def clock() -> None:
        reads.append(1)
        return None

    w = WindowedBloomFilter(1000, 0.01, window=40.0, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clock must return a finite number of seconds, got None"):
        w.add("a")
    assert len(reads) == 1
    with pytest.raises(ValueError, match="got None"):
        "a" in w  # noqa: B015
    assert len(reads) == 2
