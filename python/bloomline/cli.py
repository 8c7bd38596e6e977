"""The ``bloomline`` command (also ``python -m bloomline``).

Subcommands:
  demo    deduplicate a synthetic stream of crawl URLs, beside a Python set
  dedup   print each first occurrence of the input lines (files or stdin);
          --state FILE keeps the filter between runs, --redis URL --key K
          shares it between machines
  build   keys (one per line) -> a filter file
  query   the keys that may be in a filter file (--absent: the others)
  info    a filter file's header and fill
  params  memory and hashes per layout for a capacity and error rate
  bench   a quick local benchmark
  redis-module  the path of bloomline's Redis module (redis-server --loadmodule PATH)

Exit codes follow Unix tools: 0 success, 1 failure while working (a file that
cannot be read, ...), 2 bad usage. Errors are one line on stderr, naming the
path the user gave. Inputs are told apart by what they are (stat), not by
their names: only a regular file can be read twice (build counts its lines
first), so a pipe, a FIFO or ``<(...)`` needs ``--capacity``.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import select
import signal
import stat
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from . import (BloomFilter, CapacityWarning, CountingBloomFilter, ScalableBloomFilter, __version__, _core,
               false_positive_rate, optimal_params, read_header, select_lines)
from ._pickling import from_bytes
from ._protocol import Filter
from ._units import count, format_bytes

PROG = "bloomline"


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


class UsageError(Exception):
    """Bad usage found after parsing: one line, exit status 2."""


# ---------------------------------------------------------------------------
# argument types: a bad value is a usage error (exit 2) naming the option


def _positive_int(text: str) -> int:
    """1000000, 1_000_000 or 1e6 (a number written in any of Python's ways
    that is a whole number), at least 1."""
    from decimal import Decimal, InvalidOperation

    value: int | None = None
    try:
        value = int(text)
    except ValueError:
        try:
            exact = Decimal(text.strip())  # exact: 1e6 and 1.5e6 are whole, 1.5 is not
            if exact.is_finite() and exact == exact.to_integral_value():
                value = int(exact)
        except InvalidOperation:
            pass
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r} (1000000, 1_000_000 and 1e6 "
                                         "are all taken)")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    _intermixing = False

    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, exit status 2, as Unix tools do (argparse prints usage too).
        self.exit(2, f"{PROG}: error: {message}\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override, unused-ignore]
        # Options may come between positionals (build out.blf --capacity 10 in.txt): plain argparse gives
        # FILE... the empty list at OUT and then refuses in.txt. A command's parser (no subcommands of its
        # own, which intermixed parsing does not take) reads them intermixed; the flag stops the recursion
        # on the Pythons whose parse_known_intermixed_args calls parse_known_args.
        if self._intermixing or any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Fast Bloom filters: URL dedup and friends.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser(
        "demo", help="deduplicate a synthetic stream of crawl URLs, beside a Python set",
        description="Deduplicate a synthetic stream of crawl URLs three ways -- a Python set, BloomFilter.add in a "
        "loop, one add_many batch -- and print the time, memory and lines kept by each.")
    demo.add_argument("--urls", type=_positive_int, default=1_000_000, help="stream length (default 1,000,000)")
    demo.add_argument(
        "--error-rate", type=_rate, default=0.001, help="target false-positive rate (default 0.001)"
    )
    demo.add_argument("--seed", type=int, default=2026, help="random seed of the synthetic stream")

    dedup = sub.add_parser(
        "dedup",
        help="write each first occurrence of the input lines to stdout",
        description="Write each line the first time it is seen (by a Bloom filter) to stdout; "
        "a summary goes to stderr. Lines compare without their line ending (\\n or \\r\\n). "
        "A false positive drops a line that was new: --error-rate bounds how often.",
    )
    dedup.add_argument("files", nargs="*", default=[], metavar="FILE", help="input files (default or '-': stdin)")
    dedup.add_argument(
        "--capacity", type=_positive_int, help="distinct lines expected (default 10,000,000; with --state, the "
        "state file's)"
    )
    dedup.add_argument(
        "--error-rate", type=_rate, help="false-positive rate at capacity (default 1e-6; with --state, the state "
        "file's)"
    )
    dedup.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    dedup.add_argument("--state", metavar="FILE", help="keep the filter in FILE between runs (loaded if it exists, "
                       "saved atomically at the end)")
    dedup.add_argument("--redis", metavar="URL", help="share the filter through Redis at URL (needs --key)")
    dedup.add_argument("--key", help="the Redis key of the shared filter")

    build = sub.add_parser(
        "build", help="build a filter file from keys (one per line)",
        description="Read keys, one per line (the line ending is not part of the key), into a new filter and save "
        "it to OUT atomically. Without --capacity the input's lines are counted first, which needs regular files: "
        "a pipe, a FIFO or <(...) can be read only once.")
    build.add_argument("output", metavar="OUT", help="the filter file to write ('-': stdout)")
    build.add_argument("files", nargs="*", default=[], metavar="FILE", help="key files (default or '-': stdin)")
    build.add_argument("--capacity", type=_positive_int,
                       help="keys expected (default: the number of input lines, counted first; needed for stdin)")
    build.add_argument("--error-rate", type=_rate, default=0.01, help="false-positive rate at capacity (default 0.01)")
    build.add_argument("--layout", choices=["blocked", "standard"], default="blocked")
    build.add_argument("--counting", action="store_true", help="a CountingBloomFilter (4-bit counters)")
    build.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")

    query = sub.add_parser(
        "query", help="print the keys that may be in a filter file",
        description="Print each input line whose key may be in the filter (a false positive is printed too, at the "
        "filter's rate); --absent prints the lines certainly not in it.")
    query.add_argument("filter", metavar="FILTER", help="a filter file (from build or save; '-': stdin)")
    query.add_argument("files", nargs="*", default=[], metavar="FILE", help="key files (default or '-': stdin)")
    query.add_argument("--absent", action="store_true", help="print the keys certainly absent instead")
    query.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")

    info = sub.add_parser(
        "info", help="show a filter file's header and fill",
        description="Print a filter file's header (after every check a reader makes), its fill as a fraction, the "
        "bits (or counters) set, the estimated number of keys and the expected false-positive rate.")
    info.add_argument("filter", metavar="FILTER", help="a filter file ('-': stdin)")
    info.add_argument("--json", action="store_true", help="machine-readable output")

    params = sub.add_parser(
        "params", help="memory and hashes for a capacity and error rate, per layout",
        description="Print the bits, memory, bits per key, hashes and expected false-positive rate of a filter of "
        "each layout sized for --capacity keys at --error-rate.")
    params.add_argument("--capacity", type=_positive_int, required=True)
    params.add_argument("--error-rate", type=_rate, required=True)

    sub.add_parser("redis-module", help="print the path of bloomline's Redis module (for redis-server --loadmodule)",
                   description="Print the path of bloomline's Redis module, for redis-server --loadmodule PATH.")

    rd = sub.add_parser(
        "redis", help="move filters into, out of and between Redis servers",
        description="Filters that travel: dump a Redis filter or chain to a file, restore one, or import a "
        "scrapy-redis fingerprint set into the filter RedisBloomDupeFilter uses.")
    rsub = rd.add_subparsers(dest="redis_command", metavar="ACTION", parser_class=_Parser)
    rsub.required = True
    dump = rsub.add_parser(
        "dump", help="write a Redis filter or chain to a file",
        description="Write the filter or growing chain at KEY to FILE, a bloomline file (a chain as kind 3), "
        "which `restore` puts back on any server and ScalableBloomFilter.load (or BloomFilter.load) reads locally.")
    dump.add_argument("url", metavar="URL", help="the Redis server (redis://host:port/db)")
    dump.add_argument("key", metavar="KEY", help="the filter's or chain's key")
    dump.add_argument("output", metavar="FILE", help="the file to write, atomically ('-': stdout)")
    restore = rsub.add_parser(
        "restore", help="put a filter file into Redis",
        description="Put FILE (a BloomFilter, or a ScalableBloomFilter as `dump` writes one) into Redis at KEY, "
        "answering as the file does.")
    restore.add_argument("input", metavar="FILE", help="the filter file ('-': stdin)")
    restore.add_argument("url", metavar="URL", help="the Redis server (redis://host:port/db)")
    restore.add_argument("key", metavar="KEY", help="where to put it")
    restore.add_argument("--replace", action="store_true", help="drop a filter or chain already at KEY first")
    restore.add_argument("--backend", choices=["auto", "module", "plain"], default="auto")
    imp = rsub.add_parser(
        "import-set", help="import a scrapy-redis fingerprint set into RedisBloomDupeFilter's filter",
        description="Read the scrapy-redis fingerprint set at SET_KEY with SSCAN and add its fingerprints to the "
        "growing filter RedisBloomDupeFilter attaches to (INTO, by default the same name, as both default to "
        "%%(spider)s:dupefilter). The filter records the rule the fingerprints were made by, and the dupefilter "
        "fingerprints requests by it. Interrupted, it resumes where it stopped; at the end every member is looked "
        "up in the filter, and the set is deleted only with --delete-set after that check passes.")
    imp.add_argument("url", metavar="URL", help="the Redis server (redis://host:port/db)")
    imp.add_argument("set_key", metavar="SET_KEY", help="scrapy-redis's set, e.g. myspider:dupefilter")
    imp.add_argument("--into", metavar="KEY", help="the dupefilter's key (default: SET_KEY)")
    imp.add_argument("--rule", default="scrapy-redis", choices=["scrapy-redis", "scrapy-legacy", "scrapy"],
                     help="how the fingerprints were made (default: scrapy-redis 0.8 and later; scrapy-legacy: "
                     "scrapy-redis before 0.8)")
    imp.add_argument("--error-rate", type=_rate, default=1e-4,
                     help="the crawl's BLOOMLINE_ERROR_RATE (default 1e-4)")
    imp.add_argument("--backend", choices=["auto", "module", "plain"], default="auto")
    imp.add_argument("--delete-set", action="store_true", help="delete the set once every fingerprint is checked")
    imp.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")

    bench = sub.add_parser(
        "bench", help="a quick local benchmark (the full one: benchmarks/run.py)",
        description="Time adds and lookups per key for each layout (one call per key, batches of str and of "
        "integers) beside a Python set, and print ns per key.")
    bench.add_argument("--keys", type=_positive_int, default=1_000_000, help="keys per workload (default 1,000,000)")
    return parser


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


def _peak_rss() -> str:
    """This process's peak resident memory (VmHWM: ru_maxrss would keep the
    peak of the process that forked us across exec)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return format_bytes(int(line.split()[1]) * 1024)
    except OSError:
        pass
    import resource

    return format_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # KiB on Linux


