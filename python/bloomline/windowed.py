"""WindowedBloomFilter: "seen within the last window", for recrawls.

A ring of generations, each a ``BloomFilter`` of the same capacity, layout
and seed (so one hash of a key serves them all). Time is cut into slices of
span ``s = window / G`` (``G = generations``); the generation number of a
moment ``t`` is ``floor(t / s)``, counted from the clock's epoch, so that two
processes, or a filter and its saved file, agree on it. The ring keeps the
``G + 1`` live generations: the current one, ``c``, and the ``G`` before it.

**Window.** A key added at ``t`` goes into generation ``e = floor(t / s)``.
It is seen while ``c <= e + G``, that is while ``t' < (e + G + 1) s``; since
``t < (e + 1) s``, every ``t' <= t + window`` qualifies: a key is seen
through its whole window. It is gone once ``c >= e + G + 1``, that is from
``(e + G + 1) s <= t + window + s`` on: new again (but for false positives)
once ``window + window / G`` has passed. In between, a key added at a
uniformly random phase of its slice is still seen ``d`` past its window
(``0 <= d <= s``) with probability ``1 - d / s``: with 4 generations none is
left a quarter window past (``d = s``), with 2 half of them are, with 8 none.

**False positives.** A lookup asks the ``G + 1`` live generations. Each is
sized for ``capacity`` keys at ``p_g = 1 - (1 - error_rate) ** (1 / (G + 1))``,
so the chance that an absent key hits none of them is at least
``(1 - p_g) ** (G + 1) = 1 - error_rate``: the compound rate is at most
``error_rate`` while every generation is within its capacity. Any slice is
shorter than the window, so it takes at most ``capacity`` distinct keys
(refreshed or not) when ``capacity`` bounds the distinct keys of any window:
one generation never needs more. The cost is memory: ``G + 1`` filters, each
a little larger than one filter at ``error_rate`` (``p_g`` is about
``error_rate / (G + 1)``), all allocated when the filter is made. A
generation that takes more than ``capacity`` new keys warns once
(``CapacityWarning``, naming the generation).

**Adds.** ``add`` puts the key into the current generation and says True
only when no live generation had it (nor an earlier place of the same
batch). By default a key that is seen is put into the current generation
too (``refresh=True``): its window starts again. With ``refresh=False`` a
seen key is left where it is, so its window runs from its first add: what a
crawler's dupefilter needs, or a page linked from everywhere would never be
fetched again.

**Threads.** Batch calls take ``threads=`` (the generations' own). Several
threads may add at once: a generation is started once, under a lock, so no
add is cleared away by another thread starting the same generation.

**Clock.** ``clock`` returns seconds as a float (default ``time.time``). The
current generation never goes back: a clock that steps back (NTP) leaves
adds in the newest generation seen, and one more than a window behind it
(after a reading that ran ahead) is refused: every call that answers for
keys raises ValueError until the clock catches up (reads of its state and
its exports answer as of its newest generation). Saved (a kind-4 container,
docs/FORMAT.md): the window, the generation count, and each live
generation's number, count of new keys and kind-1 encoding. A filter read
back at a later time drops the generations that expired meanwhile. A
pickle carries no clock (a callable would make unpickling run arbitrary
code): the restored filter reads the system clock (one saved on a clock of
its own, such as time.monotonic, is refused there: read its to_bytes with
from_bytes(clock=)).

**Shared files.** ``save(path, shared=True)`` writes the ring form of kind
4, which ``WindowedBloomFilter.open(path, "r+")`` maps: several processes
then share one ring, the current generation being the newest of each one's
clock and of the file's (``_window_parts`` says how a rotation is made once).

**Speed.** A key is hashed once (a batch a slice at a time), and its lookups
and add over the generations are one core call (``_core.WindowProbe``,
window_ring.hpp), for batches on one thread and for single keys alike.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
import types
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from . import _core
from ._core import BloomFilter, CapacityWarning
from ._facts import batch_shaped
from ._forks import renew_locks_after_fork
from ._numpy import np
from ._pickling import picklable
from .display import filter_html

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._core import BinaryReader, BinaryWriter, Keys, Layout, Nulls, StrPath

__all__ = ["WindowedBloomFilter"]

Clock = Callable[[], float]
"""A callable returning the time in seconds (time.time by default)."""
Window = Union[float, int, datetime.timedelta]
"""A window's span: seconds (float or int) or a datetime.timedelta."""

