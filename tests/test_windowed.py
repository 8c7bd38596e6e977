"""WindowedBloomFilter: keys seen within the last window, on a fake clock
(no sleeping). The bounds tested are those of the module's docstring: a key
is seen through t + window, gone by t + window + window / G, and a lookup
over the G + 1 live generations stays within error_rate."""

from __future__ import annotations

import datetime
import math
import os
import re
import subprocess
import sys
from typing import Any, Callable

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CapacityWarning, WindowedBloomFilter

pytestmark = pytest.mark.core


class FakeClock:
    """Seconds as a test sets them."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fp_bound(n: int, rate: float) -> float:
    """At most this many of n absent keys hit at a rate <= rate: the mean
    plus 5 standard deviations (a binomial tail of about 3e-7)."""
    return n * rate + 5 * math.sqrt(n * rate * (1 - rate))


def events_run(generations: int, past: float, rng: np.random.Generator, *, moments: int = 2000,
               per: int = 5, window: float = 1000.0, error_rate: float = 0.001) -> tuple[int, int]:
    """Keys added at `moments` random times (per keys each), each batch looked
    up `past` windows after it was added (1.0: at the end of its window),
    the clock only moving forward. Returns (keys looked up, keys found)."""
    clock = FakeClock()
    w = WindowedBloomFilter(moments * per, error_rate, window=window, generations=generations, clock=clock)
    times = np.sort(rng.uniform(0, 20 * window, moments))
    events = [(float(t), 0, i) for i, t in enumerate(times)] + [(float(t) + past * window, 1, i)
                                                                for i, t in enumerate(times)]
    events.sort()
    found = 0
    for t, kind, i in events:
        clock.t = t
        keys = np.arange(i * per, (i + 1) * per, dtype=np.uint64)
        if kind == 0:
            w.add_many(keys)
        else:
            found += int(w.contains_many(keys).sum())
    return moments * per, found


# ---- the window ---------------------------------------------------------------


@pytest.mark.parametrize("generations", [1, 2, 4, 8])
@pytest.mark.parametrize("past", [0.0, 0.5, 0.999, 1.0])
def test_every_key_is_seen_through_its_window(generations: int, past: float, rng: np.random.Generator) -> None:
    n, found = events_run(generations, past, rng)
    assert found == n


@pytest.mark.parametrize("generations", [2, 4, 8])
def test_a_quarter_window_past_its_window(generations: int, rng: np.random.Generator) -> None:
    """A key added at a uniform phase of its slice (span s = window / G) is
    still seen d past its window with probability max(0, 1 - d / s): at
    d = window / 4 that is 1/2 for G = 2 and 0 (false positives only) for
    G >= 4."""
    n, found = events_run(generations, 1.25, rng)
    expected = max(0.0, 1 - generations / 4)
    if expected == 0:
        assert found <= fp_bound(n, 0.001)
        assert found / n <= 0.02  # the target: at most 2% still seen a quarter window past
    else:
        # 2000 moments of 5 keys: the fraction is an average over moments.
        assert abs(found / n - expected) <= 5 * math.sqrt(expected * (1 - expected) / 2000)


@pytest.mark.parametrize("generations", [1, 2, 4, 8])
def test_every_key_is_gone_by_window_plus_one_slice(generations: int, rng: np.random.Generator) -> None:
    n, found = events_run(generations, 1 + 1 / generations + 1e-9, rng)
    assert found <= fp_bound(n, 0.001)


@pytest.mark.parametrize("generations", [2, 4])
def test_fp_rate_over_a_full_set_of_live_generations(layout: str, generations: int) -> None:
    """Every one of the G + 1 live generations filled to capacity: the
    measured rate is within 1.2x error_rate, and above what one generation
    alone would give (so every generation is looked up)."""
    capacity, rate = 20_000, 0.01
    clock = FakeClock()
    w = WindowedBloomFilter(capacity, rate, window=100.0, generations=generations, clock=clock, layout=layout, seed=7)
    span = 100.0 / generations
    for g in range(generations + 1):
        clock.t = g * span + span / 2
        keys = np.arange(g * capacity, (g + 1) * capacity, dtype=np.uint64)
        assert w.add_many(keys).sum() >= capacity * (1 - rate)
    assert len(w.live_generations) == generations + 1
    absent = np.arange(1_000_000, dtype=np.uint64) + np.uint64(2**40)
    measured = float(w.contains_many(absent).mean())
    assert measured <= 1.2 * rate
    assert measured > 2 * w.generation_error_rate  # the compound of G + 1 generations, not one
    assert w.expected_fp_rate <= 1.2 * rate


def test_numpy_numbers_are_taken() -> None:
    w = WindowedBloomFilter(np.int64(100), np.float32(0.01), window=np.int64(60), generations=np.int8(3))
    assert (w.capacity, w.window, w.generations) == (100, 60.0, 3) and type(w.generations) is int


def test_generation_rate_compounds_to_error_rate() -> None:
    for g in (1, 2, 4, 8, 64):
        w = WindowedBloomFilter(100, 0.01, window=60, generations=g)
        p = w.generation_error_rate
        assert 1 - (1 - p) ** (g + 1) == pytest.approx(0.01, rel=1e-9)
        assert w.nbytes == (g + 1) * BloomFilter(100, p).nbytes


# ---- adds --------------------------------------------------------------------------


def test_refresh_restarts_a_key_window_and_refresh_false_does_not() -> None:
    clock = FakeClock()
    on = WindowedBloomFilter(100, 0.001, window=100, clock=clock)
    off = WindowedBloomFilter(100, 0.001, window=100, clock=clock)
    assert on.add("k") and off.add("k", refresh=False)
    clock.t = 90.0
    assert not on.add("k")  # seen: not new, but its window starts again
    assert not off.add("k", refresh=False)  # seen: left where it is
    clock.t = 180.0  # past the first add's window + window / 4, within the refreshed one
    assert "k" in on
    assert "k" not in off
    assert off.add("k", refresh=False)  # new again
    assert off.add_many(["k", "j"], refresh=False).tolist() == [False, True]


def test_a_generation_started_after_a_lookup_is_seen_by_the_next_lookup() -> None:
    """Lookups keep the live generations per generation number: starting
    one (the first add of a slice), expiring and clearing change them."""
    clock = FakeClock(10.0)
    w = WindowedBloomFilter(100, 0.001, window=100, clock=clock)
    assert "a" not in w and not w.contains_many(["a"]).any()  # generation 0 not started yet
    w.add("a")
    assert "a" in w and w.contains_many(["a"]).all()
    clock.t = 30.0
    assert "b" not in w
    assert w.add_many(["b"]).all() and "b" in w and "a" in w
    w.clear()
    assert "a" not in w and "b" not in w
    clock.t = 1000.0
    w.add("c")
    clock.t = 1030.0
    assert "c" in w and [g for g, _ in w.live_generations] == [40]


def test_clock_going_back_adds_to_the_newest_generation() -> None:
    clock = FakeClock(500.0)
    w = WindowedBloomFilter(100, 0.001, window=100, clock=clock)
    w.add("a")
    clock.t = 400.0  # an NTP step back
    w.add("b")
    assert w.current_generation == 20
    clock.t = 500.0 + 100.0
    assert "a" in w and "b" in w


@pytest.mark.parametrize("glitch", ["a lookup", "an add"])
def test_a_clock_back_by_more_than_a_window_after_a_reading_ahead_is_refused(glitch: str) -> None:
    """One reading ten years ahead moves the filter on (the current
    generation never goes back); the clock back, every call is refused,
    saying so, not answered: a key added a moment before would read new,
    and one added now seen for ten years. Through the single-key cursor
    (armed at the reading ahead) and the batches alike; back by a window at
    most goes on, adding to the newest generation."""
    t0 = 1_700_000_000.0
    clock = FakeClock(t0)
    w = WindowedBloomFilter(1000, 0.01, window=3600, clock=clock)
    assert w.add("before") and "before" in w
    clock.t = t0 + 10 * 365 * 86400
    assert ("before" in w) is False if glitch == "a lookup" else w.add("then")  # (by this clock: 10 years on)
    assert "then" in w or glitch == "a lookup"  # (the cursor armed at the reading ahead)
    ahead = w.current_generation
    clock.t = t0 + 10
    behind = (rf"this clock reads generation {math.floor(clock.t / 900)}, {ahead - math.floor(clock.t / 900)} "
              rf"generations \(.* s\) behind generation {ahead}, which this filter has seen")
    for call in (lambda: "before" in w, lambda: w.add("page"), lambda: w.add_many(["page"]),
                 lambda: w.contains_many(["before"])):
        with pytest.raises(ValueError, match=behind):
            call()
    # Reads of its state answer as of its newest generation (counts, repr, ==, exports), so that its keys can be
    # kept and read again on the clock that ran ahead.
    assert w.current_generation == ahead and "live=" in repr(w) and w == w.copy()
    back = WindowedBloomFilter.from_bytes(w.to_bytes(), clock=lambda: ahead * 900.0)
    assert back == w and back.current_generation == ahead and back.approx_count == w.approx_count
    clock.t = ahead * 900.0 - 3600  # a window back: goes on, adding to the newest generation
    assert w.add("page") and "page" in w and w.current_generation == ahead


class StalledOnce(FakeClock):
    """A clock whose next reading, once set, is one taken before a stall."""

    stale: Any = None

    def __call__(self) -> float:
        if self.stale is not None:
            t, self.stale = self.stale, None
            return float(t)
        return self.t


@pytest.mark.parametrize("call", ["in", "add", "add_many", "contains_many"])
def test_a_reading_taken_before_a_stall_is_taken_again_not_refused(call: str) -> None:
    """A thread that read the clock and then stalled while others moved the
    filter on by more than a window holds a reading a window behind: it is
    read again before any refusal (ordinary concurrency, not a clock gone
    back), through the single-key cursor and the batches alike."""
    clock = StalledOnce(0.0)
    w = WindowedBloomFilter(100, 0.01, window=100, clock=clock)
    assert w.add("a")
    clock.t = 1000.0  # generation 40
    assert w.add("b") and "b" in w
    clock.stale = 0.0  # (generation 0: 40 behind)
    got = {"in": lambda: "b" in w, "add": lambda: not w.add("b"), "add_many": lambda: not w.add_many(["b"])[0],
           "contains_many": lambda: w.contains_many(["b"])[0]}[call]()
    assert got and clock.stale is None and w.current_generation == 40


def test_a_shared_file_moved_on_by_a_reading_ahead_is_refused_by_every_handle(tmp_path: Any) -> None:
    """A writer whose clock jumped ten years ahead starts a generation in the
    file; a reader whose clock is right is refused (a key added five seconds
    before would read new, and one added now seen for ten years), and so is
    the writer once its clock is back."""
    t0 = 1_700_000_000.0
    path = tmp_path / "w.blf"
    WindowedBloomFilter(1000, 0.01, window=3600, clock=lambda: t0).save(path, shared=True)
    glitchy, right = FakeClock(t0), FakeClock(t0)
    with WindowedBloomFilter.open(path, "r+", clock=glitchy) as a, WindowedBloomFilter.open(path, "r",
                                                                                           clock=right) as b:
        assert a.add("page-1") and "page-1" in b
        glitchy.t = t0 + 10 * 365 * 86400
        assert a.add("page-2")
        right.t = glitchy.t = t0 + 5
        for handle in (b, a):
            with pytest.raises(ValueError, match=r"behind generation \d+, which its shared file has seen"):
                "page-1" in handle
        with pytest.raises(ValueError, match=r"which its shared file has seen"):
            a.add("page-3")


def test_add_many_answers_equal_a_loop_of_add(rng: np.random.Generator) -> None:
    for refresh in (True, False):
        clock = FakeClock()
        batch = WindowedBloomFilter(2000, 0.01, window=100, clock=clock)
        loop = WindowedBloomFilter(2000, 0.01, window=100, clock=clock)
        for step in range(40):
            clock.t = step * 7.3
            keys = rng.integers(0, 600, 50)  # repeats within and across batches
            got = batch.add_many(keys, refresh=refresh)
            want = [loop.add(int(k), refresh=refresh) for k in keys]
            assert got.tolist() == want
            assert batch == loop
        assert batch.contains_many(range(600)).tolist() == [k in loop for k in range(600)]


def input_kinds() -> list[tuple[str, Any, list[Any]]]:
    """(name, a batch, the same keys as scalars)."""
    pa = pytest.importorskip("pyarrow")
    words = [f"w{i}" for i in range(300)]
    ints = list(range(300))
    return [
        ("list of str", words, words),
        ("list of bytes", [w.encode() for w in words], words),
        ("tuple", tuple(words), words),
        ("generator", (w for w in words), words),
        ("int64 array", np.arange(300, dtype=np.int64), ints),
        ("uint32 array", np.arange(300, dtype=np.uint32), ints),
        ("S array", np.array([w.encode() for w in words]), words),
        ("U array", np.array(words), words),
        ("arrow strings", pa.array(words), words),
        ("arrow chunked", pa.chunked_array([words[:100], words[100:]]), words),
        ("arrow ints", pa.array(ints, type=pa.int64()), ints),
        ("hash array", bloomline.hash_many(words, 3), words),  # (hashed with the filter's seed)
    ]


@pytest.mark.parametrize("kind", [k[0] for k in input_kinds()])
def test_every_input_kind(kind: str) -> None:
    _, batch, scalars = next(k for k in input_kinds() if k[0] == kind)
    clock = FakeClock()
    w = WindowedBloomFilter(1000, 0.001, window=100, clock=clock, seed=3)
    ref = WindowedBloomFilter(1000, 0.001, window=100, clock=clock, seed=3)
    assert w.add_many(batch).tolist() == [ref.add(k) for k in scalars]
    _, batch, _ = next(k for k in input_kinds() if k[0] == kind)  # (a generator is spent)
    clock.t = 50.0
    assert w.contains_many(batch).all()
    assert all(k in w for k in scalars)
    assert w == ref


def test_nulls_skip_and_raise() -> None:
    pa = pytest.importorskip("pyarrow")
    w = WindowedBloomFilter(100, 0.001, window=100, clock=FakeClock())
    with pytest.raises(ValueError, match="null"):
        w.add_many(["a", None])
    assert w.add_many(["a", None, "b"], nulls="skip").tolist() == [True, False, True]
    assert w.contains_many(pa.array(["a", None, "c"]), nulls="skip").tolist() == [True, False, False]


def test_threads_give_the_same_answers(rng: np.random.Generator) -> None:
    clock = FakeClock()
    one = WindowedBloomFilter(400_000, 0.01, window=100, clock=clock)
    four = WindowedBloomFilter(400_000, 0.01, window=100, clock=clock)
    for step in range(3):
        clock.t = step * 30.0
        keys = rng.integers(0, 2**40, 200_000, dtype=np.uint64)
        keys[::10] = keys[1::10]  # repeats
        assert (one.add_many(keys) == four.add_many(keys, threads=4)).all()
    probe = rng.integers(0, 2**40, 200_000, dtype=np.uint64)
    assert (one.contains_many(probe) == four.contains_many(probe, threads=4)).all()
    assert one == four
    clock.t = 100.0  # update(threads=) as add_many's: a new generation, refreshes in the older ones
    one.add_many(keys[::2])
    four.update(keys[::2], threads=4)
    assert one == four and one.to_bytes() == four.to_bytes()
    # threads= is checked as the core's batch calls check it, before anything is added.
    calls: list[Callable[[Any], object]] = [lambda t: four.add_many(keys[:5], threads=t),
                                            lambda t: four.contains_many(keys[:5], threads=t),
                                            lambda t: four.update(keys[:5], threads=t), lambda t: four.update(threads=t)]
    for bad, error in ((True, TypeError), (1.0, TypeError), (-1, ValueError), (1025, ValueError)):
        for call in calls:
            with pytest.raises(error, match="threads"):
                call(bad)
    assert one == four


def test_threads_adding_across_generation_changes_lose_nothing() -> None:
    """Four threads add disjoint keys while the clock moves through
    generations 0 to 4 (all still live at the end): every key is present."""
    import threading

    clock = FakeClock()
    # (room for every key in one generation: the current one never goes back, so a thread
    # that runs ahead takes the others' adds into its generation)
    w = WindowedBloomFilter(240_000, 0.001, window=100, clock=clock)
    errors: list[BaseException] = []

    def adder(k: int) -> None:
        try:
            for step in range(60):
                clock.t = step * 2.0  # (the threads move the clock: a new generation every 12.5 steps)
                w.add_many(np.arange(1000, dtype=np.uint64) + np.uint64((k * 60 + step) * 1000))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=adder, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and w.current_generation == 4
    keys = np.arange(240 * 1000, dtype=np.uint64)
    assert w.contains_many(keys).all()  # all added within generations 0..4: none expired


@pytest.mark.parametrize("call", ["add_many", "live_generations"])
def test_a_thread_that_waited_past_its_generation_clears_no_newer_one(call: str) -> None:
    """A thread reads the clock (generation 0), then waits (preempted, the
    process stopped) while another thread moves on to generation 5, which
    takes generation 0's place in the ring, and adds there. The waiting
    thread must not then clear that place as its own generation 0: the
    other thread's key stays seen, and so does the waiting thread's. (A
    single `add` reads the clock in the cursor, which answers only for the
    ring it was armed with, and else takes add_many's way.)"""
    import threading

    clock = FakeClock()
    w = WindowedBloomFilter(1000, 0.01, window=4.0, generations=4, clock=clock)  # a slice of 1 s; 5 places
    w.add_many(["early"])  # generation 0 started
    reading = w._now

    def waits(*args: Any, **kwargs: Any) -> int:
        g = reading(*args, **kwargs)
        if threading.current_thread().name == "waiting" and clock.t == 0:
            clock.t = 5.0  # meanwhile: generation 5, in generation 0's place
            other = threading.Thread(target=lambda: w.add_many(["theirs"]))
            other.start()
            other.join()
        return g

    w._now = waits  # type: ignore[method-assign]
    act = {"add_many": lambda: w.add_many(["mine"]), "live_generations": lambda: w.live_generations}[call]
    waiting = threading.Thread(target=act, name="waiting")
    waiting.start()
    waiting.join()
    assert w.current_generation == 5 and clock.t == 5.0
    assert "theirs" in w
    if call != "live_generations":
        assert "mine" in w
    assert [g for g, _ in w.live_generations] == [5]


@pytest.mark.parametrize(("later", "expire"), [(6.0, False), (9.0, True), (12.0, True)])
def test_an_add_that_waited_while_newer_generations_began_adds_to_the_newest(later: float, expire: bool) -> None:
    """A thread reads the clock (generation 0), then waits while another
    thread adds at a later time that skips generation 0's place (6: its
    place still holds 0, expired; 9 and 12: generation 0 expired and its
    place emptied, by a read of the live generations). The waiting add once
    went to the expired generation 0 (or started it again): it said new,
    and the key was gone at once. It goes to the newest generation: seen
    after, and not new again."""
    import threading

    clock = FakeClock()
    w = WindowedBloomFilter(1000, 0.01, window=4.0, generations=4, clock=clock)  # a slice of 1 s; 5 places
    w.add_many(["early"])
    reading = w._now

    def waits(*args: Any, **kwargs: Any) -> int:
        g = reading(*args, **kwargs)
        if threading.current_thread().name == "waiting" and clock.t == 0:
            clock.t = later
            other = threading.Thread(target=lambda: (w.add_many(["theirs"]), expire and w.live_generations))
            other.start()
            other.join()
            assert (w._numbers[0] is None) == expire
        return g

    w._now = waits  # type: ignore[method-assign]
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(w.add_many(["mine"])), name="waiting")
    waiting.start()
    waiting.join()
    del w._now
    assert answers[0].tolist() == [True]
    assert w.current_generation == int(later)
    assert "mine" in w and "theirs" in w and "early" not in w
    assert not w.add("mine")
    assert [g for g, _ in w.live_generations] == [int(later)]