# ---------------------------------------------------------------------------
# demo


def _synthetic_urls(count: int, seed: int) -> tuple[list[str], int]:
    """A crawl-like stream: URLs on 2,000 hosts, ~60% distinct, repeats
    scattered through the stream as link graphs repeat them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    distinct = max(1, int(count * 0.6))
    hosts = [f"https://www.site{h:04d}.example" for h in range(2_000)]
    host_of = rng.integers(0, len(hosts), size=distinct)
    pages = [f"{hosts[h]}/articles/{i:08x}/index.html?ref=feed" for i, h in enumerate(host_of.tolist())]
    # Every distinct URL appears at least once; the rest are repeats.
    order = np.concatenate([np.arange(distinct), rng.integers(0, distinct, size=count - distinct)])
    rng.shuffle(order)
    return [pages[i] for i in order.tolist()], distinct


def cmd_demo(args: argparse.Namespace) -> int:
    out = sys.stdout
    count = args.urls
    out.write(f"bloomline {__version__} demo: deduplicating {count:,} synthetic crawl URLs\n")
    start = time.perf_counter()
    stream, distinct = _synthetic_urls(count, args.seed)
    out.write(f"  generated the stream in {time.perf_counter() - start:.2f} s: {distinct:,} distinct URLs\n\n")

    rows: list[tuple[str, float, float, int]] = []

    # Python set: exact, but keeps every URL string alive.
    start = time.perf_counter()
    seen: set[str] = set()
    kept_set = 0
    for url in stream:
        if url not in seen:
            seen.add(url)
            kept_set += 1
    t_set = time.perf_counter() - start
    mem_set = sys.getsizeof(seen) + sum(sys.getsizeof(u) for u in seen)
    rows.append(("Python set (table + URL strings)", t_set, mem_set, kept_set))
    del seen

    # bloomline, one call per URL.
    bf = BloomFilter(distinct, args.error_rate)
    start = time.perf_counter()
    kept_loop = 0
    for url in stream:
        if bf.add(url):
            kept_loop += 1
    t_loop = time.perf_counter() - start
    rows.append(("BloomFilter.add, one call per URL", t_loop, bf.nbytes, kept_loop))
    # Why the loop costs more here than in the README's table: the same
    # loop over fresh copies of the strings, laid out in stream order.
    fresh = [url.encode().decode() for url in stream]
    bf_fresh = BloomFilter(distinct, args.error_rate)
    start = time.perf_counter()
    for url in fresh:
        bf_fresh.add(url)
    t_fresh = time.perf_counter() - start
    del fresh, bf_fresh

    # bloomline, one batch call.
    bf2 = BloomFilter(distinct, args.error_rate)
    start = time.perf_counter()
    kept_batch = int(bf2.add_many(stream).sum())
    t_batch = time.perf_counter() - start
    rows.append(("BloomFilter.add_many, one batch", t_batch, bf2.nbytes, kept_batch))

    out.write(f"  {'method':36} {'time':>8} {'ns/URL':>8} {'memory':>11} {'kept':>10} {'lost to FP':>11}\n")
    for name, secs, mem, kept in rows:
        out.write(
            f"  {name:36} {secs:7.2f}s {secs / count * 1e9:8.0f} {format_bytes(mem):>11} "
            f"{kept:>10,} {kept_set - kept:>11,}\n"
        )
    out.write(
        f"\n  The filter was sized for {distinct:,} keys at error rate {args.error_rate:g}: "
        f"{bf.num_bits:,} bits, {bf.num_hashes} hashes, layout '{bf.layout}'.\n"
        f"  Expected false positives over the stream: about {_expected_losses(distinct, bf):,.0f}; "
        f"a false positive drops a new URL, never lets a duplicate through.\n"
        f"  Memory: {mem_set / bf.nbytes:,.0f}x less than the set; "
        f"batch speed: {t_set / t_batch:,.1f}x the set.\n"
        f"  One call per URL costs more here than in the README's speed table (about 80 ns): a stream that\n"
        f"  repeats URLs holds the same str objects again and again, scattered through memory, so most calls\n"
        f"  wait for their string to come from RAM. The same loop over fresh copies, laid out in stream\n"
        f"  order, took {t_fresh / count * 1e9:,.0f} ns per URL.\n"
    )
    return 0


def _expected_losses(distinct: int, bf: BloomFilter) -> float:
    """Expected number of new keys wrongly reported as seen while a filter
    fills from 0 to `distinct` keys: the sum of the rate at each fill."""
    steps = 200
    total = 0.0
    for i in range(steps):
        n = distinct * (i + 0.5) / steps
        total += false_positive_rate(n, bf.num_bits, bf.num_hashes, bf.layout) * distinct / steps
    return total


# ---------------------------------------------------------------------------
# dedup


BLOCK = 1 << 20  # bytes read at a time (a larger block is no faster, and costs resident memory)


class LineBlocks:
    """The input files (or stdin for none or '-') as blocks of whole lines.

    One buffer is read into again and again; each block handed out ends at
    its last newline, and the part line after it moves to the front of the
    buffer for the next read. A line longer than the buffer makes the
    buffer grow; a file's last line without a newline is a block of its
    own. A block is valid until the next one is asked for. The lines are
    split and hashed in C++ (add_lines, contains_lines): no line ever
    becomes a Python object.
    """

    def __init__(self, files: Sequence[str], block: int = BLOCK) -> None:
        self.names = list(files) or ["-"]
        self.block = block
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
        buf = bytearray(self.block)
        for name in self.names:
            with _open_input(name) as handle:
                filled = 0
                while True:
                    if filled == len(buf):  # a line longer than the buffer
                        grown = bytearray(2 * len(buf))
                        grown[:filled] = buf
                        buf = grown
                    view = memoryview(buf)
                    n = handle.readinto(view[filled:])
                    if not n:
                        if filled:
                            yield view[:filled]
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
                    buf[:rest] = buf[cut:end]
                    filled = rest


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


def _shown(name: str) -> str:
    """An input as errors name it."""
    return "stdin" if name == "-" else repr(name)


def _input_stat(name: str) -> os.stat_result | None:
    """What an input is: fstat of stdin for '-', stat of a path (so /dev/stdin
    and <(...) are the pipes they lead to, whatever their names); None when
    it cannot be stat'ed (the error comes when it is opened)."""
    try:
        return os.fstat(sys.stdin.fileno()) if name == "-" else os.stat(name)
    except (OSError, ValueError):
        return None


