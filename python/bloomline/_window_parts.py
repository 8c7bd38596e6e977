"""The windowed filter's parts that are not its class: argument checks, the
union's bits, the threaded batch add, and the ring of a shared mapped file
(``SharedRing``, behind ``WindowedBloomFilter.open``).

**A shared file.** ``WindowedBloomFilter.open(path, "r+")`` maps a file in
the ring form of kind 4 (docs/FORMAT.md; written by ``save(path,
shared=True)``): every place of the ring is a BloomFilter at a fixed offset,
its generation number in the file, so every process that maps it sees one
ring (the rules: ``cpp/include/bloomline/window_file.hpp``). Each handle's
current generation is the newest of its clock's and of every number in the
file, read at each call: a generation started by one process is the current
one of all. A generation is started once, under the file's header lock; a
place being cleared is neither probed nor added to. "New" across processes
is at least once, as for a BloomFilter file.
"""

from __future__ import annotations

import datetime
import functools
import math
import numbers
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from . import _core
from ._core import BloomFilter
from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    from typing_extensions import Self

    from ._core import Layout, StrPath
    from .windowed import WindowedBloomFilter

# More generations cost memory ((G + 1) filters) and lookups (G + 1 probes);
# past 64 a slice is under 2% of the window, finer than any recrawl needs.
MAX_GENERATIONS = 64
# Below a millisecond a window is no use to a crawler, and a clock's seconds
# divided by its slices could pass the 64-bit generation numbers.
MIN_WINDOW = 1e-3
# Generation numbers are stored as signed 64-bit integers (docs/FORMAT.md).
_GEN_LIMIT = 2**63


def window_seconds(window: object) -> float:
    """A window in seconds from a positive number or a timedelta; ValueError
    or TypeError naming the parameter and the value otherwise."""
    if isinstance(window, datetime.timedelta):
        seconds = window.total_seconds()
    elif isinstance(window, numbers.Real) and not isinstance(window, (bool, np.bool_)):
        try:
            seconds = float(window)
        except OverflowError:
            raise ValueError(f"window must be a positive number of seconds or a timedelta, got an int of "
                             f"{len(str(abs(cast(int, window))))} digits (past a float's range)") from None
    else:
        raise TypeError(f"window must be a positive number of seconds or a timedelta, got {type(window).__name__} "
                        f"({window!r})")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"window must be a positive number of seconds or a timedelta, got {window!r}")
    if seconds < MIN_WINDOW:
        raise ValueError(f"window must be at least {MIN_WINDOW:g} s, got {window!r}")
    return seconds


