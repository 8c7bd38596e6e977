"""Fresh locks in a forked child, for every object that asked, and steps
that a fork does not cut in two.

A lock that a thread of the parent held at the fork stays held in the
child, where that thread does not exist: the child's next close, save or
pickle would wait on it forever. Objects that hold such locks (the windowed
filter, the scalable chain, the frontier's queue, a DirectoryStages lock)
register a function that gives them fresh ones; after a fork the child
calls it for each of them still alive.

A step on another thread (a chain's batch add and its stage counts, a
queue's add to its seen-set and the queueing of the new keys, a lock file
being taken and recorded; not a chain's single add, whose child would at
worst count one key less) would reach the child half done: keys seen and
never queued, a stage's count behind its bits, a lock the child holds a
copy of unknown to it. Such steps run under ``step()``: a fork waits until
the steps under way on other threads have ended (steps that start
meanwhile wait for the fork), for at most HOLD_S; a step of the forking
thread itself (a callback that forks) is not waited for. A step that has
not ended by then (a call on a server that does not answer) reaches the
child as it is. A step takes its object's lock first, then the gate, so a
thread waiting for a lock is not a step under way. A Ctrl-C while a fork
made on the main thread waits is kept (its handler set aside meanwhile) and
raised once the fork has returned.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import threading
import time
import weakref
from typing import Any, Callable, Optional

HOLD_S = 10.0  # how long a fork waits for the steps under way on other threads

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


class _Gate:
    """Steps under way (a thread's nested steps count once), and the fork
    that waits for them (the forking thread's ident)."""

    def __init__(self, busy: int = 0) -> None:
        self.lock = threading.Lock()  # (a step's own count, taken bare: the Condition's wrapper costs more)
        self.cond = threading.Condition(self.lock)
        self.busy = busy
        self.forking: Optional[int] = None
        self.interrupted = False  # a Ctrl-C came while the fork waited
        self.sigint: Any = None  # the SIGINT handler the fork set aside (forked on the main thread)


_gate = _Gate()
_depth = threading.local()  # this thread's steps under way (nested)
_get_ident = threading.get_ident


class _Step:
    """``with step():``: see the module doc. Reentrant on one thread."""

    __slots__ = ()

    def __enter__(self) -> None:
        depth = getattr(_depth, "n", 0)
        if depth == 0:
            gate = _gate
            gate.lock.acquire()
            try:
                while gate.forking is not None and gate.forking != _get_ident():
                    gate.cond.wait()  # (a fork under way: this step starts after it)
                gate.busy += 1
            finally:
                gate.lock.release()
        _depth.n = depth + 1

    def __exit__(self, *exc: object) -> None:
        depth = _depth.n - 1
        _depth.n = depth
        if depth == 0:
            gate = _gate
            gate.lock.acquire()
            gate.busy -= 1
            if gate.forking is not None:
                gate.cond.notify_all()
            gate.lock.release()


_STEP = _Step()


def step() -> _Step:
    """A context for a step a fork must not cut in two (the module doc)."""
    return _STEP


def _keep_sigint(signum: int, frame: Any) -> None:
    _gate.interrupted = True


def _hold_before_fork() -> None:
    gate, me = _gate, threading.get_ident()
    mine = 1 if getattr(_depth, "n", 0) else 0  # (this thread's own step: the fork is made inside it)
    deadline = time.monotonic() + HOLD_S
    # A Ctrl-C is kept for after the fork: raised in a fork's hook it would
    # be lost (CPython drops a hook's exceptions), and the fork go on.
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, TypeError, OSError):
            gate.sigint = signal.signal(signal.SIGINT, _keep_sigint)
    while True:
        try:
            with gate.cond:
                while gate.forking not in (None, me) and time.monotonic() < deadline:
                    gate.cond.wait(max(0.001, deadline - time.monotonic()))  # (another thread's fork first)
                gate.forking = me
                while gate.busy > mine and time.monotonic() < deadline:
                    gate.cond.wait(max(0.001, deadline - time.monotonic()))
            return
        except KeyboardInterrupt:
            gate.interrupted = True  # (and the wait goes on, to its deadline)


def _put_back_sigint(gate: _Gate) -> None:
    handler, gate.sigint = gate.sigint, None
    if handler is not None:
        with contextlib.suppress(ValueError, TypeError, OSError):
            signal.signal(signal.SIGINT, handler)


def _release_in_parent() -> None:
    gate = _gate
    _put_back_sigint(gate)
    with gate.cond:
        if gate.forking != threading.get_ident():
            return  # (this thread's wait was cut short before its turn: another fork's gate is not its own)
        gate.forking = None
        interrupted, gate.interrupted = gate.interrupted, False
        gate.cond.notify_all()
    if interrupted:
        # The Ctrl-C kept while the fork waited, raised once it has returned
        # (from this hook it would be dropped too): by another thread, which
        # runs once this one has let go of the GIL, past the fork by then
        # (started without waiting for it, as threading.Thread would).
        _thread.start_new_thread(_interrupt_soon, ())


def _interrupt_soon() -> None:
    time.sleep(0.01)
    _thread.interrupt_main()


def _renew_in_child() -> None:
    global _gate
    _put_back_sigint(_gate)
    _gate = _Gate(busy=1 if getattr(_depth, "n", 0) else 0)  # (the other threads' steps are not in the child)
    for ref, renew in list(_ALIVE.values()):
        obj = ref()
        if obj is not None:
            renew(obj)


os.register_at_fork(before=_hold_before_fork, after_in_parent=_release_in_parent, after_in_child=_renew_in_child)