def _what_it_is(st: os.stat_result) -> str:
    mode = st.st_mode
    return ("a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a terminal or device" if stat.S_ISCHR(mode) else "not a regular file")


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


def _write_all(data: bytes | memoryview) -> None:
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
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc, total - len(view)) from None
        if n <= 0:
            raise OutputError(OSError(errno.EIO, "the output took no bytes"), total - len(view))
        view = view[n:]


def _whole_text_writes() -> None:
    """Under PYTHONUNBUFFERED (python -u) sys.stdout writes through a raw
    FileIO and drops what a short write leaves; a BufferedWriter between
    writes all of it or raises. Line-buffered, so output still comes at once."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if out is not sys.__stdout__ or out is None or not isinstance(raw, io.RawIOBase):
        return
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=out.encoding, errors=out.errors,
                                  line_buffering=True)


def _refuse_same_file(command: str, outputs: Sequence[tuple[str, str]], inputs: Sequence[str]) -> None:
    """Refuse, before anything is read, an output that is also an input or
    another output: OUT or --state would replace (or stdout grow) a file
    being read. Found by what the files are (stat follows symlinks; hard
    links share an inode), not by their names; regular files only, as cat
    does (a terminal or /dev/null may well be both). outputs: (what it is,
    path or '-' for stdout); inputs: paths or '-' for stdin."""
    seen: list[tuple[str, os.stat_result]] = []
    for name in inputs:
        st = _input_stat(name)
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
    /dev or /proc such as /dev/stdout (an open file of this process, which a
    rename would not reach) -- is written straight through."""
    if path == "-":
        return False
    at = path
    for _ in range(40):
        if at.startswith(("/dev/", "/proc/")):
            return False
        if not os.path.islink(at):
            break
        at = os.path.join(os.path.dirname(at), os.readlink(at))
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def _check_output(path: str) -> None:
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


