"""Fresh locks in a forked child, for every object that asked, and no
copies of lock files that are not the child's.

A lock that a thread of the parent held at the fork stays held in the
child, where that thread does not exist: the child's next close, save or
pickle would wait on it forever. Objects that hold such locks (the windowed
filter, the scalable chain, the frontier's queue, a directory's lock)
register a function that gives them fresh ones; after a fork the child
calls it for each of them still alive.

A lock file (flock) is held while any copy of its descriptor is open: a
child's copy of its parent's would keep a dead parent's directory or
journals held while the child lives. The child closes each descriptor of
such a file it inherited (close_inherited_locks), whether or not the object
that took it had recorded it yet (a fork from another thread may come
between the two).

A fork does not wait for a step under way on another thread (a batch add,
a push): the child gets the objects as they were at that moment
(docs/design/threads.md says what that leaves, and why a wait was tried and
withdrawn).
"""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from typing import Any, Callable

# id(obj) -> (a weak reference to obj, the function that renews its locks)
_ALIVE: dict[int, tuple[weakref.ref[Any], Callable[[Any], None]]] = {}
# The names of the lock files a child lets go of (the owners' and a directory's).
_LOCK_FILES = re.compile(r"(?:\.owner\.[0-9]+-[0-9a-f]+\.lock(?:\.new)?|bloomline-seen\.lock)")


def renew_locks_after_fork(obj: Any, renew: Callable[[Any], None]) -> None:
    """renew(obj) in each forked child of this process while obj lives
    (a second registration of obj replaces the first)."""
    key = id(obj)
    _ALIVE[key] = (weakref.ref(obj, lambda _ref: _forget(key, _ref)), renew)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    entry = _ALIVE.get(key)
    if entry is not None and entry[0] is ref:  # (not a later object that took the same id)
        del _ALIVE[key]


def close_inherited_locks() -> None:
    """In a forked child: close every descriptor open on one of bloomline's
    lock files (Linux's /proc; elsewhere the recorded ones alone are closed
    by their objects)."""
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                if _LOCK_FILES.fullmatch(os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))):
                    os.close(int(fd))


def _renew_in_child() -> None:
    for ref, renew in list(_ALIVE.values()):
        obj = ref()
        if obj is not None:
            renew(obj)
    close_inherited_locks()


os.register_at_fork(after_in_child=_renew_in_child)
