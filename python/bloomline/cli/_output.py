"""Writing: lines to stdout whole (or a one-line error), filters to files
atomically or straight through, remarks on stderr, and the checks made
before any input is read (an output that is also an input, an output that
saving would refuse at the end)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import queue
import select
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _core
from ._errors import PROG, CliError, UsageError
from ._input import input_stat


class OutputError(CliError):
    """stdout refused part of what was written; `written` bytes of it went out."""

    def __init__(self, exc: OSError, written: int) -> None:
        super().__init__(f"cannot write the output: {exc.strerror or exc}")
        self.written = written


def _stdout_fd() -> int:
    try:
        return sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # None, closed, or replaced in-process
        return 1


def write_all(data: bytes | memoryview) -> None:
    """Write all of data to stdout, or raise OutputError (BrokenPipeError as
    it is). A raw write may take only part (a signal, a disk filling up, and
    under PYTHONUNBUFFERED sys.stdout.buffer is a raw FileIO whose short
    writes went unchecked): the rest is written until none is left."""
    if sys.stdout is not None:
        sys.stdout.flush()  # text written before comes first
    fd = _stdout_fd()
    view = memoryview(data).cast("B")
    total = len(view)
    while view:  # each pass writes at least one byte or raises: at most `total` passes
        try:
            n = os.write(fd, view)
        except BlockingIOError:  # stdout left non-blocking by whoever started us: wait until it takes more
            select.select([], [fd], [])
            continue
        except BrokenPipeError as exc:
            exc.written = total - len(view)  # type: ignore[attr-defined]  # (the bytes written before it)
            raise
        except OSError as exc:
            raise OutputError(exc, total - len(view)) from None
        if n <= 0:
            raise OutputError(OSError(errno.EIO, "the output took no bytes"), total - len(view))
        view = view[n:]


def stdout_is_regular() -> bool:
    """Whether stdout is a regular file: a write to it never waits on a
    reader (WriteBehind is for such output only)."""
    try:
        return stat.S_ISREG(os.fstat(_stdout_fd()).st_mode)
    except OSError:
        return False


class WriteBehind:
    """write(data) on a thread of its own, one block behind: the caller goes
    on to read and add the next block while this one is written (the write
    releases the GIL). write() first waits for the write before it, and
    wait() for the last; each raises what that write raised. For output to a
    regular file only (stdout_is_regular): a write blocked on a pipe could
    not be stopped, and its failure would be seen only at the next block.
    close() ends the thread once its write has ended; the caller calls it on
    every way out."""

    def __init__(self, write: Any) -> None:
        self._write = write
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bloomline-write-behind", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            try:
                if data is None:
                    return
                if self._error is None:
                    self._write(data)
            except BaseException as exc:  # raised by the caller's next write() or wait()
                self._error = exc
            finally:
                self._queue.task_done()

    def wait(self) -> None:
        """Until the last block handed over is written; raises what its write raised."""
        self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def write(self, data: bytes) -> None:
        """Hands data over once the write before it has ended."""
        self.wait()
        self._queue.put(data)

    def close(self) -> None:
        """Ends the thread, once what was handed over is written (or has failed)."""
        self._queue.put(None)
        self._thread.join()


def hold_standard_fds() -> None:
    """A standard descriptor closed at the start (`>&-`, `<&-`) is held by
    /dev/null opened the other way, so that no file this run opens takes
    its number (a state's lock file took fd 1, and dedup's output went into
    it, saved as seen), and using it fails as a closed one does: reading
    stdin or writing stdout is EBADF, one line. (Python sets sys.stdin,
    stdout and stderr to None for a closed one: they are made again over
    the placeholders.)"""
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, flags)
            if held != fd:
                os.dup2(held, fd)
                os.close(held)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)


def whole_text_writes() -> None:
    """Under PYTHONUNBUFFERED (python -u) sys.stdout writes through a raw
    FileIO and drops what a short write leaves; a BufferedWriter between
    writes all of it or raises. Line-buffered, so output still comes at once."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if out is not sys.__stdout__ or out is None or not isinstance(raw, io.RawIOBase):
        return
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=out.encoding, errors=out.errors,
                                  line_buffering=True)


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit has
    nothing left to fail on."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def note(message: str) -> None:
    """A remark on stderr, one line, that is not an error."""
    sys.stderr.write(f"{PROG}: note: {message}\n")