def _write_filter(f: Any, path: str) -> None:
    """Save f to path: atomically through the filters' own save (the one
    atomic writer, with its refusals) or straight through (_saved_atomically)."""
    if path == "-":
        _write_all(f.to_bytes())
    elif not _saved_atomically(path):
        with open(path, "wb") as out_file:
            out_file.write(f.to_bytes())
    else:
        try:
            f.save(path)
        except ValueError as exc:  # mapped for writing by another handle
            raise CliError(str(exc)) from None


def _filter_bytes(path: str) -> bytes:
    """A filter file's bytes ('-': stdin). A regular file is read as load()
    reads it (under its header lock, so a file that writers share is never
    half read); a pipe as it comes."""
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        if stat.S_ISREG(os.stat(path).st_mode):
            return _core.read_file(path)
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"cannot read {_shown(path)}: {os.strerror(exc.errno) if exc.errno else exc}") from None


def _open_filter(path: str, data: bytes | None = None) -> Any:
    if data is None:
        data = _filter_bytes(path)
    try:
        return from_bytes(data)
    except ValueError as exc:
        raise CliError(f"{_shown(path)}: {exc}") from None


DEDUP_CAPACITY = 10_000_000
DEDUP_ERROR_RATE = 1e-6


def _note(message: str) -> None:
    sys.stderr.write(f"{PROG}: note: {message}\n")