@pytest.mark.skipif(bloomline.file_locks == "flock", reason="this build takes one writer per file")
def test_an_add_to_a_shared_ring_that_waited_while_another_handle_moved_on_adds_to_the_newest(tmp_path: Any) -> None:
    """The same across handles of a mapped ring: handle A reads generation
    0, then waits while handle B adds at generation 6 (generation 0's
    place untouched, expired). A's add goes to generation 6, seen by both
    handles (the file's start finds the ring's newest under its lock)."""
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(1000, 0.01, window=4.0, generations=4, clock=lambda: 0.0).save(path, shared=True)
    ta, tb = FakeClock(), FakeClock()
    tb.t = 6.0
    with WindowedBloomFilter.open(path, "r+", clock=ta) as a, WindowedBloomFilter.open(path, "r+", clock=tb) as b:
        a.add("early")
        reading = a._now
        fired: list[bool] = []

        def waits(*args: Any, **kwargs: Any) -> int:
            g = reading(*args, **kwargs)
            if not fired:
                fired.append(True)
                ta.t = 6.0
                b.add("theirs")
            return g

        a._now = waits  # type: ignore[method-assign]
        assert a.add_many(["mine"]).tolist() == [True]
        del a._now
        assert a.current_generation == b.current_generation == 6
        assert "mine" in a and "mine" in b and "theirs" in a
        assert not b.add("mine")
        # A start asked for after the ring moved on (a handle that read the
        # file before another process did) starts nothing: the newest is the one.
        numbers = a._shared.file.numbers()  # type: ignore[union-attr]
        assert a._shared.file.start(0, 0) == 6 and a._shared.file.numbers() == numbers  # type: ignore[union-attr]


