"""Fresh locks in a forked child, for every object that asked.

A lock that a thread of the parent held at the fork stays held in the
child, where that thread does not exist: the child's next close, save or
pickle would wait on it forever. Objects that hold such locks (the windowed
filter, the frontier's queue) register a function that gives them fresh
ones; after a fork the child calls it for each of them still alive.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable

# id(obj) -> (a weak reference to obj, the function that renews its locks)
_ALIVE: dict[int, tuple[weakref.ref[Any], Callable[[Any], None]]] = {}


def renew_locks_after_fork(obj: Any, renew: Callable[[Any], None]) -> None:
    """renew(obj) in each forked child of this process while obj lives
    (a second registration of obj replaces the first)."""
    key = id(obj)
    _ALIVE[key] = (weakref.ref(obj, lambda _ref: _forget(key, _ref)), renew)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    entry = _ALIVE.get(key)
    if entry is not None and entry[0] is ref:  # (not a later object that took the same id)
        del _ALIVE[key]


def _renew_in_child() -> None:
    for ref, renew in list(_ALIVE.values()):
        obj = ref()
        if obj is not None:
            renew(obj)


os.register_at_fork(after_in_child=_renew_in_child)