def _dedup_filter(args: argparse.Namespace) -> Filter:
    """The filter dedup works with, and args.capacity_from: where its
    capacity came from, for the warning past it."""
    capacity = args.capacity or DEDUP_CAPACITY
    error_rate = args.error_rate or DEDUP_ERROR_RATE
    args.capacity_from = (("--capacity", "Raise --capacity.") if args.capacity else
                          ("the default, as no --capacity was given", "Give a larger --capacity."))
    if args.redis or args.key:
        if not (args.redis and args.key):
            raise UsageError("--redis and --key go together")
        if args.state:
            raise UsageError("--state and --redis are exclusive")
        try:
            from .redis import RedisBloomFilter

            args.capacity_from = (f"the filter at Redis key {args.key!r}", "A new key with a larger --capacity "
                                  "holds more.")
            return RedisBloomFilter(args.redis, args.key, capacity, error_rate)
        except ImportError as exc:
            raise CliError(str(exc)) from None
        except Exception as exc:  # redis-py errors: one line
            raise CliError(f"redis: {exc}") from None
    if args.state and os.path.exists(args.state):
        f: Filter = _open_filter(args.state)
        # The filter in the state file wins: say so when the options ask otherwise.
        for option, given, kept in (("--capacity", args.capacity, f.capacity),
                                    ("--error-rate", args.error_rate, f.error_rate)):
            if given is not None and given != kept:
                _note(f"{option} {given:g} is ignored: {args.state} holds a filter made for {option[2:]} {kept:g} "
                      "(delete it to start over)")
        args.capacity_from = (f"the filter in {args.state}", "A new state file with a larger --capacity holds "
                              "more.")
        return f
    made: Filter = _new_filter(BloomFilter, capacity, error_rate, "blocked", args.capacity_from[0])
    return made