def test_bits_an_add_in_flight_sets_after_a_clear_never_show_in_a_later_generation() -> None:
    """Adds take no lock: an add of another thread that already holds the
    current generation can set its bits just after clear() emptied that
    place. The next generation started there (a ring later) must start on
    none of them: they read as seen a whole ring past their window. (The
    add in flight is played here by its last step, the generation's own
    add_many, after the clear.)"""
    clock = FakeClock()
    w = WindowedBloomFilter(1000, 0.01, window=4.0, generations=4, clock=clock)  # a slice of 1 s; 5 places
    assert w.add("before")
    in_flight = w._ring[0]  # generation 0's place, as the other thread's add holds it
    w.clear()
    in_flight.add_many([f"late{i}" for i in range(100)])
    assert not w.contains_many([f"late{i}" for i in range(100)]).any() and "before" not in w
    clock.t = 5.0  # generation 5: generation 0's place again
    assert w.add("x") is True
    assert not w.contains_many([f"late{i}" for i in range(100)]).any()
    assert [g for g, _ in w.live_generations] == [5] and w.approx_count == pytest.approx(1, abs=0.1)


def test_lines() -> None:
    w = WindowedBloomFilter(100, 0.001, window=100, clock=FakeClock())
    assert w.add_lines(b"a\nb\na\n").tolist() == [True, True, False]
    assert w.contains_lines(b"a\nc\n").tolist() == [True, False]
    assert "a" in w


