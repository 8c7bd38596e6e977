"""Fresh locks in a forked child, for every object that asked, and a step
under way finished before the fork.

A lock that a thread of the parent held at the fork stays held in the
child, where that thread does not exist: the child's next close, save or
pickle would wait on it forever. Objects that hold such locks (the windowed
filter, the scalable chain, the frontier's queue) register a function that
gives them fresh ones; after a fork the child calls it for each of them
still alive.

A step those locks guard (a chain's batch add and its stage counts, a
queue's add to its seen-set and the queueing of the new keys) would reach
the child half done: keys seen and never queued, a stage's count behind
its bits. Objects that name their lock (`hold`) have it taken before the
fork, outer objects first (a queue before the seen-set its steps call), so
the child gets each as of one moment, and released after it in both
processes. A step that has not ended within HOLD_S (a call stuck on a
server that does not answer) is not waited for further: its object reaches
the child as it is, as it did before.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any, Callable, Optional

HOLD_S = 10.0  # how long a fork waits for the steps under way (each object's lock) to end

# id(obj) -> (a weak reference to obj, the function that renews its locks,
# the one that names the lock a fork waits for (or None), whether it is outer)
_ALIVE: dict[int, tuple[weakref.ref[Any], Callable[[Any], None], Optional[Callable[[Any], Any]], bool]] = {}
_held: list[Any] = []  # the locks taken for the fork under way, in the order taken
_holding = threading.Lock()  # (one fork at a time takes them: two threads forking at once)


def renew_locks_after_fork(obj: Any, renew: Callable[[Any], None], *,
                           hold: Optional[Callable[[Any], Any]] = None, outer: bool = False) -> None:
    """renew(obj) in each forked child of this process while obj lives
    (a second registration of obj replaces the first). hold(obj): the lock
    whose step a fork waits for (taken before it, released after it, up to
    HOLD_S in all); outer: obj's steps take other objects' locks inside its
    own (taken first)."""
    key = id(obj)
    _ALIVE[key] = (weakref.ref(obj, lambda _ref: _forget(key, _ref)), renew, hold, outer)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    entry = _ALIVE.get(key)
    if entry is not None and entry[0] is ref:  # (not a later object that took the same id)
        del _ALIVE[key]


def _hold_before_fork() -> None:
    _holding.acquire()
    deadline = time.monotonic() + HOLD_S
    entries = [(obj, hold) for ref, _, hold, outer in sorted(_ALIVE.values(), key=lambda e: not e[3])
               if hold is not None and (obj := ref()) is not None]
    for obj, hold in entries:
        lock = hold(obj)
        if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            _held.append(lock)


def _release_in_parent() -> None:
    while _held:
        _held.pop().release()
    _holding.release()


def _renew_in_child() -> None:
    global _holding
    _held.clear()  # (each is replaced below: held by this thread, they are dropped with the objects' old locks)
    _holding = threading.Lock()
    for ref, renew, _, _ in list(_ALIVE.values()):
        obj = ref()
        if obj is not None:
            renew(obj)


os.register_at_fork(before=_hold_before_fork, after_in_parent=_release_in_parent, after_in_child=_renew_in_child)