def _take(hashed: npt.NDArray[Any], which: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """hashed[which], copied as 16 raw bytes a key (NumPy copies a record
    dtype field by field, several times slower)."""
    out: npt.NDArray[Any] = hashed.view("V16")[which].view(hashed.dtype)
    return out


@functools.lru_cache(maxsize=None)
def _popcount8() -> npt.NDArray[np.uint8]:
    """Bits set per byte value: a popcount that every supported NumPy has
    (made at first use, so that importing bloomline leaves NumPy alone)."""
    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


_UNION_CHUNK = 1 << 20  # bytes of the union held at once


def _union_bits_set(filters: list[BloomFilter]) -> int:
    """Bits set in the union of filters of one geometry, read through their
    buffers a chunk at a time (no copy of a whole filter). The views go
    with this call's locals."""
    bits = [np.frombuffer(memoryview(f), dtype=np.uint8) for f in filters]
    total = 0
    for start in range(0, len(bits[0]), _UNION_CHUNK):
        acc = bits[0][start:start + _UNION_CHUNK].copy()
        for other in bits[1:]:
            np.bitwise_or(acc, other[start:start + _UNION_CHUNK], out=acc)
        total += int(_popcount8()[acc].sum(dtype=np.uint64))
    return total


def _past_capacity(gen: BloomFilter, now: int, span: float, window: float, capacity: int) -> str:
    """The capacity warning of a generation, which names it."""
    return (f"WindowedBloomFilter generation {now} (from {now * span:g} s, one {span:g} s slice of the {window:g} s "
            f"window) has taken {gen.insert_count:,} new keys, past its capacity of {capacity:,}: its expected "
            f"false-positive rate is {gen.expected_fp_rate:.3g} now (sized for {gen.error_rate:g}), so more new keys "
            "will be reported seen. Make the filter with a larger capacity (the distinct keys of any window).")


def refuse_ahead(w: WindowedBloomFilter, newest: Optional[int]) -> None:
    """A filter read whose newest generation is more than a window ahead of
    w's clock was written by a clock that ran ahead (or a --now in
    milliseconds): the current generation never goes back, so its keys
    would read seen until this clock caught up. Refused, saying so."""
    if newest is None:
        return
    now = w._now_of(w._clock())
    if newest - now > w._generations:
        raise ValueError(
            f"the windowed filter read holds generation {newest}, {newest - now} generations "
            f"({(newest - now) * w._span:g} s) ahead of this clock's ({now}): it was saved by a clock that ran "
            "ahead, and its keys would read seen until this clock caught up. Read it with that clock (clock=), "
            "or start a new filter")


# No wall clock read by this library is before 2001-09-09 (1e9 s).
WALL_CLOCK_FLOOR = 1e9


def refuse_unreadable(w: WindowedBloomFilter, on_system_clock: bool) -> None:
    """A filter just read (from_bytes, load, a pickle), refused where it is
    more than a window ahead of w's clock (refuse_ahead) or of another
    clock's (refuse_other_clock)."""
    refuse_ahead(w, w._newest)
    if on_system_clock:
        refuse_other_clock(w)


def refuse_other_clock(w: WindowedBloomFilter) -> None:
    """A filter read on the system clock (no clock=: a pickle, load,
    from_bytes, open) whose newest generation's slice ended before 2001 was
    saved on a clock of its own (time.monotonic, a test's): every key would
    read expired, without a word. Refused, saying so."""
    newest = w._newest
    if newest is not None and (newest + 1) * w._span < WALL_CLOCK_FLOOR:
        raise ValueError(
            f"the windowed filter read holds generation {newest}, whose slice ended {(newest + 1) * w._span:g} s "
            "after its clock's zero (before 2001): it was saved on a clock of its own (time.monotonic, a test's), "
            "not the system clock this read uses, and every key would read expired. Read it with that clock "
            "(from_bytes or load with clock=); a pickle carries no clock, so such a filter travels as to_bytes")


def not_behind(w: WindowedBloomFilter) -> tuple[int, Optional[int]]:
    """(the generation of a fresh reading of w's clock, the newest generation
    seen) after a reading more than a window behind the newest: one taken
    before a stall while other threads moved on is taken again. Still more
    than a window behind (here or, in a shared file, by any handle), a
    reading that ran ahead moved the filter on (a clock stepped forward and
    back), and the current generation never goes back, so keys added now
    would read seen, and those added a moment ago new, until this clock
    caught up. Refused, saying so, on every call until then."""
    now, newest = w._now_of(w._clock()), w._newest
    if newest is None or newest - now <= w._generations:
        return now, newest
    where = "its shared file has" if w._shared is not None else "this filter has"
    raise ValueError(
        f"this clock reads generation {now}, {newest - now} generations ({(newest - now) * w._span:g} s) behind "
        f"generation {newest}, which {where} seen: a reading that ran ahead moved the filter on, and the current "
        "generation never goes back, so keys added now would read seen until this clock caught up. Read it with "
        "that clock, or start a new filter")


def generation_rate(error_rate: float, generations: int) -> float:
    """The rate each of the G + 1 live generations is sized for (the core's,
    which its reader checks), compounding to error_rate; a ValueError naming
    error_rate where that rate is past what a filter can be sized for."""
    rate = _core.window_generation_error_rate(error_rate, generations)
    try:
        _core.optimal_params(1, rate)
    except ValueError as e:
        raise ValueError(f"error_rate {error_rate!r} is too small for {generations} generations: each of the "
                         f"{generations + 1} live ones would be sized for {rate:.3g} ({e})") from None
    return rate


def check_refresh(refresh: object) -> bool:
    """An add's refresh: True or False (NumPy's, or 1 and 0, too), else TypeError naming it."""
    if not (isinstance(refresh, (bool, np.bool_)) or (isinstance(refresh, int) and refresh in (0, 1))):
        raise TypeError(f"refresh must be True or False, got {type(refresh).__name__} ({refresh!r})")
    return bool(refresh)


def _check_generations(generations: object) -> int:
    if not isinstance(generations, numbers.Integral) or isinstance(generations, (bool, np.bool_)):
        raise TypeError(f"generations must be an int, got {type(generations).__name__} ({generations!r})")
    generations = int(generations)
    if not 1 <= generations <= MAX_GENERATIONS:
        raise ValueError(f"generations must be in [1, {MAX_GENERATIONS}], got {generations}")
    return generations


def _check_error_rate(error_rate: object) -> float:
    if not isinstance(error_rate, numbers.Real) or isinstance(error_rate, (bool, np.bool_)):
        raise TypeError(f"error_rate must be a float, got {type(error_rate).__name__} ({error_rate!r})")
    rate = float(error_rate)
    if not 0 < rate < 1:
        raise ValueError(f"error_rate must be in (0, 1), got {error_rate!r}")
    return rate


def threaded_add(w: WindowedBloomFilter, cur: BloomFilter, now: int, hashed: npt.NDArray[Any], refresh: bool,
                 threads: int) -> npt.NDArray[np.bool_]:
    """add_many with threads=: the generations' own threaded calls, one
    after another (the one-thread batch is the core's one pass)."""
    older = [g for g in w._live(now) if g is not cur]
    if refresh:
        # Every key goes into the current generation; only those new to it
        # can be new to the window, so only they are looked up in the older ones.
        new: npt.NDArray[np.bool_] = w._guarded_add(cur, now, len(hashed), lambda: cur.add_many(hashed, threads=threads))
        count = int(np.count_nonzero(new))
        if older and count:
            # (a copy of the new keys pays only where most keys were not new)
            ask = np.flatnonzero(new) if 2 * count < len(new) else None
            part = hashed if ask is None else _take(hashed, ask)
            seen = np.zeros(len(part), dtype=bool)
            for g in older:
                seen |= g.contains_many(part, threads=threads)
            if ask is None:
                new &= ~seen
            else:
                new[ask] &= ~seen
        return new
    seen = np.zeros(len(hashed), dtype=bool)
    for g in older:
        seen |= g.contains_many(hashed, threads=threads)
    if not seen.any():  # (all fresh: no copy of the batch)
        fresh_all: npt.NDArray[np.bool_] = w._guarded_add(cur, now, len(hashed),
                                                          lambda: cur.add_many(hashed, threads=threads))
        return fresh_all
    out = np.zeros(len(hashed), dtype=bool)
    fresh = ~seen
    if fresh.any():
        part = _take(hashed, fresh)
        out[fresh] = w._guarded_add(cur, now, len(part), lambda: cur.add_many(part, threads=threads))
    return out


def encode_ring(w: WindowedBloomFilter, *, ring: bool) -> bytes:
    """w's kind-4 bytes: its live generations (to_bytes), or every place
    (ring, save(shared=True)); as one step against rotations, under w's
    rotation lock, and for a mapped ring under the file's (its encode)."""
    with w._rotating:
        if w._shared is not None:
            return w._shared.encode(w, ring=ring)
        params = (w._capacity, w._error_rate, w._generations, w._window, w._layout, w._seed)
        if not ring:
            live = w.live_generations
            return _core.encode_window(*params, [f for _, f in live], [f.insert_count for _, f in live],
                                       [g for g, _ in live])
        now = w._now(refuse=False)
        numbers = [g if g is not None and now - w._generations <= g <= now else None for g in w._numbers]
        return _core.encode_window_ring(*params, w._ring, [f.insert_count if g is not None else 0
                                                          for f, g in zip(w._ring, numbers)], numbers)


class RingParams:
    """What a windowed filter was made with (WindowedBloomFilter's facts
    that never change)."""

    _window: float
    _span: float
    _generations: int
    _capacity: int
    _error_rate: float
    _layout: Layout
    _seed: int
    _ring: list[BloomFilter]
    _clock: Callable[[], float]

    def _now_of(self, t: Any) -> int:
        """The generation number of the clock's reading t (checked)."""
        try:
            g: int = math.floor(t / self._span)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"clock must return a finite number of seconds, got {t!r}") from None
        # (-2**63 and -2**63 + 1 mark a ring file's place as empty or being started)
        if not -_GEN_LIMIT + 2 <= g < _GEN_LIMIT:
            raise ValueError(f"clock gives {t!r} seconds, whose generation number {g} (window {self._window:g} s / "
                             f"{self._generations}) is not in [-2**63 + 2, 2**63)")
        return g

    @property
    def window(self) -> float:
        """The window in seconds."""
        return self._window

    @property
    def generations(self) -> int:
        """G: the window is split into G generations (G + 1 filters are kept: the current one and G before it)."""
        return self._generations

    @property
    def capacity(self) -> int:
        """Distinct keys per window (each generation is sized for them)."""
        return self._capacity

    @property
    def error_rate(self) -> float:
        """The compound false-positive rate of a lookup over the live generations."""
        return self._error_rate

    @property
    def generation_error_rate(self) -> float:
        """The rate each generation is sized for: G + 1 of them compound to error_rate."""
        return self._ring[0].error_rate or 0.0

    @property
    def layout(self) -> Layout:
        """"blocked" or "standard" ("standard-v1": the standard layout's first index): the bit layout of every
        generation."""
        return self._layout

    @property
    def seed(self) -> int:
        """The hash seed of every generation."""
        return self._seed

    @property
    def num_bits(self) -> int:
        """Bits of the whole ring: G + 1 generations."""
        return sum(g.num_bits for g in self._ring)

    @property
    def num_hashes(self) -> int:
        """Hashes per key in each generation."""
        return self._ring[0].num_hashes

    @property
    def nbytes(self) -> int:
        """Bytes of the whole ring (G + 1 generations, allocated when made)."""
        return sum(g.nbytes for g in self._ring)

    @property
    def clock(self) -> Callable[[], float]:
        """The callable giving the time in seconds (time.time unless one was passed)."""
        return self._clock