# ---- facts ------------------------------------------------------------------------


def test_facts_bool_repr_clear_copy() -> None:
    clock = FakeClock()
    w = WindowedBloomFilter(1000, 0.01, window=datetime.timedelta(minutes=10), generations=5, clock=clock)
    assert not w and w.window == 600.0 and w.generations == 5 and w.capacity == 1000 and w.error_rate == 0.01
    assert w.approx_count == 0.0 and w.expected_fp_rate == 0.0
    w.update(range(300))
    clock.t = 200.0
    w.update(range(200, 500))
    assert w and 480 <= w.approx_count <= 520  # the union: refreshed keys count once
    gens = [f for _, f in w.live_generations]
    union = gens[0] | gens[1]
    assert w.approx_count == union.approx_count  # (read chunk by chunk through the buffers, no copy)
    assert 0 < w.fill_ratio < 1
    assert w.num_bits == 6 * w.live_generations[0][1].num_bits
    assert "WindowedBloomFilter" in repr(w) and "window=600s" in repr(w) and "generations=5" in repr(w)
    c = w.copy()
    assert c == w and c.clock is clock
    c.add("x")
    assert c != w and "x" not in w
    assert isinstance(w, bloomline.Filter)
    assert "<table>" in w._repr_html_()
    assert f"approx_count={w.approx_count:.0f}" in repr(w)
    with pytest.warns(CapacityWarning):
        w.update(range(1000, 200_000))  # (200 times its capacity: a generation with every bit set)
    assert w.approx_count == math.inf and "approx_count=inf" in repr(w) and "<table>" in w._repr_html_()
    w.clear()
    assert not w and 0 not in w
    with pytest.raises(TypeError):
        hash(w)
    with pytest.raises(TypeError, match="iterables of keys"):
        w.update(c)  # type: ignore[arg-type]