_READ = object()  # (_now's "read the clock": any reading, None too, is the clock's)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_T = TypeVar("_T")


def _batch_len(keys: Any, otherwise: int) -> int:
    """How many keys the batch holds: every element of an array, whatever
    its shape (len() of a 2-D array counts its rows, and the add crossing
    capacity went without its warning); len(keys); or `otherwise` for keys
    of no length (an iterator)."""
    size = getattr(keys, "size", None) if hasattr(keys, "shape") else None
    if isinstance(size, int):
        return size
    try:
        return len(keys)
    except TypeError:
        return otherwise


def _callers_level() -> int:
    """The stacklevel of the first frame outside this package, for a
    warning given here: the caller's line, through however many of the
    package's frames the add went (add_many, add_lines, update, a threaded add)."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def _fresh_locks(f: Any) -> None:
    """A forked child's locks for f (_forks)."""
    f._rotating, f._advancing = threading.RLock(), threading.Lock()


# (its checks, fixed facts, threaded batch add and shared file's ring live in _window_parts)
from ._window_parts import (RingParams, SharedFile, SharedRing, _check_error_rate, _check_generations,
                            _past_capacity, _union_bits_set, check_refresh, encode_ring, generation_rate, not_behind,
                            refuse_unreadable, threaded_add, window_seconds)