class SharedRing:
    """A windowed filter's ring in a mapped file (the module's doc)."""

    def __init__(self, path: StrPath, writable: bool, verify: bool) -> None:
        self.file = _core.MappedWindow(path, writable, verify)
        self.pid = os.getpid()  # (a forked child leaves its parent's places alone: their mutexes may be held)
        self.places: list[BloomFilter] = self.file.place_filters()
        for g in self.places:  # (each counts this handle's own adds, from zero: flush adds them to the file's)
            _core.restart_counts(g)

    def sync(self, w: WindowedBloomFilter) -> None:
        """Read the ring's numbers from the file into w (its view changes
        only when they did), and the newest into w's clock state."""
        if self.file.released:
            raise ValueError("I/O operation on a closed filter")
        got: list[Optional[int]] = self.file.numbers()
        if got != w._numbers:
            for place, (was, now) in enumerate(zip(w._numbers, got)):
                if was != now:  # (a place started afresh: its counts restart, here as in the handle that did it)
                    _core.restart_counts(self.places[place])
            w._numbers = got
            w._changed()
        newest = max((g for g in got if g is not None), default=None)
        if newest is not None:
            w._advance_to(newest)

    def current(self, w: WindowedBloomFilter, number: int) -> int:
        """The generation to add to (the caller holds w's rotation lock):
        number's, or the ring's newest where another handle or thread began
        a newer one meanwhile (number's may have expired since); started
        at its place if it was not, once whoever asks (the file's lock)."""
        self.sync(w)  # (another process may have moved on since the caller read the clock)
        if w._newest is not None and w._newest > number:
            number = w._newest
        if w._numbers[number % len(self.places)] != number:
            got: int = self.file.start(number, 0)  # (this handle's count of the place restarts at sync, from zero)
            if got == number:
                w._warned.discard(number)
            self.sync(w)
            number = got
        return number

    def clear(self, w: WindowedBloomFilter) -> None:
        self.file.clear([0] * len(self.places))
        w._warned.clear()
        self.sync(w)

    def encode(self, w: WindowedBloomFilter, ring: bool) -> bytes:
        """The file's generations, read under its lock (MappedWindow.encode), with this handle's counts."""
        now = w._now(refuse=False)  # (synced: raises when closed)
        return self.file.encode(ring, now, [g.insert_count for g in self.places])

    def flush(self, w: WindowedBloomFilter, final: bool) -> None:
        """Write this handle's counts to the file (the caller holds w's
        rotation lock); final: close, after this handle's last add."""
        if self.file.released:
            if not final:
                raise ValueError("I/O operation on a closed filter")
            return
        if os.getpid() == self.pid:
            self.sync(w)  # (places another handle restarted: this handle's counts since go to their new generation)
            if not final:
                for g in self.places:  # (fill_ratio and expected_fp_rate: every process's bits, as approx_count's)
                    _core.recount_fill(g)
        if final and os.getpid() == self.pid:
            # Each place closed under its writer mutex first: an add of
            # another thread finishes, later ones raise, and none lands after
            # the last writer's checksums (a file that would never load).
            for g in self.places:
                g.close()
        self.file.flush([g.insert_count for g in self.places], final)