def test_capacity_warning_names_the_generation() -> None:
    clock = FakeClock(250.0)
    w = WindowedBloomFilter(100, 0.01, window=100, clock=clock)
    w.add_many(range(100))  # exactly at capacity: no warning (pytest makes any warning an error)
    with pytest.warns(CapacityWarning, match=r"generation 10 .* 101 new keys, past its capacity of 100") as got:
        w.add_many(range(100, 101))
    assert len(got) == 1  # ours only, not the generation's own BloomFilter warning as well
    w.add_many(range(101, 200))  # once per generation
    clock.t = 275.0
    w.add_many(range(1000, 1100))
    with pytest.warns(CapacityWarning, match="generation 11 "):
        w.add("one more")


def test_a_2d_batch_past_capacity_warns_on_the_add_that_crosses_it() -> None:
    # Its size was len(keys), the rows (2): the add of 1,000 keys into a
    # generation of capacity 100 went without the warning.
    w = WindowedBloomFilter(100, 0.01, window=3600, clock=FakeClock(10.0))
    with pytest.warns(CapacityWarning, match="generation 0 .*past its capacity of 100"):
        w.add_many(np.arange(1000, dtype=np.uint64).reshape(2, 500))


def test_adds_past_capacity_on_several_threads_warn_each_time_and_leave_the_warning_filters_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The windowed filter (and DedupQueue) gave a generation's warning in
    place of its filter's own under warnings.catch_warnings, which swaps
    the filters of the whole process: threads leaving it out of order left
    CapacityWarning ignored everywhere, for good, and warnings given on
    other threads meanwhile were lost. Every filter here warns once."""
    import threading
    import warnings

    from bloomline import DedupQueue

    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *a, **k: shown.append(str(message)))
    steps, threads = 60, 4
    with warnings.catch_warnings():
        warnings.simplefilter("always", CapacityWarning)
        before = list(warnings.filters)

        def work(seed: int) -> None:
            rng = np.random.default_rng(seed)
            for step in range(steps):
                w = WindowedBloomFilter(1000, 0.01, window=100, clock=FakeClock(step * 1000.0))
                w.add_many(rng.integers(0, 2**63, 40_000, dtype=np.uint64), threads=1 + step % 2)
                q = DedupQueue(BloomFilter(100, 0.01))
                q.push_many(rng.integers(0, 2**63, 300, dtype=np.uint64).tolist())

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=120)
        assert warnings.filters == before
    assert sum("generation" in m for m in shown) == steps * threads  # one a windowed filter
    assert sum(m.startswith("BloomFilter has taken") for m in shown) == steps * threads  # one a queue


def test_a_threaded_batch_that_fails_leaves_what_one_thread_leaves() -> None:
    """The threaded batch read its keys before the clock, the one-thread
    batch after: a bad key left a generation started by one and not the
    other (their bytes differed)."""
    for call in ("add_many", "contains_many"):
        made = []
        for threads in (1, 2):
            w = WindowedBloomFilter(1000, 0.01, window=100, clock=FakeClock(500.0))
            with pytest.raises(ValueError, match=r"keys\[1\] is null"):
                getattr(w, call)(["a", None, "b"], threads=threads)
            made.append(w.to_bytes())
        assert made[0] == made[1], call


def test_a_threaded_batchs_capacity_warning_points_at_the_callers_line() -> None:
    """Its warning named windowed.py (one frame too shallow) where the
    one-thread batch's names the caller."""
    for threads in (1, 2):
        w = WindowedBloomFilter(100, 0.01, window=100, clock=FakeClock(250.0))
        with pytest.warns(CapacityWarning) as got:
            w.add_many(range(200), threads=threads)
        with pytest.warns(CapacityWarning) as lines:
            w2 = WindowedBloomFilter(100, 0.01, window=100, clock=FakeClock(250.0))
            w2.add_lines(b"\n".join(str(i).encode() for i in range(200)), threads=threads)
        assert [r.filename for r in (*got, *lines)] == [__file__, __file__], threads