def _new_filter(kind: Any, capacity: int, error_rate: float, layout: str, origin: str) -> Any:
    """A new local filter; one it has no memory for is one line saying how
    much it needs. origin: where the capacity came from."""
    try:
        return kind(capacity, error_rate, layout=layout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except MemoryError:
        bits = optimal_params(capacity, error_rate, layout).num_bits * (4 if kind is CountingBloomFilter else 1)
        raise CliError(f"capacity {capacity:,} (from {origin}) at error rate {error_rate:g} needs {format_bytes(bits / 8)} of memory for the "
                       f"{kind.__name__} (held in memory whole), more than this machine could give") from None


class _StopReading(Exception):
    pass


class _Interrupt:
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

    def __enter__(self) -> _Interrupt:
        def note(signum: int, frame: Any) -> None:
            again, self.hit = self.hit, True
            if self.phase == "read":
                raise _StopReading
            if self.phase == "block" and again:
                raise KeyboardInterrupt

        self.previous = signal.signal(signal.SIGINT, note)
        return self

    def blocks(self, blocks: LineBlocks) -> Iterator[memoryview]:
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


def _redis_errors(exc: Exception) -> CliError | None:
    return CliError(f"redis: {exc}") if type(exc).__module__.startswith("redis") else None


def cmd_dedup(args: argparse.Namespace) -> int:
    _refuse_same_file("dedup", [("--state", args.state)] * bool(args.state) + [("stdout", "-")],
                      args.files or ["-"])
    if args.state:
        _check_output(args.state)
    f = _dedup_filter(args)
    read = written = 0
    expected_fp = 0.0
    blocks = LineBlocks(args.files)
    progress = Progress(blocks.total_bytes, args.quiet)
    with _Interrupt() as interrupt:
        kept = 0
        try:
            for block in interrupt.blocks(blocks):
                rate = f.expected_fp_rate
                try:
                    new = f.add_lines(block)
                except Exception as exc:
                    raise (_redis_errors(exc) or exc) from None
                kept = int(new.sum())
                out = select_lines(block, new)
                try:
                    # Whole before the next block is read: --state is saved only after every line in it was
                    # written (a failure leaves the old state as it was).
                    _write_all(out)
                except OutputError as exc:
                    raise CliError(str(exc) + _not_written(args, out[exc.written:].count(b"\n"))) from None
                read += len(new)
                written += kept
                expected_fp += rate * kept
                progress.update(blocks.bytes_read, read)
        except KeyboardInterrupt:
            progress.done()
            sys.stderr.write(f"{PROG}: interrupted again: the block being written was given up"
                             + _not_written(args, kept, maybe=True) + "\n")
            return 130
        progress.done()
        if args.state:
            _write_filter(f, args.state)
    if not args.quiet:
        sys.stderr.write(
            f"{PROG} dedup: {count(read, 'line')} read, {written:,} written, {read - written:,} dropped as seen "
            + (f"(of which about {expected_fp:,.1f} may be false positives)\n" if expected_fp >= 0.05
               else "(no false positive expected at this fill)\n")
        )
        _report_filter("dedup", f, "line")
    _warn_capacity("dedup", f, "distinct line", args.capacity_from)
    if interrupt.hit:
        sys.stderr.write(f"{PROG}: interrupted" + (f"; {args.state} holds every line written\n" if args.state
                                                   else "\n"))
        return 130
    return 0


def _not_written(args: argparse.Namespace, lines: int, maybe: bool = False) -> str:
    """What a dedup that stopped inside a block means for its filter: --state
    is not saved; a Redis filter already holds the block's new lines."""
    if args.state:
        return f"; {args.state} was not saved, so the next run writes this run's lines again"
    if args.redis and lines:
        verb = "may not have been written" if maybe else ("was" if lines == 1 else "were") + " not written"
        return (f"; {count(lines, 'new line')} of the block {verb} but {'is' if lines == 1 else 'are'} recorded as "
                f"seen in Redis at {args.key!r}")
    return ""


def _report_filter(command: str, f: Filter, what: str) -> None:
    """The last lines of a streaming command: peak memory and the filter's
    expected false-positive rate."""
    sys.stderr.write(f"{PROG} {command}: peak memory {_peak_rss()}; the filter's expected false-positive rate "
                     f"is now {f.expected_fp_rate:.3g}\n")


def _warn_capacity(command: str, f: Filter, what: str, source: tuple[str, str]) -> None:
    """A warning (even with -q) once the filter holds more keys than its
    capacity, naming where that capacity came from and what to do (source).
    The count is the filter's own count of new keys (exactly at capacity is
    within it); the bits' estimate only where it keeps none."""
    capacity = f.capacity
    held = getattr(f, "insert_count", -1)
    estimated = held < 0
    held = round(f.approx_count) if estimated else held
    if capacity and held > capacity:
        sys.stderr.write(
            f"{PROG} {command}: warning: the filter holds {'about ' if estimated else ''}{count(held, what)}, more "
            f"than its capacity of {capacity:,} (from {source[0]}); its false-positive rate is now "
            f"{f.expected_fp_rate:.2g}. {source[1]}\n"
        )


def _count_lines(files: Sequence[str]) -> int:
    """Lines in the input, read once in blocks (for build's capacity); only
    regular files are given, and stdin is put back where it was."""
    import numpy as np

    start = os.lseek(sys.stdin.fileno(), 0, os.SEEK_CUR) if "-" in files else None
    lines = 0
    for block in LineBlocks(files):
        chars = np.frombuffer(block, dtype=np.uint8)
        lines += int(np.count_nonzero(chars == 10)) + int(chars[-1] != 10)  # a last line without a newline
    if start is not None:
        os.lseek(sys.stdin.fileno(), start, os.SEEK_SET)
    return lines


def cmd_build(args: argparse.Namespace) -> int:
    capacity = args.capacity
    files = args.files or ["-"]
    _refuse_same_file("build", [("OUT", args.output)], files)
    if capacity is None:
        # Counting the lines first reads each input twice: regular files only.
        for name in files:
            st = _input_stat(name)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UsageError(f"build needs --capacity when it reads {_shown(name)} ({_what_it_is(st)}, which "
                                 "can be read only once: the filter is sized before its keys are read)")
    _check_output(args.output)
    if capacity is None:
        capacity = max(1, _count_lines(files))
        source = ("the input's line count, as no --capacity was given", "")
    else:
        source = ("--capacity", "Raise --capacity.")
    kind = CountingBloomFilter if args.counting else BloomFilter
    f = _new_filter(kind, capacity, args.error_rate, args.layout, source[0])
    keys = 0
    blocks = LineBlocks(files)
    progress = Progress(blocks.total_bytes, args.quiet)
    for block in blocks:
        keys += len(f.add_lines(block))
        progress.update(blocks.bytes_read, keys)
    progress.done()
    _write_filter(f, args.output)
    if not args.quiet:
        shown = "stdout" if args.output == "-" else args.output
        sys.stderr.write(
            f"{PROG} build: {count(keys, 'key')} into {shown} ({f.nbytes:,} bytes, {type(f).__name__}, "
            f"capacity {capacity:,}, error rate {args.error_rate:g}, layout {args.layout})\n"
        )
        _report_filter("build", f, "key")
    _warn_capacity("build", f, "distinct key", source)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    if args.filter == "-" and (not args.files or "-" in args.files):
        raise UsageError("query reads its filter from stdin ('-'): name the files of keys")
    _refuse_same_file("query", [("stdout", "-")], [args.filter, *(args.files or ["-"])])
    f = _open_filter(args.filter)
    lines = 0
    blocks = LineBlocks(args.files)
    progress = Progress(blocks.total_bytes, args.quiet)
    for block in blocks:
        hit = f.contains_lines(block)
        _write_all(select_lines(block, hit != args.absent))
        lines += len(hit)
        progress.update(blocks.bytes_read, lines)
    progress.done()
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    data = _filter_bytes(args.filter)
    f = _open_filter(args.filter, data)  # every check a reader makes, as one line naming the file
    header = read_header(data)
    # "fill" is the fraction of bits (counters) set; the header's count of
    # them is shown under its own name.
    header.pop("fill", None)
    if isinstance(f, CountingBloomFilter):
        header["counters_set"] = f.nonzero_counters
    else:
        header["bits_set"] = f.bits_set if isinstance(f, BloomFilter) else sum(s.bits_set for s in f.stages)
    header.update(fill=f.fill_ratio, approx_count=f.approx_count, expected_fp_rate=f.expected_fp_rate,
                  nbytes=f.nbytes, file_bytes=len(data))
    if args.json:
        import json

        sys.stdout.write(json.dumps(header, indent=1) + "\n")
        return 0
    width = max(len(k) for k in header)
    for k, v in header.items():
        text = f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else (f"{v:.6g}" if isinstance(v, float) else v)
        sys.stdout.write(f"{k:<{width}}  {text}\n")
    return 0


def cmd_params(args: argparse.Namespace) -> int:
    rows = []
    for layout in ("blocked", "standard"):  # every row known before anything is printed
        try:
            rows.append((layout, optimal_params(args.capacity, args.error_rate, layout)))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    sys.stdout.write(f"capacity {args.capacity:,}, error rate {args.error_rate:g}\n")
    sys.stdout.write(f"{'layout':10} {'num_bits':>16} {'memory':>11} {'bits/key':>9} {'k':>3} {'expected FP':>12}\n")
    for layout, p in rows:
        sys.stdout.write(
            f"{layout:10} {p.num_bits:>16,} {format_bytes(p.num_bits / 8):>11} {p.bits_per_key:>9.2f} "
            f"{p.num_hashes:>3} {p.expected_fp_rate:>12.4g}\n"
        )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import numpy as np

    n = args.keys
    urls = [f"https://www.site{i % 5000:04d}.example/a/{i:012x}" for i in range(n)]
    ints = np.random.default_rng(1).integers(0, 2**63, size=n, dtype=np.uint64)
    rows: list[tuple[str, float]] = []

    def timed(label: str, fn: Any) -> None:
        start = time.perf_counter()
        fn()
        rows.append((label, (time.perf_counter() - start) / n * 1e9))

    for layout in ("blocked", "standard"):
        bf = BloomFilter(n, 0.01, layout=layout)
        add = bf.add
        timed(f"{layout}: add, one call per str", lambda: [add(u) for u in urls])
        timed(f"{layout}: in, one call per str", lambda: [u in bf for u in urls])
        bf2 = BloomFilter(n, 0.01, layout=layout)
        timed(f"{layout}: add_many(list of str)", lambda: bf2.add_many(urls))
        bf3 = BloomFilter(n, 0.01, layout=layout)
        timed(f"{layout}: add_many(uint64 array)", lambda: bf3.add_many(ints))
        timed(f"{layout}: contains_many(uint64 array)", lambda: bf3.contains_many(ints))
    seen: set[str] = set()

    def set_add() -> None:
        add_to_set = seen.add
        for u in urls:
            add_to_set(u)

    timed("Python set: add, one call per str", set_add)
    sys.stdout.write(f"{PROG} {__version__} bench, {n:,} keys per row (full benchmark: benchmarks/run.py)\n")
    for label, ns in rows:
        sys.stdout.write(f"  {label:42} {ns:8.1f} ns/key\n")
    return 0


# ---------------------------------------------------------------------------


def cmd_redis_module(args: argparse.Namespace) -> int:
    from ._redis_module import module_path

    try:
        path = module_path()
    except OSError as e:
        raise CliError(str(e)) from None
    sys.stdout.write(path + "\n")
    return 0


def cmd_redis(args: argparse.Namespace) -> int:
    try:
        import redis
    except ImportError:
        raise CliError("the redis commands need redis-py: pip install 'bloomline[redis]'") from None
    try:
        return {"dump": _redis_dump, "restore": _redis_restore, "import-set": _redis_import}[args.redis_command](args)
    except redis.RedisError as e:
        raise CliError(f"redis: {e}") from None


def _redis_dump(args: argparse.Namespace) -> int:
    from .redis import dump

    if args.output == "-":
        local = dump(args.url, args.key, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        _check_output(args.output)
        local = dump(args.url, args.key, args.output)
    what = (f"the chain at {args.key!r} ({count(local.num_stages, 'stage')})" if isinstance(local, ScalableBloomFilter)
            else f"the filter at {args.key!r}")
    _note(f"wrote {what}, about {count(round(local.approx_count), 'key')}, to {args.output}")
    return 0


def _redis_restore(args: argparse.Namespace) -> int:
    from .redis import restore

    source: Any = sys.stdin.buffer if args.input == "-" else args.input
    restored = restore(source, args.url, args.key, replace=args.replace, backend=args.backend)
    _note(f"restored {args.input} into Redis at {args.key!r}: about {count(round(restored.approx_count), 'key')}")
    return 0


def _redis_import(args: argparse.Namespace) -> int:
    try:
        from .scrapy.migrate import import_set
    except ImportError as e:
        raise CliError(f"import-set needs Scrapy (for the fingerprint rules): pip install scrapy ({e})") from None
    shown = [0.0]
    tty = sys.stderr.isatty()

    def progress(report: Any) -> None:
        # On a terminal one line redrawn twice a second; into a log a line
        # every 10 seconds.
        now = time.monotonic()
        if args.quiet or now - shown[0] < (0.5 if tty else 10.0):
            return
        shown[0] = now
        rate = report.imported / max(report.seconds, 1e-9)
        left = max(report.members - report.imported, 0) / rate if rate else 0
        line = (f"{PROG}: {report.imported:,} of {count(report.members, 'fingerprint')} "
                f"({100 * report.imported / max(report.members, 1):.0f}%), {rate:,.0f}/s, ETA {left:.0f} s")
        sys.stderr.write(f"\r{line}\x1b[K" if tty else line + "\n")
        sys.stderr.flush()

    try:
        r = import_set(args.url, args.set_key, args.into, rule=args.rule, error_rate=args.error_rate,
                       backend=args.backend, delete_set=args.delete_set, progress=progress)
    except KeyboardInterrupt:
        raise CliError("interrupted: run the same command again to resume where it stopped") from None
    finally:
        if shown[0] and tty:
            sys.stderr.write("\r\x1b[K")
    into = args.into or args.set_key
    print(f"imported {count(r.imported, 'fingerprint')} from the set {args.set_key!r} into the filter at {into!r} "
          f"in {r.seconds:.1f} s ({args.rule}'s rule{'; resumed' if r.resumed else ''})")
    if r.invalid:
        print(f"{count(r.invalid, 'member')} of the set {'is' if r.invalid == 1 else 'are'} not a 40-character hex "
              f"fingerprint and {'was' if r.invalid == 1 else 'were'} not imported: "
              + ", ".join(repr(e) for e in r.invalid_examples) + (", ..." if r.invalid > len(r.invalid_examples) else ""))
    print(f"memory: the set {format_bytes(r.set_bytes)}, the filter {format_bytes(r.filter_bytes)}"
          + (f" ({r.set_bytes / r.filter_bytes:.0f}x less)" if r.filter_bytes else ""))
    if r.missing:
        raise CliError(f"the check failed: {count(r.missing, 'fingerprint')} of the set {'is' if r.missing == 1 else 'are'} "
                       "not in the filter; the set was left as it is")
    if args.delete_set and not r.deleted:
        raise CliError(f"the set grew during each of {r.rounds} checks (a crawl still adding to it?): every "
                       "fingerprint it had is in the filter, and the set was left as it is; stop the crawl and "
                       "run the same command again")
    print("check: every fingerprint of the set is in the filter; " +
          ("the set was deleted" if r.deleted else "the set was left as it is (--delete-set deletes it)"))
    return 0


COMMANDS = {
    "demo": cmd_demo,
    "dedup": cmd_dedup,
    "build": cmd_build,
    "query": cmd_query,
    "info": cmd_info,
    "params": cmd_params,
    "bench": cmd_bench,
    "redis-module": cmd_redis_module,
    "redis": cmd_redis,
}


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit has
    nothing left to fail on."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Errors are one line, ``bloomline: error: ...``, exit status 2 for bad
    usage and 1 for a failure while working; a closed output pipe ends the
    process by SIGPIPE, silently, as coreutils do."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    _whole_text_writes()
    try:
        with warnings.catch_warnings():
            # dedup and build say it in one line of their own, naming where the capacity came from
            warnings.simplefilter("ignore", CapacityWarning)
            status = COMMANDS[args.command](args)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, where a failure is one line, not at exit
        return status
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except CliError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # The reader went away (`| head`). Nothing more can be written, and
        # which lines it read is unknown, so no --state is saved.
        _quiet_stdout()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
        return 141  # not reached
    except OSError as exc:
        if exc.filename:
            message = f"{exc.strerror}: {exc.filename!r}"
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            message = f"cannot write the output: {exc.strerror}"
        else:
            message = exc.strerror or str(exc)
        sys.stderr.write(f"{PROG}: error: {message}\n")
        _quiet_stdout()
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except ValueError as exc:  # refused data or arguments the checks above did not foresee: still one line
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