def refuse_same_file(command: str, outputs: Sequence[tuple[str, str]], inputs: Sequence[str]) -> None:
    """Refuse, before anything is read, an output that is also an input or
    another output: OUT or --state would replace (or stdout grow) a file
    being read. Found by what the files are (stat follows symlinks; hard
    links share an inode), not by their names; regular files only, as cat
    does (a terminal or /dev/null may well be both). outputs: (what it is,
    path or '-' for stdout); inputs: paths or '-' for stdin."""
    seen: list[tuple[str, os.stat_result]] = []
    for name in inputs:
        st = input_stat(name)
        if st is not None and stat.S_ISREG(st.st_mode):
            seen.append(("stdin" if name == "-" else f"the input {name!r}", st))
    for what, path in outputs:
        try:
            st = os.fstat(_stdout_fd()) if path == "-" else os.stat(path)
        except OSError:
            continue  # a new file, or one the writer will report
        if not stat.S_ISREG(st.st_mode):
            continue
        shown = "stdout" if path == "-" else f"{what} {path!r}"
        for other, other_st in seen:
            if os.path.samestat(st, other_st):
                raise UsageError(f"{shown} is {other} (the same file): {command} would write over what it reads; "
                                 f"name another {'file' if path == '-' else what}")
        seen.append((shown, st))


def _saved_atomically(path: str) -> bool:
    """A regular file or a new path is saved atomically, through any
    symlinks to it (the core follows them and replaces the file they lead
    to, with its refusals: mapped for writing elsewhere, read-only).
    Anything else -- '-' for stdout, a pipe, a device, and a path through
    /dev/std*, /dev/fd or /proc such as /dev/stdout (an open file of this
    process, which a rename would not reach) -- is written straight through.
    A file under /dev that is a file (/dev/shm's) is saved atomically too."""
    if path == "-":
        return False
    at = path
    for _ in range(40):
        if at.startswith(("/dev/std", "/dev/fd/", "/proc/")):
            return False
        if not os.path.islink(at):
            break
        at = os.path.join(os.path.dirname(at), os.readlink(at))
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def check_output(path: str) -> None:
    """Refuse now what saving to path would refuse at the end (a file mapped
    for writing elsewhere, a read-only file, a missing directory), before
    any input is read or any line written."""
    if not _saved_atomically(path):
        return
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise CliError(f"cannot write {path!r}: no such directory {parent!r}")
    # The atomic save makes a new file beside path and renames it: the directory must take both.
    try:
        read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise CliError(f"cannot write {path!r}: its directory {parent!r} is on a read-only file system")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CliError(f"cannot write {path!r}: this user may not make files in its directory {parent!r}")
    try:
        _core.AtomicWriter.check(path)
    except ValueError as exc:
        raise CliError(str(exc)) from None


@contextlib.contextmanager
def holding_state(path: str) -> Iterator[None]:
    """--state held by this run from its load to its save. Two runs on one
    state at once would each start from the same filter, and the second to
    save would drop the lines only the first wrote (a rerun would print them
    again): the second is refused. The lock is flock(2) on '<state>.lock'
    beside the file the state resolves to, kept between runs: the kernel lets
    go of it when its process ends, so a killed run leaves nothing to clean."""
    if not _saved_atomically(path):
        yield
        return
    lock = os.path.realpath(path) + ".lock"
    try:  # (as the umask allows: users sharing a state directory share its lock; flock needs no write access)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except (PermissionError, OSError) as exc:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            raise CliError(f"cannot lock --state {path!r}: {lock!r}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliError(f"--state {path!r} is in use by another {PROG} run (it holds {lock!r}): two runs on one "
                           "state at once would each save without the other's lines. Run them one after the "
                           "other, or give each its own --state") from None
        yield
    finally:
        os.close(fd)


def write_filter(f: Any, path: str, *, shared: bool = False) -> None:
    """Save f to path: atomically through the filters' own save (the one
    atomic writer, with its refusals) or straight through (_saved_atomically).
    shared: a windowed filter's ring form (save(path, shared=True)), to a file."""
    if path == "-":
        write_all(f.to_bytes())
    elif not _saved_atomically(path):
        with open(path, "wb") as out_file:
            out_file.write(f.to_bytes())
    else:
        try:
            f.save(path, **({"shared": True} if shared else {}))
        except ValueError as exc:  # mapped for writing by another handle
            raise CliError(str(exc)) from None