# ---- bad parameters -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"window": -1}, ValueError, "window must be a positive number of seconds or a timedelta, got -1"),
        ({"window": 0}, ValueError, "window .* got 0"),
        ({"window": float("nan")}, ValueError, "window .* got nan"),
        ({"window": float("inf")}, ValueError, "window .* got inf"),
        ({"window": datetime.timedelta(0)}, ValueError, "window .* got datetime.timedelta"),
        ({"window": 1e-4}, ValueError, "window must be at least 0.001 s, got 0.0001"),
        ({"window": True}, TypeError, r"window .* got bool \(True\)"),
        ({"window": "7d"}, TypeError, r"window .* got str \('7d'\)"),
        ({"window": 60, "generations": 0}, ValueError, r"generations must be in \[1, 64\], got 0"),
        ({"window": 60, "generations": 65}, ValueError, "generations .* got 65"),
        ({"window": 60, "generations": 2.0}, TypeError, r"generations must be an int, got float \(2.0\)"),
        ({"window": 60, "generations": True}, TypeError, "generations must be an int, got bool"),
        ({"window": 60, "error_rate": 0}, ValueError, r"error_rate must be in \(0, 1\), got 0"),
        ({"window": 60, "error_rate": 1.0}, ValueError, "error_rate .* got 1.0"),
        ({"window": 60, "error_rate": float("nan")}, ValueError, "error_rate .* got nan"),
        ({"window": 60, "error_rate": "0.1"}, TypeError, "error_rate must be a float, got str"),
        ({"window": 60, "error_rate": 1e-300}, ValueError, r"error_rate 1e-300 is too small for 4 generations: each of "
                                                           r"the 5 live ones would be sized for 2e-301"),
        ({"window": 60, "error_rate": 5e-324}, ValueError, r"error_rate 5e-324 is too small for 4 generations"),
        ({"window": 60, "capacity": 0}, ValueError, "capacity must be in .* got 0"),
        ({"window": 60, "capacity": 1.5}, ValueError, "capacity must be a whole number .* got 1.5"),
        ({"window": 60, "layout": "odd"}, ValueError, "layout"),
        ({"window": 60, "seed": -1}, (ValueError, OverflowError), "seed"),
        ({"window": 60, "clock": 5}, TypeError, r"clock must be a callable returning seconds, got int \(5\)"),
        ({"window": 10**400}, ValueError, r"window must be a positive number of seconds or a timedelta, got an int of "
                                          r"401 digits \(past a float's range\)"),
    ],
)
def test_bad_parameters(kwargs: dict[str, Any], error: Any, message: str) -> None:
    args = {"capacity": 100, "error_rate": 0.01, **kwargs}
    with pytest.raises(error, match=message):
        WindowedBloomFilter(**args)


@pytest.mark.parametrize("t", [float("nan"), float("inf"), None, 1e300, -(2.0**63) * 15])
def test_bad_clock_values(t: Any) -> None:
    """Readings that give no generation number; and -2**63, which marks a
    ring file's place as empty (a generation numbered so was dropped by the
    ring form's save; -2**63 + 1, a place being started, is refused alike)."""
    w = WindowedBloomFilter(100, 0.01, window=60, clock=lambda: t)
    with pytest.raises(ValueError, match="clock"):
        w.add("a")


@pytest.mark.parametrize("refresh", ["no", None, 2, 1.0])
def test_refresh_must_be_true_or_false(refresh: Any) -> None:
    """refresh='no' was taken as True by a threaded add_many, None as False,
    and add and add_many on one thread raised pybind11's message."""
    w = WindowedBloomFilter(100, 0.01, window=60, clock=lambda: 0.0)
    message = rf"refresh must be True or False, got {type(refresh).__name__} \({refresh!r}\)"
    for call in (lambda: w.add("a", refresh=refresh), lambda: w.add_many(["a"], refresh=refresh),
                 lambda: w.add_many(["a"], refresh=refresh, threads=2)):
        with pytest.raises(TypeError, match=message):
            call()
    assert not w and w.add("a", refresh=np.bool_(False)) and not w.add_many(["a"], refresh=np.True_)[0]


# ---- bytes, files, pickle ----------------------------------------------------------


def three_generations(clock: FakeClock, **kwargs: Any) -> WindowedBloomFilter:
    """Keys 0-99 at 10 s, 100-199 at 35 s, 200-299 at 60 s (window 100 s,
    4 generations of 25 s: generations 0, 1 and 2)."""
    w = WindowedBloomFilter(1000, 0.01, window=100, clock=clock, **kwargs)
    for i, t in enumerate((10.0, 35.0, 60.0)):
        clock.t = t
        w.add_many(range(100 * i, 100 * i + 100))
    return w


