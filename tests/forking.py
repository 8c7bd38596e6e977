"""A test's check run in a forked child of the test's process: the child
exits 0 when check() returns True, 1 when it returns anything else or
raises, and dies of SIGALRM if it is still running after alarm_s (a lock
it waits for that only a thread of the parent would release). And the
worker processes of the many-process tests (worker_context)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from multiprocessing.context import BaseContext
from typing import Callable

# What the many-process tests' workers import, loaded once in the fork
# server: each worker then starts in milliseconds, where a fresh interpreter
# spends about half a second of CPU importing them (the Redis fault harness
# starts some 400 workers).
PRELOAD = ["numpy", "redis", "bloomline", "bloomline.redis", "redis_harness"]


def worker_context() -> BaseContext:
    """Processes forked from multiprocessing's fork server, which has
    imported PRELOAD: a fresh interpreter of its own (no pytest state and no
    connections of the test's process), as a spawned worker's is. Unlike a
    spawned worker's, its environment is the test process's when the server
    started (the first call): a test that changes os.environ for its workers
    must spawn them. A module of PRELOAD that fails to import is left out
    without a word (the worker then imports it itself). The workers are the
    server's children, not the test process's."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


# The end of a test's script: fork a child that outlives the script (its
# output to /dev/null, asleep until the test kills it), print its pid, and
# die without closing anything (the script imports os and time).
FORK_AND_DIE = """
child = os.fork()
if child == 0:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1), os.dup2(devnull, 2)  # (the test reads the parent's output to its end)
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
os._exit(0)
"""


def in_forked_child(check: Callable[[], object], alarm_s: int = 20) -> int:
    """Fork, run check() in the child, and return the child's wait status."""
    pid = os.fork()
    if pid == 0:  # (the child never returns into pytest)
        code = 1
        try:
            signal.alarm(alarm_s)
            code = 0 if check() is True else 1
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def exited_ok(status: int) -> bool:
    """The child ran check() to the end and it returned True."""
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
