"""The command line's grammar: every command and option (argparse), and the
argument types, whose bad values are usage errors (exit 2) naming the
option."""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal, InvalidOperation
from typing import Any

from .. import __version__
from ._errors import PROG


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of threads (0: one per CPU), got {text!r}") from None
    if not 0 <= n <= 1024:
        raise argparse.ArgumentTypeError(f"must be in [0, 1024] (0: one per CPU), got {n}")
    return n


def _positive_int(text: str) -> int:
    """1000000, 1_000_000 or 1e6 (a number written in any of Python's ways
    that is a whole number), at least 1."""
    value: int | None = None
    try:
        value = int(text)
    except ValueError:
        try:
            exact = Decimal(text.strip())  # exact: 1e6 and 1.5e6 are whole, 1.5 is not
            # (its size from the exponent first: int() of 1e999999999 would write out a billion digits)
            if exact.is_finite() and exact.adjusted() < 20 and exact == exact.to_integral_value():
                value = int(exact)
            elif exact.is_finite() and exact.adjusted() >= 20:
                value = 2**64 if exact > 0 else 0  # (0e30 is zero)
        except InvalidOperation:
            pass
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r} (1000000, 1_000_000 and 1e6 "
                                         "are all taken)")
    if value >= 2**64:
        shown = repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"
        raise argparse.ArgumentTypeError(f"must be a positive integer below 2**64, got {shown}")
    return value


MAX_WORKLOAD = 10**9  # demo's and bench's keys are made in memory first, several bytes each: past this, absurd


def _workload(text: str) -> int:
    """A positive integer (as _positive_int) of keys made in memory, at most MAX_WORKLOAD."""
    value = _positive_int(text)
    if value > MAX_WORKLOAD:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_WORKLOAD:,} (the keys are made in memory first), "
                                         f"got {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text!r}")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(text: str) -> float:
    """90s, 30m, 12h, 7d, 2w or plain seconds (3600, 1.5): seconds, > 0."""
    body = text.strip().lower()
    scale = _UNITS.get(body[-1:], 0) if body else 0
    try:
        value = float(body[:-1] if scale else body) * (scale or 1)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):  # (NaN fails the first test)
        raise argparse.ArgumentTypeError(f"must be a duration such as 90s, 30m, 12h, 7d or 2w, or seconds, got "
                                         f"{text!r}")
    return value