def test_bytes_round_trip_keeps_answers_and_clock_state(layout: str) -> None:
    clock = FakeClock()
    w = three_generations(clock, layout=layout, seed=11)
    data = w.to_bytes()
    h = bloomline.read_header(data)
    assert (h["kind"], h["window"], h["generations"], h["num_slots"], h["capacity"], h["insert_count"]) == \
        ("WindowedBloomFilter", 100.0, 4, 3, 1000, w.live_generations[0][1].insert_count * 3)
    back = WindowedBloomFilter.from_bytes(data, clock=clock)
    assert back == w and back.layout == layout and back.seed == 11
    assert [g for g, _ in back.live_generations] == [0, 1, 2]
    assert back.contains_many(range(400)).tolist() == w.contains_many(range(400)).tolist()
    clock.t = 130.0  # generation 5: generation 0 expired, in both
    assert [g for g, _ in back.live_generations] == [1, 2]
    assert not back.contains_many(range(100)).any() and back.contains_many(range(100, 300)).all()
    assert back == w
    assert back.add(5) and w.add(5)  # new again in both, into generation 5
    assert back == w


def test_save_load_at_a_later_clock_drops_expired_generations(tmp_path: Any) -> None:
    clock = FakeClock()
    w = three_generations(clock)
    w.save(tmp_path / "w.blf")
    later = FakeClock(160.0)  # generation 6: generations 0 and 1 expired
    back = WindowedBloomFilter.load(tmp_path / "w.blf", clock=later)
    assert [g for g, _ in back.live_generations] == [2]
    assert back.contains_many(range(200, 300)).all()
    assert back.contains_many(range(200)).sum() <= fp_bound(200, 0.01)
    back.save(tmp_path / "w.blf")
    assert bloomline.read_header((tmp_path / "w.blf").read_bytes())["num_slots"] == 1
    assert not list(tmp_path.glob("*.tmp-*"))
    # An earlier clock: nothing expires, and adds go to the newest generation stored (it never goes back).
    same = WindowedBloomFilter.load(tmp_path / "w.blf", clock=FakeClock(10.0))
    assert same.current_generation == 2 and same.contains_many(range(200, 300)).all()
    WindowedBloomFilter(10, window=60).save(tmp_path / "now.blf")  # (the system clock's: bloomline.from_bytes reads on it)
    assert isinstance(bloomline.from_bytes((tmp_path / "now.blf").read_bytes()), WindowedBloomFilter)


def test_a_filter_saved_more_than_a_window_ahead_of_the_clock_is_refused(tmp_path: Any) -> None:
    """Saved by a clock that ran ahead: read with one behind it by more than
    a window, its keys would read seen until that clock caught up (the
    current generation never goes back), so load and from_bytes refuse it,
    saying so; within a window (a clock stepped back) it is read. A copy of
    a filter ahead of its own clock is a copy."""
    clock = FakeClock(1000.0)  # generation 40 (window 100 s, 4 generations)
    w = WindowedBloomFilter(1000, 0.01, window=100, clock=clock)
    w.add("a")
    w.save(tmp_path / "w.blf")
    for t, ahead in ((899.0, 5), (0.0, 40)):
        message = rf"holds generation 40, {ahead} generations \({ahead * 25:g} s\) ahead of this clock's \({40 - ahead}\)"
        with pytest.raises(ValueError, match=message):
            WindowedBloomFilter.load(tmp_path / "w.blf", clock=FakeClock(t))
        with pytest.raises(ValueError, match=message):
            WindowedBloomFilter.from_bytes(w.to_bytes(), clock=FakeClock(t))
    back = WindowedBloomFilter.load(tmp_path / "w.blf", clock=FakeClock(900.0))  # 4 generations ahead: read
    assert "a" in back and back.current_generation == 40
    clock.t = 900.0  # (its own clock stepped back by 4 generations: the filter goes on, and so does its copy)
    assert "a" in w and "a" in w.copy() and w.copy().current_generation == 40
    clock.t = 0.0  # (by 40: refused alike, the filter and its copy)
    behind = r"this clock reads generation 0, 40 generations \(1000 s\) behind generation 40, which this filter has seen"
    copied = w.copy()
    for call in (lambda: "a" in w, lambda: "a" in copied, lambda: w.add("b"), lambda: copied.add_many(["b"])):
        with pytest.raises(ValueError, match=behind):
            call()


@pytest.mark.parametrize("protocol", range(6))
def test_pickle_copy_deepcopy(protocol: int) -> None:
    import copy
    import pickle

    w = WindowedBloomFilter(1000, 0.01, window=3600, generations=3, seed=2)  # the system clock: pickles carry none
    w.update(range(500))
    back = pickle.loads(pickle.dumps(w, protocol=protocol))
    assert isinstance(back, WindowedBloomFilter) and back == w and back.generations == 3
    assert back.contains_many(range(500)).all()
    d = copy.deepcopy(w)
    d.add("only in the copy")
    assert d != w and "only in the copy" not in w


