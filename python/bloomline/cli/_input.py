"""Reading: the input files (or stdin) in blocks of whole lines, what an
input is (a regular file, a pipe, ...), filter files, the lines counted
ahead for build, the progress drawn while reading, and Ctrl-C in dedup."""

from __future__ import annotations

import contextlib
import io
import os
import queue
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .. import _core
from .._numpy import np
from .._pickling import from_bytes
from .._units import count, format_bytes
from ._errors import PROG, CliError


BLOCK = 1 << 20  # bytes read at a time (a larger block is no faster, and costs resident memory)
# Lines are shorter than this: a buffer grows to hold a line, and input with
# no newline (/dev/zero, a binary file) would otherwise grow it until memory
# ran out.
MAX_LINE_BYTES = 256 << 20


class LineBlocks:
    """The input files (or stdin for none or '-') as blocks of whole lines.

    Each block handed out ends at its last newline, and the part line after
    it moves to the front of the next buffer, for the next read. A line
    longer than the buffer makes the buffer grow; a file's last line without
    a newline is a block of its own. The lines are split and hashed in C++
    (add_lines, contains_lines): no line ever becomes a Python object.

    buffers: how many buffers take turns. With one, a block is valid until
    the next is asked for. ReadAhead, which reads one block ahead on a
    thread of its own, takes three: the block being handled, the one read
    ahead and waiting, and the one being read.
    """

    def __init__(self, files: Sequence[str], block: int = BLOCK, buffers: int = 1) -> None:
        self.names = list(files) or ["-"]
        self.block = block
        self.buffers = buffers
        self.bytes_read = 0
        self.total_bytes: int | None = 0
        for name in self.names:
            size = None
            if name != "-":
                try:
                    st = os.stat(name)
                    size = st.st_size if stat.S_ISREG(st.st_mode) else None
                except OSError:
                    size = None  # reported when it is opened
            self.total_bytes = None if size is None or self.total_bytes is None else self.total_bytes + size

    def __iter__(self) -> Iterator[memoryview]:
        ring = [bytearray(self.block)] + [bytearray(0)] * (self.buffers - 1)  # the others made when first used
        turn = 0

        def next_buffer(size: int) -> bytearray:
            """The next buffer of the ring, of at least size bytes: never resized in place (a block handed out
            may still view it)."""
            nonlocal turn
            turn = (turn + 1) % len(ring)
            if len(ring[turn]) < size:
                ring[turn] = bytearray(size)
            return ring[turn]

        buf = ring[0]
        for name in self.names:
            with _open_input(name) as handle:
                filled = 0
                while True:
                    if filled == len(buf):  # a line longer than the buffer
                        if filled >= MAX_LINE_BYTES:
                            raise CliError(f"{input_name(name)}: a line of {format_bytes(MAX_LINE_BYTES)} or more "
                                           "(no newline in it: not lines of text?)")
                        grown = bytearray(2 * len(buf))
                        grown[:filled] = buf
                        buf = ring[turn] = grown
                    view = memoryview(buf)
                    n = handle.readinto(view[filled:])
                    if not n:
                        if filled:  # a last line without a newline: the next file starts in the next buffer
                            yield view[:filled]
                            buf = next_buffer(len(buf))
                        break
                    self.bytes_read += n
                    end = filled + n
                    cut = buf.rfind(b"\n", filled, end) + 1
                    if cut == 0:
                        filled = end
                        continue
                    yield view[:cut]
                    view.release()
                    rest = end - cut
                    nxt = next_buffer(len(buf))
                    nxt[:rest] = buf[cut:end]
                    buf = nxt
                    filled = rest


class ReadAhead:
    """LineBlocks read one block ahead on a thread of its own, so that the
    next block is read while this one is handled (the read releases the
    GIL). Iterated like LineBlocks: a block is valid until the next is asked
    for. An error of the reading is raised where the block would have come.
    When the consumer stops early the reader stops too, at its next block.
    For regular files only (regular_inputs): a reader waiting on a pipe
    could not be stopped, and would take input meant for the next reader."""

    def __init__(self, blocks: LineBlocks) -> None:
        self.blocks = blocks
        self.total_bytes = blocks.total_bytes

    @property
    def bytes_read(self) -> int:
        return self.blocks.bytes_read

    def __iter__(self) -> Iterator[memoryview]:
        # One block waiting here, one handled by the consumer, one being read: LineBlocks' three buffers.
        ready: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def hand(item: tuple[str, Any]) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def read() -> None:
            blocks = iter(self.blocks)
            try:
                for block in blocks:
                    if not hand(("block", block)):
                        return
                hand(("end", None))
            except BaseException as exc:  # raised by the consumer, where the block would have come
                hand(("error", exc))
            finally:
                blocks.close()  # type: ignore[attr-defined]  # (a generator: its files are closed now)

        try:
            threading.Thread(target=read, name="bloomline-read-ahead", daemon=True).start()
            while True:
                what, item = ready.get()
                if what == "end":
                    return
                if what == "error":
                    raise item
                yield item
        finally:
            stop.set()


class _open_input:
    """A file of the input (or stdin), with one-line errors."""

    def __init__(self, name: str) -> None:
        self.name = name
        # Unbuffered: readinto returns what one read() gives, so a pipe's
        # lines are handled as they come, not when 4 MiB have gathered.
        if name == "-":
            self.handle: io.RawIOBase = sys.stdin.buffer.raw  # type: ignore[union-attr]
            return
        try:
            self.handle = open(name, "rb", buffering=0)  # noqa: SIM115 - closed by __exit__
        except OSError as exc:
            raise CliError(f"cannot read {name!r}: {exc.strerror}") from None

    def __enter__(self) -> io.RawIOBase:
        return self.handle

    def __exit__(self, *exc: object) -> None:
        if self.name != "-":
            self.handle.close()


