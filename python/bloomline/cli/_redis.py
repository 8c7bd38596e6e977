"""The Redis commands: ``redis-module`` (the module's path, for
redis-server --loadmodule) and ``redis dump``, ``redis restore`` and
``redis import-set`` (filters that travel into, out of and between
servers).

redis-py and Scrapy are optional dependencies (bloomline[redis],
bloomline[scrapy]): they, and the parts of bloomline built on them, are
imported inside the commands that need them, so that every other command
runs without them."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

from .._lazy import is_scalable, is_windowed
from .._optional import install_hint
from .._redis_module import module_path
from .._units import count, format_bytes
from ._errors import PROG, CliError
from ._output import check_output, note


def cmd_redis_module(args: argparse.Namespace) -> int:
    try:
        path = module_path()
    except OSError as e:
        raise CliError(str(e)) from None
    sys.stdout.write(path + "\n")
    return 0


def cmd_redis(args: argparse.Namespace) -> int:
    try:
        import redis  # optional: see the module docstring
    except ImportError:
        raise CliError("the redis commands need redis-py: pip install 'bloomline[redis]'") from None
    from ..redis import EvictionWarning

    # bloomline's warnings are reported (one line each), never the command's
    # failure, even under -W error: the work they speak of is done.
    warnings.simplefilter("default", EvictionWarning)
    try:
        # One client for the command, closed as it ends (not left to the
        # collector, which warns of the unclosed socket).
        with redis.Redis.from_url(args.url) as args.client:
            return {"dump": _redis_dump, "restore": _redis_restore,
                    "import-set": _redis_import}[args.redis_command](args)
    except redis.RedisError as e:
        raise CliError(f"redis: {e}") from None


def _redis_dump(args: argparse.Namespace) -> int:
    from ..redis import dump  # needs redis-py (optional)

    if args.output == "-":
        local = dump(args.client, args.key, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        check_output(args.output)
        local = dump(args.client, args.key, args.output)
    if is_scalable(local):
        what = f"the chain at {args.key!r} ({count(local.num_stages, 'stage')})"
    elif is_windowed(local):
        what = f"the windowed filter at {args.key!r} ({count(len(local.live_generations), 'live generation')})"
    else:
        what = f"the filter at {args.key!r}"
    note(f"wrote {what}, {_about_keys(local.approx_count)}, to {args.output}")
    return 0


def _about_keys(estimate: float) -> str:
    """The keys a filter holds by its bits; a full one's estimate is inf."""
    if estimate == float("inf"):
        return "every bit set (too full to estimate its keys)"
    return f"about {count(round(estimate), 'key')}"


def _redis_restore(args: argparse.Namespace) -> int:
    from ..redis import restore  # needs redis-py (optional)

    source: Any = sys.stdin.buffer if args.input == "-" else args.input
    restored = restore(source, args.client, args.key, replace=args.replace, backend=args.backend)
    note(f"restored {args.input} into Redis at {args.key!r}: {_about_keys(restored.approx_count)}")
    return 0


def _redis_import(args: argparse.Namespace) -> int:
    try:
        from ..scrapy.migrate import import_set  # needs Scrapy (optional)
    except ImportError as e:
        raise CliError(f"import-set needs Scrapy (for the fingerprint rules): {install_hint('scrapy')} ({e})") from None
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
        r = import_set(args.client, args.set_key, args.into, rule=args.rule, error_rate=args.error_rate,
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
          + _ratio_words(r.set_bytes, r.filter_bytes))
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


def _ratio_words(set_bytes: int, filter_bytes: int) -> str:
    """" (120x less)" where the filter is smaller, " (3.5x more)" where a small
    set's filter, sized for the whole crawl to come, is the larger."""
    if not set_bytes or not filter_bytes:
        return ""
    ratio = set_bytes / filter_bytes
    if ratio >= 1:
        return f" ({ratio:.0f}x less)" if ratio >= 10 else f" ({ratio:.1f}x less)"
    return f" ({1 / ratio:.0f}x more)" if ratio <= 0.1 else f" ({1 / ratio:.1f}x more)"