def test_a_filter_on_a_clock_of_its_own_is_refused_where_read_on_the_system_clock(tmp_path: Any) -> None:
    """A filter on a clock of its own (time.monotonic's seconds since boot, a
    test's), pickled, or read by load or from_bytes without clock=: on the
    system clock every key would read expired, without a word, so the read is
    refused, saying so. Given its clock, it is read; one with no generation
    yet has nothing to lose."""
    import pickle

    clock = FakeClock(50_000.0)  # (about 14 hours after its zero, as time.monotonic on a machine up that long)
    w = WindowedBloomFilter(1000, 0.01, window=7 * 86400, clock=clock)
    assert isinstance(pickle.loads(pickle.dumps(w)), WindowedBloomFilter)
    w.add("https://example.com/")
    w.save(tmp_path / "w.blf")
    other = (r"holds generation 0, whose slice ended 151200 s after its clock's zero \(before 2001\): it was saved "
             r"on a clock of its own")
    for read in (lambda: pickle.loads(pickle.dumps(w)), lambda: WindowedBloomFilter.load(tmp_path / "w.blf"),
                 lambda: WindowedBloomFilter.from_bytes(w.to_bytes()), lambda: bloomline.from_bytes(w.to_bytes())):
        with pytest.raises(ValueError, match=other):
            read()
    assert "https://example.com/" in WindowedBloomFilter.load(tmp_path / "w.blf", clock=clock)
    w.save(tmp_path / "ring.blf", shared=True)  # (mapped without clock=: refused alike, and the file left as it was)
    for mode in ("r", "r+"):
        with pytest.raises(ValueError, match=other):
            WindowedBloomFilter.open(tmp_path / "ring.blf", mode)
    with WindowedBloomFilter.open(tmp_path / "ring.blf", "r+", clock=clock) as mapped:
        assert "https://example.com/" in mapped and mapped.current_generation == 0


def _damaged(w: WindowedBloomFilter, **change: Any) -> bytes:
    """w's bytes re-encoded by the core with one part changed: a writer
    that got something wrong (each part is signed, so only the reader's
    own checks can catch it)."""
    live = w.live_generations
    parts: dict[str, Any] = {
        "filters": [f for _, f in live], "counts": [f.insert_count for _, f in live], "numbers": [g for g, _ in live],
        "capacity": w.capacity, "error_rate": w.error_rate, "generations": w.generations, "window": w.window,
    }
    parts.update(change)
    return bloomline._core.encode_window(parts["capacity"], parts["error_rate"], parts["generations"], parts["window"],
                                         w.layout, w.seed, parts["filters"], parts["counts"], parts["numbers"])


def test_every_part_is_checked() -> None:
    clock = FakeClock()
    w = three_generations(clock)
    f0 = w.live_generations[0][1]
    cases = [
        ({"numbers": [0, 2, 1]}, "generation 2 has number 1, not above 2"),
        ({"numbers": [0, 0, 1]}, "generation 1 has number 0, not above 0"),
        ({"numbers": [0, 1, 5]}, r"generation 0 \(number 0\) is more than 4 older than the newest \(5\)"),
        ({"counts": [100, 100, 10_000]}, "generation 2 count 10000 exceeds its bits set"),
        ({"capacity": 999}, "generation 0 does not match the window's parameters"),
        ({"error_rate": 0.02}, "generation 0 does not match"),
        ({"generations": 3}, "generation 0 does not match"),
        ({"filters": [BloomFilter(1000, 0.01), f0, f0]}, "generation 0 does not match"),
        ({"filters": [BloomFilter(1000, w.generation_error_rate, seed=1), f0, f0]}, "generation 0 does not match"),
        ({"generations": 1, "numbers": [0, 1, 2]}, "keeps at most 2, got 3"),
        ({"window": float("nan")}, "window must be a finite number of seconds >= 0.001, got nan"),
        ({"window": 1e-300}, "window must be .* got 1e-300"),
        ({"window": -5.0}, "window must be .* got -5"),
    ]
    for change, message in cases:
        try:
            data = _damaged(w, **change)
        except ValueError as e:  # refused by the writer already
            assert re.search(message, str(e)), (change, e)
            continue
        with pytest.raises(ValueError, match=message):
            WindowedBloomFilter.from_bytes(data, clock=clock)
    good = w.to_bytes()
    bad = bytearray(good)
    bad[400] ^= 0x10
    with pytest.raises(ValueError, match="checksum mismatch"):
        WindowedBloomFilter.from_bytes(bytes(bad))
    with pytest.raises(ValueError, match="truncated"):
        WindowedBloomFilter.from_bytes(good[:-9])
    with pytest.raises(ValueError, match="this holds a BloomFilter, not a WindowedBloomFilter"):
        WindowedBloomFilter.from_bytes(f0.to_bytes())
    with pytest.raises(ValueError, match="this holds a WindowedBloomFilter: read it with bloomline.from_bytes"):
        bloomline._core.from_bytes(good)
    with pytest.raises(ValueError, match="this holds a WindowedBloomFilter, not a ScalableBloomFilter"):
        bloomline.ScalableBloomFilter.from_bytes(good)


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="the sanitizer's shadow and quarantine are memory of its own")
def test_a_small_input_naming_a_large_ring_commits_no_memory() -> None:
    """136 bytes of a kind-4 filter with no generation stored name a ring of
    65 places sized for 5M keys each (842 MB): its places are mapped lazily,
    and copy, clear, pickle, deepcopy and == touch only the places that hold
    a generation (copy and clear touched every place: a 136-byte pickle
    committed the whole ring). A subprocess, so that its peak memory is its own."""
    script = r"""
import copy, pickle, resource, bloomline
from bloomline import WindowedBloomFilter
data = bloomline._core.encode_window(5_000_000, 0.01, 64, 3600.0, "blocked", 0, [], [], [])
assert len(data) == 136
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # MiB
w = WindowedBloomFilter.from_bytes(data)
before = peak()
c = w.copy()
w.clear()
back = pickle.loads(pickle.dumps(w))
copy.deepcopy(w)
assert back == w == c and w.nbytes > 800_000_000
c.add("one")
print(peak() - before)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 64, f"{out.stdout.strip()} MiB more at peak"