def input_name(name: str) -> str:
    """An input as errors name it."""
    return "stdin" if name == "-" else repr(name)


def input_stat(name: str) -> os.stat_result | None:
    """What an input is: fstat of stdin for '-', stat of a path (so /dev/stdin
    and <(...) are the pipes they lead to, whatever their names); None when
    it cannot be stat'ed (the error comes when it is opened)."""
    try:
        return os.fstat(sys.stdin.fileno()) if name == "-" else os.stat(name)
    except (OSError, ValueError):
        return None


def regular_inputs(files: Sequence[str]) -> bool:
    """Whether every input is a regular file named by its path (not stdin),
    so that reading ahead on a thread never waits on, nor takes, input that
    someone else reads next."""
    names = list(files) or ["-"]
    return all(name != "-" and (st := input_stat(name)) is not None and stat.S_ISREG(st.st_mode) for name in names)


def what_it_is(st: os.stat_result) -> str:
    mode = st.st_mode
    return ("a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a terminal or device" if stat.S_ISCHR(mode) else "not a regular file")


def filter_bytes(path: str) -> bytes:
    """A filter file's bytes ('-': stdin). A regular file is read as load()
    reads it (under its header lock, so a file that writers share is never
    half read); a pipe or a device as a stream load() reads: its header
    first, checked before more is read (an endless stream, /dev/zero, is
    refused at once, never read to its end), then the length it names, and
    nothing may follow."""
    try:
        if path != "-" and stat.S_ISREG(os.stat(path).st_mode):
            return _core.read_file(path)
        with contextlib.nullcontext(sys.stdin.buffer) if path == "-" else open(path, "rb") as f:
            try:
                data = _core.load_bytes(f)
            except ValueError as exc:
                raise CliError(f"{input_name(path)}: {exc}") from None
            except MemoryError as exc:  # (the length its header names is made before the rest is read)
                raise CliError(f"{input_name(path)}: its header names a filter larger than this machine could give "
                               f"({exc}): damaged, or not read") from None
            if f.read(1):
                raise CliError(f"{input_name(path)}: more bytes follow the filter's {len(data)} (one filter a "
                               "stream)")
            return data
    except OSError as exc:
        raise CliError(f"cannot read {input_name(path)}: {os.strerror(exc.errno) if exc.errno else exc}") from None


def open_filter(path: str, data: bytes | None = None) -> Any:
    """The filter in a file (its bytes when already read); a file that is not
    one is one line naming it."""
    if data is None:
        data = filter_bytes(path)
    try:
        return from_bytes(data)
    except ValueError as exc:
        raise CliError(f"{input_name(path)}: {exc}") from None


def count_lines(files: Sequence[str]) -> int:
    """Lines in the input, read once in blocks (for build's capacity); only
    regular files are given, and stdin is put back where it was."""
    start = os.lseek(sys.stdin.fileno(), 0, os.SEEK_CUR) if "-" in files else None
    lines = 0
    for block in LineBlocks(files):
        chars = np.frombuffer(block, dtype=np.uint8)
        lines += int(np.count_nonzero(chars == 10)) + int(chars[-1] != 10)  # a last line without a newline
    if start is not None:
        os.lseek(sys.stdin.fileno(), start, os.SEEK_SET)
    return lines


class Progress:
    """Progress on stderr while reading input, redrawn at most every half
    second and only when stderr is a terminal (piped output stays clean):
    bytes and lines read, their rates, and the percentage where the input's
    size is known."""

    def __init__(self, total_bytes: int | None, quiet: bool = False) -> None:
        self.total = total_bytes
        self.enabled = sys.stderr.isatty() and not quiet
        self.start = self.last = time.monotonic()
        self.shown = False

    def update(self, done_bytes: int, lines: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.5:
            return
        self.last = now
        secs = max(now - self.start, 1e-9)
        share = f" ({100 * done_bytes / self.total:.0f}%)" if self.total else ""
        sys.stderr.write(
            f"\r{PROG}: {format_bytes(done_bytes)}{share}, {count(lines, 'line')}; "
            f"{format_bytes(done_bytes / secs)}/s, {lines / secs:,.0f} lines/s\x1b[K"
        )
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


class _StopReading(Exception):
    pass


class Interrupt:
    """Ctrl-C in dedup. While it waits for input, the reading stops at once.
    While a block is handled (its keys added, its new lines written) it is
    noted and the block finished -- every line of it written, however slow
    the reader -- then the command stops as if the input had ended, so a
    --state file holds exactly the lines written. A second Ctrl-C in a block
    gives it up (KeyboardInterrupt), and --state is not saved. While the
    state is saved it is only noted."""

    def __init__(self) -> None:
        self.hit = False
        # "read": Ctrl-C stops the reading; "block": noted, a second gives up; "note": only noted (before the
        # first read, so no Ctrl-C escapes as _StopReading, and while the state is saved)
        self.phase = "note"
        self.previous: Any = None

    def __enter__(self) -> Interrupt:
        def note(signum: int, frame: Any) -> None:
            again, self.hit = self.hit, True
            if self.phase == "read":
                raise _StopReading
            if self.phase == "block" and again:
                raise KeyboardInterrupt

        self.previous = signal.signal(signal.SIGINT, note)
        return self

    def blocks(self, blocks: Iterable[memoryview]) -> Iterator[memoryview]:
        """The blocks, with `phase` "block" while each is handled."""
        try:
            lines = iter(blocks)
            while True:
                self.phase = "read"  # before the check: a Ctrl-C from here on raises
                if self.hit:
                    break
                try:
                    block = next(lines)
                except StopIteration:
                    break
                self.phase = "block"
                yield block
        except _StopReading:
            pass
        self.phase = "note"

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)
