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

Exit codes follow Unix tools: 0 success, 1 failure while working (a file that
cannot be read, ...), 2 bad usage. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from . import BloomFilter, __version__
from ._units import format_bytes

PROG = "bloomline"


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


class UsageError(Exception):
    """Bad usage found after parsing: one line, exit status 2."""


# ---------------------------------------------------------------------------
# argument types: a bad value is a usage error (exit 2) naming the option


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
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
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, exit status 2, as Unix tools do (argparse prints usage too).
        self.exit(2, f"{self.prog}: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Fast Bloom filters: URL dedup and friends.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser("demo", help="deduplicate a synthetic stream of crawl URLs, beside a Python set")
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
    dedup.add_argument("files", nargs="*", metavar="FILE", help="input files (default or '-': stdin)")
    dedup.add_argument(
        "--capacity", type=_positive_int, default=10_000_000, help="distinct lines expected (default 10,000,000)"
    )
    dedup.add_argument(
        "--error-rate", type=_rate, default=1e-6, help="false-positive rate at capacity (default 1e-6)"
    )
    dedup.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    dedup.add_argument("--state", metavar="FILE", help="keep the filter in FILE between runs (loaded if it exists, "
                       "saved atomically at the end)")
    dedup.add_argument("--redis", metavar="URL", help="share the filter through Redis at URL (needs --key)")
    dedup.add_argument("--key", help="the Redis key of the shared filter")

    build = sub.add_parser("build", help="build a filter file from keys (one per line)")
    build.add_argument("output", metavar="OUT", help="the filter file to write")
    build.add_argument("files", nargs="*", metavar="FILE", help="key files (default or '-': stdin)")
    build.add_argument("--capacity", type=_positive_int, help="keys expected (default: the number of input lines)")
    build.add_argument("--error-rate", type=_rate, default=0.01, help="false-positive rate at capacity (default 0.01)")
    build.add_argument("--layout", choices=["blocked", "standard"], default="blocked")
    build.add_argument("--counting", action="store_true", help="a CountingBloomFilter (4-bit counters)")

    query = sub.add_parser("query", help="print the keys that may be in a filter file")
    query.add_argument("filter", metavar="FILTER", help="a filter file (from build or save)")
    query.add_argument("files", nargs="*", metavar="FILE", help="key files (default or '-': stdin)")
    query.add_argument("--absent", action="store_true", help="print the keys certainly absent instead")

    info = sub.add_parser("info", help="show a filter file's header and fill")
    info.add_argument("filter", metavar="FILTER")
    info.add_argument("--json", action="store_true", help="machine-readable output")

    params = sub.add_parser("params", help="memory and hashes for a capacity and error rate, per layout")
    params.add_argument("--capacity", type=_positive_int, required=True)
    params.add_argument("--error-rate", type=_rate, required=True)

    bench = sub.add_parser("bench", help="a quick local benchmark (the full one: benchmarks/run.py)")
    bench.add_argument("--keys", type=_positive_int, default=1_000_000, help="keys per workload (default 1,000,000)")
    return parser


class Progress:
    """A count on stderr, redrawn at most every half second, only when
    stderr is a terminal: piped output stays clean."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.enabled = sys.stderr.isatty()
        self.last = 0.0

    def update(self, count: int) -> None:
        if self.enabled and time.monotonic() - self.last > 0.5:
            self.last = time.monotonic()
            sys.stderr.write(f"\r{PROG}: {count:,} {self.what}...")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled and self.last:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


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
    )
    return 0


def _expected_losses(distinct: int, bf: BloomFilter) -> float:
    """Expected number of new keys wrongly reported as seen while a filter
    fills from 0 to `distinct` keys: the sum of the rate at each fill."""
    from . import false_positive_rate

    steps = 200
    total = 0.0
    for i in range(steps):
        n = distinct * (i + 0.5) / steps
        total += false_positive_rate(n, bf.num_bits, bf.num_hashes, bf.layout) * distinct / steps
    return total


# ---------------------------------------------------------------------------
# dedup


def _open_inputs(files: Sequence[str]) -> Iterator[tuple[str, BinaryIO]]:
    names = list(files) or ["-"]
    for name in names:
        if name == "-":
            yield "<stdin>", sys.stdin.buffer
            continue
        try:
            handle = open(name, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise CliError(f"cannot read {name!r}: {exc.strerror}") from None
        with handle:
            yield name, handle


def _key(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
    return line


def _read_lines(files: Sequence[str]) -> Iterator[list[bytes]]:
    """Input lines in batches, each line with its ending."""
    for _name, handle in _open_inputs(files):
        while True:
            lines = handle.readlines(1 << 22)
            if not lines:
                break
            yield lines


def _open_filter(path: str) -> Any:
    from . import from_bytes

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CliError(f"cannot read {path!r}: {exc.strerror}") from None
    try:
        return from_bytes(data)
    except ValueError as exc:
        raise CliError(f"{path}: {exc}") from None


def _dedup_filter(args: argparse.Namespace) -> Any:
    if args.redis or args.key:
        if not (args.redis and args.key):
            raise UsageError("--redis and --key go together")
        if args.state:
            raise UsageError("--state and --redis are exclusive")
        try:
            from .redis import RedisBloomFilter

            return RedisBloomFilter(args.redis, args.key, args.capacity, args.error_rate)
        except ImportError as exc:
            raise CliError(str(exc)) from None
        except Exception as exc:  # redis-py errors: one line
            raise CliError(f"redis: {exc}") from None
    if args.state and os.path.exists(args.state):
        return _open_filter(args.state)
    return BloomFilter(args.capacity, args.error_rate)


def cmd_dedup(args: argparse.Namespace) -> int:
    bf = _dedup_filter(args)
    out = sys.stdout.buffer
    read = written = 0
    expected_fp = 0.0
    progress = Progress("lines")
    for lines in _read_lines(args.files):
        rate = bf.expected_fp_rate
        try:
            new = bf.add_many([_key(line) for line in lines])
        except Exception as exc:
            if type(exc).__module__.startswith("redis"):
                raise CliError(f"redis: {exc}") from None
            raise
        kept = [line for line, is_new in zip(lines, new.tolist()) if is_new]
        if kept and not kept[-1].endswith(b"\n"):
            kept[-1] += b"\n"
        out.writelines(kept)
        read += len(lines)
        written += len(kept)
        expected_fp += rate * len(kept)
        progress.update(read)
    progress.done()
    out.flush()
    if args.state:
        bf.save(args.state)
    if not args.quiet:
        sys.stderr.write(
            f"{PROG} dedup: {read:,} lines read, {written:,} written, {read - written:,} dropped as seen "
            + (f"(of which about {expected_fp:,.1f} may be false positives)\n" if expected_fp >= 0.05
               else "(no false positive expected at this fill)\n")
        )
        capacity = getattr(bf, "capacity", None)
        if capacity and bf.approx_count > capacity:
            sys.stderr.write(
                f"{PROG} dedup: warning: about {bf.approx_count:,.0f} distinct lines, over --capacity "
                f"{capacity:,}; the false-positive rate is now {bf.expected_fp_rate:.2g}. "
                f"Raise --capacity.\n"
            )
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from . import CountingBloomFilter

    keys = [_key(line) for lines in _read_lines(args.files) for line in lines]
    capacity = args.capacity or max(1, len(keys))
    kind = CountingBloomFilter if args.counting else BloomFilter
    f = kind(capacity, args.error_rate, layout=args.layout)
    progress = Progress("keys")
    for start in range(0, len(keys), 1 << 16):
        f.add_many(keys[start : start + (1 << 16)])
        progress.update(start)
    progress.done()
    try:
        f.save(args.output)
    except OSError as exc:
        raise CliError(f"cannot write {args.output!r}: {exc.strerror}") from None
    sys.stderr.write(
        f"{PROG} build: {len(keys):,} keys into {args.output} ({f.nbytes:,} bytes, {type(f).__name__}, "
        f"capacity {capacity:,}, error rate {args.error_rate:g}, layout {args.layout})\n"
    )
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    f = _open_filter(args.filter)
    out = sys.stdout.buffer
    for lines in _read_lines(args.files):
        hit = f.contains_many([_key(line) for line in lines]).tolist()
        chosen = [line if line.endswith(b"\n") else line + b"\n" for line, h in zip(lines, hit) if h != args.absent]
        out.writelines(chosen)
    out.flush()
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from . import read_header

    try:
        with open(args.filter, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise CliError(f"cannot read {args.filter!r}: {exc.strerror}") from None
    try:
        header = read_header(data)
    except ValueError as exc:
        raise CliError(f"{args.filter}: {exc}") from None
    f = _open_filter(args.filter)
    header.update(
        approx_count=f.approx_count, expected_fp_rate=f.expected_fp_rate, nbytes=f.nbytes, file_bytes=len(data)
    )
    if args.json:
        import json

        sys.stdout.write(json.dumps(header, indent=1) + "\n")
        return 0
    width = max(len(k) for k in header)
    for k, v in header.items():
        shown = f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else (f"{v:.6g}" if isinstance(v, float) else v)
        sys.stdout.write(f"{k:<{width}}  {shown}\n")
    return 0


def cmd_params(args: argparse.Namespace) -> int:
    from . import optimal_params

    sys.stdout.write(f"capacity {args.capacity:,}, error rate {args.error_rate:g}\n")
    sys.stdout.write(f"{'layout':10} {'num_bits':>16} {'memory':>11} {'bits/key':>9} {'k':>3} {'expected FP':>12}\n")
    for layout in ("blocked", "standard"):
        try:
            p = optimal_params(args.capacity, args.error_rate, layout)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
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


COMMANDS = {
    "demo": cmd_demo,
    "dedup": cmd_dedup,
    "build": cmd_build,
    "query": cmd_query,
    "info": cmd_info,
    "params": cmd_params,
    "bench": cmd_bench,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except CliError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        try:
            sys.stdout = None
        finally:
            return 1  # noqa: B012
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
