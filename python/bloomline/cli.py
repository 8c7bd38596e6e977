"""The ``bloomline`` command (also ``python -m bloomline``).

Subcommands:
  demo    deduplicate a synthetic stream of crawl URLs, beside a Python set
  dedup   print each first occurrence of the input lines (files or stdin)

Exit codes follow Unix tools: 0 success, 1 failure while working (a file that
cannot be read, ...), 2 bad usage. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from . import BloomFilter, __version__

PROG = "bloomline"


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


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
    return parser


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


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


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
            f"  {name:36} {secs:7.2f}s {secs / count * 1e9:8.0f} {_fmt_bytes(mem):>11} "
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


def cmd_dedup(args: argparse.Namespace) -> int:
    bf = BloomFilter(args.capacity, args.error_rate)
    out = sys.stdout.buffer
    read = written = 0
    expected_fp = 0.0
    batch_lines = 65_536
    for _name, handle in _open_inputs(args.files):
        while True:
            lines = handle.readlines(batch_lines * 64)
            if not lines:
                break
            rate = bf.expected_fp_rate
            new = bf.add_many([_key(line) for line in lines])
            kept = [line for line, is_new in zip(lines, new.tolist()) if is_new]
            if kept and not kept[-1].endswith(b"\n"):
                kept[-1] += b"\n"
            out.writelines(kept)
            read += len(lines)
            written += len(kept)
            expected_fp += rate * len(kept)
    out.flush()
    if not args.quiet:
        sys.stderr.write(
            f"{PROG} dedup: {read:,} lines read, {written:,} written, {read - written:,} dropped as seen "
            f"(of which about {expected_fp:.2g} may be false positives)\n"
        )
        if bf.approx_count > args.capacity:
            sys.stderr.write(
                f"{PROG} dedup: warning: about {bf.approx_count:,.0f} distinct lines, over --capacity "
                f"{args.capacity:,}; the false-positive rate is now {bf.expected_fp_rate:.2g}. "
                f"Raise --capacity.\n"
            )
    return 0


# ---------------------------------------------------------------------------


COMMANDS = {"demo": cmd_demo, "dedup": cmd_dedup}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CliError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 1  # noqa: B012
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
