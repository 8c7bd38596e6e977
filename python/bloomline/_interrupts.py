"""Ctrl-C held back across a batch call and what must follow it.

A batch add runs in C: no Python code runs until it returns, so a SIGINT
that arrives meanwhile is raised at the first step after it returns, before
its answers are stored. A caller that must act on those answers (the
frontier queues the new keys; the chain counts them) would lose them: keys
marked seen and never queued, a stage fuller than its count says. Within
``interrupts_held()`` a SIGINT is recorded instead and handed to the handler
that was there when the block ends: the batch and its bookkeeping finish,
then KeyboardInterrupt (or the program's own handler) follows.

Only the main thread runs Python signal handlers, so only it holds them
back, and only where SIGINT has a Python handler. Setting a handler costs
about 13 us, so this guards batch calls, not single keys.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Optional

__all__ = ["interrupts_held"]


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """A SIGINT during the block is handed to SIGINT's handler after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    if not callable(before):  # (SIG_DFL kills the process, SIG_IGN drops the signal: nothing to hold back)
        yield
        return
    caught: list[Optional[FrameType]] = []
    signal.signal(signal.SIGINT, lambda _signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if caught:
            before(signal.SIGINT, caught[0])
