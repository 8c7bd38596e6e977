"""A call with a real Ctrl-C (SIGINT) sent to this process partway through."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable


def with_sigint_after(delay_s: float, call: Callable[[], Any]) -> None:
    """call() with a SIGINT sent after delay_s seconds; the KeyboardInterrupt,
    raised in the call or just after it, is taken here."""
    timer = threading.Timer(delay_s, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        call()
        timer.join()  # (a signal sent after the call is raised by the end of the sleep)
        time.sleep(0.2)
    except KeyboardInterrupt:
        timer.join()