class WindowedBloomFilter(RingParams, SharedFile):
    """Keys seen within the last ``window`` (seconds or a timedelta).

    >>> now = [0.0]
    >>> w = WindowedBloomFilter(1000, 0.01, window=3600, clock=lambda: now[0])
    >>> w.add("https://example.com/")
    True
    >>> now[0] = 3600.0; "https://example.com/" in w     # through its window
    True
    >>> now[0] = 3600.0 + 900.0; "https://example.com/" in w     # window + window / 4: gone
    False
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        capacity: int,
        error_rate: float = 0.01,
        *,
        window: Window,
        generations: int = 4,
        clock: Optional[Clock] = None,
        layout: Layout = "blocked",
        seed: int = 0,
    ) -> None:
        self._window = window_seconds(window)
        self._generations = _check_generations(generations)
        self._error_rate = _check_error_rate(error_rate)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning seconds, got {type(clock).__name__} ({clock!r})")
        self._clock: Clock = clock if clock is not None else time.time
        self._span = self._window / self._generations
        # One filter per place in the ring, each checking capacity, layout and seed.
        rate = generation_rate(self._error_rate, self._generations)
        self._ring = [BloomFilter(capacity, rate, layout=layout, seed=seed) for _ in range(self._generations + 1)]
        self._capacity = int(capacity)
        self._layout: Layout = layout
        self._seed = int(seed)
        # The generation number each place holds (None: not started since made or cleared).
        self._numbers: list[Optional[int]] = [None] * (self._generations + 1)
        self._newest: Optional[int] = None  # the newest generation seen: the current one never goes back
        # Places clear() emptied: an add in flight on another thread may have set bits there after (adds take
        # no lock), so the next generation started there clears it again rather than start on those bits.
        self._cleared: set[int] = set()
        self._warned: set[int] = set()  # generations that warned of their capacity
        # Starting a generation clears its place in the ring: two threads must
        # not both do it (the second would clear the first one's adds), nor
        # may an export read the ring meanwhile (a file that does not load).
        # Reentrant: an export holds it across live_generations, which expires.
        self._rotating = threading.RLock()
        self._advancing = threading.Lock()  # (the newest generation: checked and set as one step)
        renew_locks_after_fork(self, _fresh_locks)
        self._live_at: Optional[tuple[int, list[BloomFilter], _core.WindowProbe, _core.WindowProbe]] = None
        self._version = 0  # changes of the ring (under _rotating where threads may race)
        self._shared: Optional[SharedRing] = None  # the ring of a mapped file (open)
        # Single keys in the common case (the ring as last read, the current
        # generation within capacity): one core call, armed by _live_state.
        self._cursor = _core.WindowCursor(self._span, self._capacity, self._seed, self._generations)

    # ---- time ------------------------------------------------------------------

    def _now(self, t: Any = _READ, refuse: bool = True) -> int:
        """The current generation number at the clock's reading t (read now
        if not given): never less than one seen before, here or, in a
        shared file, by any handle. A reading more than a window behind that
        is refused (not_behind) where the call answers for keys; a read of
        the filter's state (refuse=False: counts, exports, repr) takes the newest."""
        if self._shared is not None:
            self._shared.sync(self)
        g = self._now_of(self._clock() if t is _READ else t)
        newest = self._newest
        if refuse and newest is not None and g <= newest and newest - g > self._generations:
            g, newest = not_behind(self)
        if newest is not None and g <= newest:  # (within a window: a clock stepped back, the newest kept)
            return newest
        return self._advance_to(g)

    def _advance_to(self, g: int) -> int:
        """The newest generation seen is at least g, whichever thread gets
        here first (it never goes back); the cursor is told before any call
        can see it."""
        with self._advancing:
            if self._newest is None or g > self._newest:
                self._cursor.advance(g)
                self._newest = g
            return self._newest

    def _live(self, now: int) -> list[BloomFilter]:
        """The live generations, newest first (those not started skipped)."""
        return self._live_state(now)[1]

    def _live_state(self, now: int) -> tuple[int, list[BloomFilter], _core.WindowProbe, _core.WindowProbe]:
        """(now, the live generations newest first, a probe of them, a
        probe of those older than now's): the core's one loop over the ring
        (window_ring.hpp). Kept until the ring changes (callers do not
        change the list), and the single-key cursor armed with it."""
        cached = self._live_at
        if cached is not None and cached[0] == now:
            return cached
        version = self._version
        out, older = [], []
        for back in range(self._generations + 1):
            g = now - back
            i = g % len(self._ring)
            if self._numbers[i] == g:
                out.append(self._ring[i])
                if back:
                    older.append(self._ring[i])
        current = self._ring[now % len(self._ring)] if self._numbers[now % len(self._ring)] == now else None
        state = (now, out, _core.WindowProbe(out), _core.WindowProbe(older))
        with self._rotating:  # (kept only if the ring did not change while it was read)
            if self._version == version:
                self._live_at = state
                if self._shared is None:  # (a shared file's ring may change in another process: no cursor)
                    self._cursor.arm(now, current, state[2], state[3])
        return state

    def _changed(self) -> None:
        """The ring's generations change (called before the change and after
        it, under _rotating): _live reads them again, the cursor answers
        nothing until then, and a view read meanwhile is not kept."""
        self._version += 1
        self._live_at = None
        self._cursor.disarm()

    def _current(self, now: int) -> tuple[int, BloomFilter]:
        """The current generation, started now if it was not (its place held
        one G + 1 older: expired), and its number: now's, unless the call
        waited (a thread that stalled, a process stopped) while a newer
        generation began. Then the newest one: never a generation that may
        have expired meanwhile, never clearing a place that holds a newer one."""
        i = now % len(self._ring)
        if self._numbers[i] != now or now != self._newest or self._shared is not None:
            with self._rotating:
                if self._shared is not None:  # (the file's ring as it is now, started once whoever asks)
                    now = self._shared.current(self, now)
                elif self._newest is not None and self._newest > now:
                    now = self._newest
                i = now % len(self._ring)
                if self._shared is None and self._numbers[i] != now:
                    self._changed()  # (first: no call answers from a place being cleared)
                    if self._numbers[i] is not None or i in self._cleared:
                        self._ring[i].clear()
                        self._cleared.discard(i)
                    self._warned.discard(now)
                    self._numbers[i] = now
                    self._changed()
        return now, self._ring[i]

    def _expire(self, now: int) -> None:
        """Forget the generations that are no longer live (a shared file's
        places are emptied only by starting a generation there)."""
        if self._shared is not None:
            return
        with self._rotating:
            for i, g in enumerate(self._numbers):  # (never one newer than now: another thread's, started since)
                if g is not None and g < now - self._generations:
                    self._changed()  # (first: no call answers from a place being cleared)
                    self._ring[i].clear()
                    self._numbers[i] = None
                    self._changed()

    # ---- capacity --------------------------------------------------------------

    def _guarded_add(self, gen: BloomFilter, now: int, adding: int, add: Callable[[], _T]) -> _T:
        """add() on the current generation; past its capacity the generation's
        own warning (which cannot name the generation) gives way to ours."""
        if gen.insert_count + adding <= self._capacity or now in self._warned:
            return add()
        # (not warnings.catch_warnings: it swaps the filters of the whole process, and two threads leaving it out
        # of order left CapacityWarning ignored everywhere, for good)
        _core.quiet_capacity(gen)
        out = add()
        if gen.insert_count > self._capacity and now not in self._warned:
            self._warned.add(now)
            warnings.warn(_past_capacity(gen, now, self._span, self._window, self._capacity), CapacityWarning,
                          stacklevel=_callers_level())
        return out

    # ---- single keys -----------------------------------------------------------

    def add(self, key: Any, /, *, refresh: bool = True) -> bool:
        """Add a key at the clock's time; True if no live generation had it.
        refresh=False leaves a key that is seen where it is (its window runs
        from its first add)."""
        # (install_window_calls, below, puts a C entry point here: the clock
        # read, the cursor's answer, else this with the same reading)
        return self._add_at(self._clock(), key, refresh)

    def _add_at(self, t: Any, key: Any, refresh: bool) -> bool:
        """add at the clock's reading t, Python's way (the ring read, a
        generation started where it must be, the cursor armed again)."""
        refresh = check_refresh(refresh)
        now, cur = self._current(self._now(t))
        older = self._live_state(now)[3]  # (one core call: the lookups, then the add)
        if cur.insert_count < self._capacity:  # (within capacity: no warning to make)
            return older.add(cur, key, refresh)
        return bool(self._guarded_add(cur, now, 1, lambda: older.add(cur, key, refresh)))

    def __contains__(self, key: object) -> bool:
        # (this class's `in` is a C entry point, install_window_calls; a
        # subclass's comes here)
        t = self._clock()
        answer = self._cursor.contains(key, t)
        return self._contains_at(t, key) if answer is None else answer

    def _contains_at(self, t: Any, key: object) -> bool:
        """`in` at the clock's reading t, Python's way."""
        return self._live_state(self._now(t))[2].contains(key, self._seed)

    # ---- batches ---------------------------------------------------------------

    def add_many(self, keys: Keys, *, refresh: bool = True, threads: int = 1,
                 nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch at the clock's time; True where no live generation had
        the key (at its first place in the batch only). refresh as add;
        threads and nulls as BloomFilter.add_many."""
        threads, refresh = _core.parse_threads(threads), check_refresh(refresh)
        if threads == 1:  # the core's one pass, the keys hashed a slice at a time (window_ring.hpp)
            now, cur = self._current(self._now())
            probe = self._live_state(now)[3]
            return self._guarded_add(cur, now, _batch_len(keys, self._capacity + 1),
                                     lambda: probe.add_keys(cur, keys, refresh, nulls))
        now, cur = self._current(self._now())  # (before the keys are read, as the one-thread path)
        hashed, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        return batch_shaped(valid, threaded_add(self, cur, now, hashed, refresh, threads))

    def contains_many(self, keys: Keys, *, threads: int = 1, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where a live generation may have the key; False for nulls with nulls='skip'."""
        threads = _core.parse_threads(threads)
        if threads == 1:  # (the keys hashed a slice at a time, as add_many's)
            return self._live_state(self._now())[2].contains_keys(keys, self._seed, nulls)
        live = self._live(self._now())  # (before the keys are read, as the one-thread path)
        hashed, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        hit = np.zeros(len(hashed), dtype=bool)
        for g in live:
            hit |= g.contains_many(hashed, threads=threads)
        return batch_shaped(valid, hit)

    def add_lines(self, data: Any, *, refresh: bool = True, threads: int = 1) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it; True where the line was new."""
        return self.add_many(_core.hash_lines(data, self._seed), refresh=refresh, threads=threads)

    def contains_lines(self, data: Any, *, threads: int = 1) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text; True where it may be present."""
        return self.contains_many(_core.hash_lines(data, self._seed), threads=threads)

    def update(self, *iterables: Keys, nulls: Nulls = "raise", threads: int = 1) -> None:
        """Add every key of each iterable, in order, at the clock's time;
        threads as add_many."""
        threads = _core.parse_threads(threads)
        for keys in iterables:
            if hasattr(keys, "contains_many"):  # a filter: its keys are not listed, nor their times
                raise TypeError(f"update() takes iterables of keys, got {type(keys).__name__}")
            self.add_many(keys, nulls=nulls, threads=threads)

    # ---- facts -----------------------------------------------------------------

    @property
    def current_generation(self) -> int:
        """The generation number adds go to now: floor(clock() / (window / generations))."""
        return self._now(refuse=False)

    @property
    def live_generations(self) -> tuple[tuple[int, BloomFilter], ...]:
        """(generation number, filter) of the live generations started, oldest first (shared, not copies)."""
        now = self._now(refuse=False)
        self._expire(now)
        return tuple(sorted(((g, f) for g, f in zip(self._numbers, self._ring)
                             if g is not None and now - self._generations <= g <= now), key=lambda gf: gf[0]))

    @property
    def fill_ratio(self) -> float:
        """The fraction of the live generations' bits that are 1, over the whole ring."""
        return sum(g.bits_set for g in self._live(self._now(refuse=False))) / self.num_bits

    @property
    def approx_count(self) -> float:
        """Estimated distinct keys in the live generations: the estimate of
        their union (a key refreshed into several generations counts once).
        Keys of the live generations, so up to window + window / G old."""
        live = self._live(self._now(refuse=False))
        if not live:
            return 0.0
        first = live[0]
        return float(_core.estimate_count(_union_bits_set(live), first.num_bits, first.num_hashes, self._layout))

    @property
    def expected_fp_rate(self) -> float:
        """The compound rate at the current fill: 1 - prod(1 - generation's rate)."""
        miss = 1.0
        for g in self._live(self._now(refuse=False)):
            miss *= 1.0 - g.expected_fp_rate
        return 1.0 - miss

    def clear(self) -> None:
        """Forget every key (the clock's newest generation is kept: it never goes back)."""
        if self._shared is not None:
            with self._rotating:
                return self._shared.clear(self)
        with self._rotating:
            self._changed()  # (first: no call answers from a ring half cleared)
            for i, g in enumerate(self._ring):  # (a place holding no generation is empty: never touched)
                if self._numbers[i] is not None:
                    g.clear()
                    self._cleared.add(i)
                self._numbers[i] = None
            self._warned.clear()
            self._changed()

    def _params(self) -> tuple[Any, ...]:
        return (self._capacity, self._error_rate, self._window, self._generations, self._layout, self._seed)

    def copy(self) -> WindowedBloomFilter:
        """An independent copy, with the same clock (of a mapped filter: its
        live generations, in memory)."""
        if self._shared is not None:
            c = read_as_saved(WindowedBloomFilter, self.to_bytes(), self._clock)
            if self._newest is not None:
                c._advance_to(self._newest)
            c._warned = set(self._warned)
            return c
        c = WindowedBloomFilter(self._capacity, self._error_rate, window=self._window, generations=self._generations,
                                clock=self._clock, layout=self._layout, seed=self._seed)
        with self._rotating:  # (the ring and its numbers as one step)
            c._ring = [g.copy() if n is not None else mine for g, n, mine in zip(self._ring, self._numbers, c._ring)]
            c._numbers = list(self._numbers)
            c._newest = self._newest
            c._warned = set(self._warned)
        c._changed()
        return c

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, Any]) -> WindowedBloomFilter:
        return self.copy()

    def __eq__(self, other: object) -> bool:
        """The same parameters and the same live generations (numbers and bits)."""
        if not isinstance(other, WindowedBloomFilter):
            return NotImplemented
        return self._params() == other._params() and self.live_generations == other.live_generations

    def __bool__(self) -> bool:
        """False while no live generation holds a key, as an empty set is."""
        return any(g for g in self._live(self._now(refuse=False)))

    def __repr__(self) -> str:
        facts = "closed" if self.closed else \
            f"live={len(self._live(self._now(refuse=False)))} approx_count={self.approx_count:.0f}"
        return (f"<WindowedBloomFilter capacity={self._capacity} error_rate={self._error_rate} window={self._window:g}s "
                f"generations={self._generations} layout='{self._layout}' seed={self._seed} {facts}>")

    def _repr_html_(self) -> str:
        return filter_html(self)

    # ---- bytes, files and pickle ---------------------------------------------------

    def to_bytes(self) -> bytes:
        """A kind-4 bloomline container (docs/FORMAT.md): the parameters, then
        each live generation (oldest first) with its number, its count of new
        keys and its own kind-1 encoding. Generations that expired by the
        clock are left out. A rotation by another thread (or, in a mapped
        file, by any process) waits for it: it shows the ring as before or as
        after one."""
        return encode_ring(self, ring=False)

    @classmethod
    def from_bytes(cls, data: Any, *, clock: Optional[Clock] = None) -> WindowedBloomFilter:
        """Read what to_bytes wrote (ValueError says what is wrong), with
        this clock (default time.time): generations that expired since are
        dropped. Bytes whose newest generation is more than a window ahead
        of the clock (saved by a clock that ran ahead) are refused: the
        current generation never goes back, so their keys would read seen
        until this clock caught up; so are bytes of another clock's read on the system one (refuse_unreadable)."""
        w = read_as_saved(cls, data, clock)
        refuse_unreadable(w, on_system_clock=clock is None)
        return w

    def save(self, path: StrPath | BinaryWriter, *, shared: bool = False) -> None:
        """Write to path atomically (temporary file, fsync, rename), through
        the one atomic writer every save uses; or to_bytes() at a binary file
        object's position. shared=True writes the ring form that open(path,
        'r+') maps (every place of the ring, G + 1 filters; load reads both).
        A filter opened from path saved to path is flushed in place."""
        if self._shared is not None and isinstance(path, (str, bytes, os.PathLike)) and self._shared.file.is_file(path):
            if not self._shared.file.writable:
                raise ValueError(f"'{os.fsdecode(path)}' is this filter's own file, mapped read-only: nothing to save")
            return self.flush()
        if not shared:
            return _core.save_bytes(path, self.to_bytes())
        _core.save_bytes(path, encode_ring(self, ring=True))

    @classmethod
    def load(cls, path: StrPath | BinaryReader, *, clock: Optional[Clock] = None) -> WindowedBloomFilter:
        """Read a file written by save (always verified), with this clock;
        path may be a binary file object (one filter is read at its position)."""
        return cls.from_bytes(_core.load_bytes(path), clock=clock)

    # Pickling: bloomline._pickling gives this class its __reduce_ex__ (the
    # one place that names what a pickle restores with), below the class.
    # A pickle carries no clock: the restored filter reads time.time (and a
    # filter on a clock of its own is refused there: from_bytes).


def read_as_saved(cls: type[WindowedBloomFilter], data: Any, clock: Optional[Clock]) -> WindowedBloomFilter:
    """from_bytes without its check of the clock: a copy (the same filter,
    ahead of its own clock or not), and bytes going to Redis, whose server's
    clock decides (redis/_travel.py)."""
    capacity, error_rate, generations, window, layout, seed, live = _core.decode_window(data)
    w = cls(capacity, error_rate, window=window, generations=generations, clock=clock, layout=layout, seed=seed)
    for number, f, _ in live:
        place = number % len(w._ring)
        w._ring[place] = f
        w._numbers[place] = number
        w._newest = number  # (oldest first: the last is the newest)
    w._changed()
    return w


# `add` and `in` on this class as C entry points over the cursor (the Python
# methods above stay: their docs and signatures, and a subclass's `in`).
_core.install_window_calls(WindowedBloomFilter)
picklable(WindowedBloomFilter)