def _state_file(text: str) -> str:
    """--state: a file, read and written back (never stdin or stdout)."""
    if text in ("", "-"):
        raise argparse.ArgumentTypeError(f"must name a file (the filter is read from it and saved back to it), "
                                         f"got {text!r}")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (abs(value) < float("inf")):
        raise argparse.ArgumentTypeError(f"must be seconds since the epoch (as `date +%s` prints), got {text!r}")
    if value > time.time() + 86400:  # (a state saved so far ahead would hold its lines until the clock got there)
        raise argparse.ArgumentTypeError(f"must be seconds since the epoch (as `date +%s` prints, not milliseconds), "
                                         f"at most a day ahead of this machine's clock, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    _intermixing = False

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.endswith(("required: COMMAND", "required: ACTION")):
            # `bloomline` (or `bloomline redis`) alone: the whole help, as
            # git prints it, still with the exit status of bad usage.
            self.print_help(sys.stdout)
            self.exit(2)
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Fast Bloom filters: URL dedup and friends.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser(
        "demo", help="deduplicate a synthetic stream of crawl URLs, beside a Python set",
        description="Deduplicate a synthetic stream of crawl URLs three ways -- a Python set, BloomFilter.add in a "
        "loop, one add_many batch -- and print the time, memory and lines kept by each.")
    demo.add_argument("--urls", type=_workload, default=1_000_000, help="stream length (default 1,000,000)")
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
        "--error-rate", type=_rate, help="false-positive rate at capacity (default 1e-6, low because each false "
        "positive silently drops a new line from the output; with --state, the state file's)"
    )
    dedup.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    dedup.add_argument("--state", type=_state_file, metavar="FILE", help="keep the filter in FILE between runs (loaded if it exists, "
                       "saved atomically at the end)")
    dedup.add_argument("--window", type=_duration, metavar="DURATION",
                       help="drop only the lines seen within the last DURATION (90s, 30m, 12h, 7d, 2w or seconds): a "
                       "WindowedBloomFilter, --capacity distinct lines per window; with --state, the state file's")
    dedup.add_argument("--generations", type=_positive_int, default=None,
                       help="with --window: slices of the window (default 4); a line is new again at most "
                       "DURATION / GENERATIONS after its window ends, and memory is GENERATIONS + 1 filters")
    dedup.add_argument("--no-refresh", dest="refresh", action="store_false",
                       help="with --window: a line's window runs from the time it was written, not the last time it "
                       "was seen (a line seen every day is written again once per window)")
    dedup.add_argument("--now", type=_seconds, metavar="SECONDS",
                       help="with --window: the time the input is seen at, in seconds since the epoch (default: the "
                       "system clock); for replaying old input, and for tests")
    dedup.add_argument("--threads", type=_threads, default=1, metavar="N",
                       help="add on N threads (0: one per CPU); the output is the same as with one, byte for byte")
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
    build.add_argument("--error-rate", type=_rate, default=0.01, help="false-positive rate at capacity (default 0.01: the file answers "
                       "later lookups, where a false positive is a 'maybe present' for a key never added, one in a "
                       "hundred; lower it where such an answer costs more)")
    build.add_argument("--layout", choices=["blocked", "standard"], default="blocked")
    build.add_argument("--counting", action="store_true", help="a CountingBloomFilter (4-bit counters)")
    build.add_argument("--threads", type=_threads, default=1, metavar="N",
                       help="add on N threads (0: one per CPU); the file is the same as with one, byte for byte")
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
        description="Filters that travel: dump a Redis filter, chain or windowed filter to a file, restore one, or "
        "import a "
        "scrapy-redis fingerprint set into the filter RedisBloomDupeFilter uses.")
    rsub = rd.add_subparsers(dest="redis_command", metavar="ACTION", parser_class=_Parser)
    rsub.required = True
    dump = rsub.add_parser(
        "dump", help="write a Redis filter, chain or windowed filter to a file",
        description="Write the filter, growing chain or windowed filter at KEY to FILE, a bloomline file (a chain "
        "as kind 3; a windowed filter as kind 4, its generations live by the server's clock), which `restore` puts "
        "back on any server and BloomFilter.load, ScalableBloomFilter.load or WindowedBloomFilter.load reads "
        "locally.")
    dump.add_argument("url", metavar="URL", help="the Redis server (redis://host:port/db)")
    dump.add_argument("key", metavar="KEY", help="the filter's key")
    dump.add_argument("output", metavar="FILE", help="the file to write, atomically ('-': stdout)")
    restore = rsub.add_parser(
        "restore", help="put a filter file into Redis",
        description="Put FILE (a BloomFilter, or a ScalableBloomFilter as `dump` writes one) into Redis at KEY, "
        "answering as the file does.")
    restore.add_argument("input", metavar="FILE", help="the filter file ('-': stdin)")
    restore.add_argument("url", metavar="URL", help="the Redis server (redis://host:port/db)")
    restore.add_argument("key", metavar="KEY", help="where to put it")
    restore.add_argument("--replace", action="store_true", help="drop a filter, chain or windowed filter already at KEY first")
    restore.add_argument("--backend", choices=["auto", "module", "plain"], default="auto")
    imp = rsub.add_parser(
        "import-set", help="import a scrapy-redis fingerprint set into RedisBloomDupeFilter's filter",
        description="Read the scrapy-redis fingerprint set at SET_KEY with SSCAN and add its fingerprints to the "
        "growing filter RedisBloomDupeFilter attaches to (INTO, by default the same name, as both default to "
        "%(spider)s:dupefilter). The filter records the rule the fingerprints were made by, and the dupefilter "
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
    bench.add_argument("--keys", type=_workload, default=1_000_000, help="keys per workload (default 1,000,000)")
    return parser
