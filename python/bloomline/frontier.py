"""DedupQueue: a crawl frontier that enqueues each URL at most once.

The "seen" set is a Bloom filter, so it costs about 1-2 bytes per URL
instead of the URL itself; the queue holds only URLs still to visit. A false
positive means a never-seen URL is dropped (at most ``error_rate`` of new
URLs); a URL is never enqueued twice.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Hashable, Optional, Union

from . import _core
from ._core import BloomFilter
from ._facts import facts
from ._forks import renew_locks_after_fork
from ._interrupts import interrupts_held
from ._pickling import from_bytes
from .scalable import ScalableBloomFilter

__all__ = ["DedupQueue"]


def _fresh_lock(q: Any) -> None:
    """A forked child's lock for q (_forks)."""
    q._lock = threading.Lock()


Seen = Union[BloomFilter, ScalableBloomFilter]
"""The filter a DedupQueue records its keys in."""


class DedupQueue:
    """FIFO queue of keys never seen before.

    ``DedupQueue()`` keeps its seen-set in a ``ScalableBloomFilter`` that grows
    as needed; ``DedupQueue(BloomFilter(...))`` uses a fixed filter, which
    warns once (``bloomline.CapacityWarning``) when it takes more new keys
    than its capacity, from which point false positives (dropped new URLs)
    rise above its error rate. The queue gives that warning, after the keys
    are queued: from the first push that could pass its capacity the filter
    does not warn by itself.

    >>> q = DedupQueue()
    >>> q.push("https://a.example/"), q.push("https://a.example/")
    (True, False)
    >>> q.pop()
    'https://a.example/'
    >>> q.seen("https://a.example/")
    True
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        seen: Seen | None = None,
        *,
        initial_capacity: int = 100_000,
        error_rate: float = 1e-4,
    ) -> None:
        if seen is None:
            seen = ScalableBloomFilter(initial_capacity, error_rate)
        elif not isinstance(seen, (BloomFilter, ScalableBloomFilter)):
            raise TypeError(f"seen must be a BloomFilter or ScalableBloomFilter, got {type(seen).__name__}")
        self._seen: Seen = seen
        self._queue: collections.deque[Any] = collections.deque()
        # A key's add to the seen-set and its place in the queue are one step
        # for other threads: a pickle taken between them would hold a key
        # seen but never queued (never crawled after a restore).
        self._lock = threading.Lock()
        self._owes_warning: Optional[bool] = None
        renew_locks_after_fork(self, _fresh_lock)

    @property
    def filter(self) -> Seen:
        """The seen-set (shared, not a copy)."""
        return self._seen

    def push(self, key: Hashable) -> bool:
        """Enqueue key if it was never seen; return whether it was enqueued."""
        with self._lock:
            self._hold_warning(1)
            # Queued first, taken back if it was seen: a Ctrl-C as the add
            # returns leaves the key queued (a repeat at worst), never seen
            # and lost. A key the filter refuses is taken back.
            self._queue.append(key)
            try:
                new = bool(self._seen.add(key))  # type: ignore[arg-type]  # the filter names the types it takes
            except Exception as e:
                # An error that says the key was new, or has no answer (a
                # chain in Redis: NotDurable, UnknownOutcome), keeps it
                # queued: recorded as seen, it would never be queued again.
                if not _kept_by(e, [0]):
                    self._queue.pop()
                raise
            if not new:
                self._queue.pop()
            due = self._warning_due()
        if due is not None:
            _core.note_capacity(due)
        return new

    def push_many(self, keys: Iterable[Any]) -> int:
        """Enqueue, in order, each key never seen (a repeat inside keys counts
        once). Returns how many were enqueued. A Ctrl-C during the call
        comes after the new keys are queued (_interrupts)."""
        items = list(keys)
        with self._lock, interrupts_held():
            self._hold_warning(len(items))
            try:
                new = self._seen.add_many(items)
            except Exception as e:  # (its keys new or unanswered are queued first, as push keeps its key)
                self._queue.extend(items[i] for i in _kept_by(e, range(len(items))))
                raise
            fresh = [k for k, is_new in zip(items, new.tolist()) if is_new]
            self._queue.extend(fresh)
            due = self._warning_due()
        if due is not None:
            _core.note_capacity(due)
        return len(fresh)

    # A fixed filter's capacity warning is the queue's to give, once the keys
    # are queued (one raised as an error by the add would come before, its
    # answers lost and its keys never queued): from the first add that could
    # pass its capacity the filter is quiet (_core.quiet_capacity, a flag of
    # that filter object), and the push that finds it past gives its warning
    # after letting go of the lock. Not warnings.catch_warnings, which swaps
    # the warning filters of the whole process: threads leaving it out of
    # order left them changed for good. _owes_warning (under the lock): None
    # until the filter is quiet, then whether its warning is still to give.

    def _hold_warning(self, adding: int) -> None:
        seen = self._seen
        if (self._owes_warning is None and isinstance(seen, BloomFilter) and seen.capacity
                and seen.insert_count + adding > seen.capacity):
            self._owes_warning = not _core.quiet_capacity(seen)

    def _warning_due(self) -> Optional[BloomFilter]:
        seen = self._seen
        if self._owes_warning and isinstance(seen, BloomFilter) and seen.insert_count > (seen.capacity or 0):
            self._owes_warning = False
            return seen
        return None

    def pop(self) -> Any:
        """The oldest enqueued key (IndexError when empty)."""
        try:
            with self._lock:
                return self._queue.popleft()
        except IndexError:
            raise IndexError("pop from an empty DedupQueue") from None

    def seen(self, key: Hashable) -> bool:
        """Whether key was (probably) pushed before, queued or already popped."""
        return key in self._seen

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:
        return bool(self._queue)

    def __iter__(self) -> Iterator[Any]:
        """The queued keys, oldest first, without removing them."""
        return iter(list(self._queue))

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:  # (the seen-set and the queue as of one moment)
            return {"seen": self._seen.to_bytes(), "queue": list(self._queue)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        seen = from_bytes(state["seen"])
        if not isinstance(seen, (BloomFilter, ScalableBloomFilter)):
            raise ValueError(f"a DedupQueue's filter must be a BloomFilter or ScalableBloomFilter, got {type(seen).__name__}")
        self._seen = seen
        self._queue = collections.deque(state["queue"])
        self._lock = threading.Lock()
        self._owes_warning = None
        renew_locks_after_fork(self, _fresh_lock)

    def __repr__(self) -> str:
        return f"<DedupQueue queued={len(self._queue)} seen~{self._seen.approx_count:.0f} filter={type(self._seen).__name__}>"


def _kept_by(e: BaseException, places: Iterable[int]) -> list[int]:
    """Which of an add's keys (by place) an error it raised says were new,
    or left without an answer (_facts): none where it carries no facts (a
    key the filter refused: nothing was recorded)."""
    new, unknown = facts(e)
    if new is None:
        return []
    return [i for i in places if bool(new[i]) or (unknown is not None and bool(unknown[i]))]