class SharedFile:
    """WindowedBloomFilter's face of a shared file (SharedRing): open, flush,
    close, and what a mapped filter says of itself."""

    _shared: Optional[SharedRing]
    _ring: list[BloomFilter]
    _rotating: threading.RLock


    @classmethod
    def open(cls, path: StrPath, mode: str = "r+", *, clock: Optional[Callable[[], float]] = None,
             verify: bool = False) -> Self:
        """Map a file written by save(path, shared=True); with 'r+' every
        process that opens it shares one ring: adds go straight to the file,
        a generation started by one is the current one of all, and the
        newest generation is kept in the file (the clock never goes back).
        flush() writes the counts and syncs; the last writer's close() makes
        every checksum current. "New" across processes is at least once. A
        context manager."""
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        ring = SharedRing(path, mode == "r+", verify)
        capacity, error_rate, generations, window, layout, seed = ring.file.params
        w = cast(Any, cls)(capacity, error_rate, window=window, generations=generations, clock=clock, layout=layout,
                           seed=seed)
        w._ring = ring.places
        w._shared = ring
        ring.sync(w)
        if clock is None:
            try:
                refuse_other_clock(w)
            except ValueError:
                w.close()
                raise
        return cast("Self", w)

    def flush(self) -> None:
        """A shared file: write this handle's counts and sync (a no-op otherwise)."""
        if self._shared is not None:
            with self._rotating:  # (the file's header lock is this handle's: one of its threads at a time)
                self._shared.flush(cast("WindowedBloomFilter", self), False)

    def close(self) -> None:
        """A shared file: flush and leave it (the last writer makes it clean); later use raises."""
        if self._shared is not None:
            with self._rotating:
                self._shared.flush(cast("WindowedBloomFilter", self), True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def mapped(self) -> bool:
        """True when the ring lives in a mapped file (open)."""
        return self._shared is not None

    @property
    def closed(self) -> bool:
        """True after close() of a mapped filter (its later use raises)."""
        return self._shared is not None and self._shared.file.released

    @property
    def read_only(self) -> bool:
        """True when mapped read-only (open(path, 'r'))."""
        return self._shared is not None and not self._shared.file.writable
