"""The commands on local files and streams: dedup, build, query, info,
params and bench; and what dedup and build share (the filter they make,
their summary, the warning past capacity)."""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import stat
import sys
import time
from typing import Any

from .. import BloomFilter, CountingBloomFilter, __version__, _core, optimal_params, read_header, select_lines
from .._facts import facts
from .._lazy import is_scalable, is_windowed, windowed_kind
from .._numpy import np
from .._protocol import Filter
from .._units import count, format_bytes
from ._errors import PROG, CliError, UsageError
from ._input import (BLOCK, Interrupt, LineBlocks, Progress, ReadAhead, count_lines, filter_bytes, input_name, input_stat,
                     open_filter, regular_inputs, what_it_is)
from ._output import (OutputError, WriteBehind, check_output, holding_state, note, refuse_same_file, stdout_is_regular,
                      write_all, write_filter)


DEDUP_CAPACITY = 10_000_000
DEDUP_ERROR_RATE = 1e-6


def _dedup_filter(args: argparse.Namespace) -> Filter:
    """The filter dedup works with, and args.capacity_from: where its
    capacity came from, for the warning past it."""
    capacity = args.capacity or DEDUP_CAPACITY
    error_rate = args.error_rate or DEDUP_ERROR_RATE
    args.capacity_from = (("--capacity", "Raise --capacity.") if args.capacity else
                          ("the default, as no --capacity was given", "Give a larger --capacity."))
    windowed = args.window is not None
    for option, given in (("--generations", args.generations), ("--now", args.now), ("--no-refresh", not args.refresh)):
        if given is not None and given is not False and not windowed and not _windowed_state(args.state):
            raise UsageError(f"{option} goes with --window (or a --state file that holds a WindowedBloomFilter)")
    if args.redis or args.key:
        if windowed:
            raise UsageError("--window is local: --redis and --window are exclusive")
        if not (args.redis and args.key):
            raise UsageError("--redis and --key go together")
        if args.threads != 1:
            raise UsageError("--threads is for a local filter: with --redis the server does the adds")
        if args.state:
            raise UsageError("--state and --redis are exclusive")
        try:
            # redis-py is optional (bloomline[redis]): imported only when --redis asks for it.
            from ..redis import RedisBloomFilter

            args.capacity_from = (f"the filter at Redis key {args.key!r}", "A new key with a larger --capacity "
                                  "holds more.")
            return RedisBloomFilter(args.redis, args.key, capacity, error_rate)
        except ImportError as exc:
            raise CliError(str(exc)) from None
        except Exception as exc:  # redis-py errors: one line
            raise CliError(f"redis: {exc}") from None
    if args.state is not None and os.path.exists(args.state):
        f: Filter = _open_state(args)
        # The filter in the state file wins: say so when the options ask otherwise.
        for option, given, kept in (("--capacity", args.capacity, f.capacity),
                                    ("--error-rate", args.error_rate, f.error_rate)):
            if given is not None and given != kept:
                note(f"{option} {given:g} is ignored: {args.state} holds a filter made for {option[2:]} {kept:g} "
                     "(delete it to start over)")
        args.capacity_from = (f"the filter in {args.state}", "A new state file with a larger --capacity holds "
                              "more.")
        if args.threads != 1 and is_scalable(f):
            raise UsageError(f"--threads needs a fixed-size filter: {args.state} holds a ScalableBloomFilter, which "
                             "adds on one thread")
        return f
    if windowed:
        _check_now(args, args.window)
        windowed_filter: Filter = _new_filter(windowed_kind(), capacity, error_rate, "blocked", args.capacity_from[0],
                                              window=args.window, generations=args.generations or 4,
                                              clock=_clock(args))
        return windowed_filter
    made: Filter = _new_filter(BloomFilter, capacity, error_rate, "blocked", args.capacity_from[0])
    return made


def _add_lines(f: Any, block: Any, args: argparse.Namespace) -> Any:
    """dedup's add of a block: refresh= for a windowed filter, threads= where it was asked for."""
    options: dict[str, Any] = {}
    if is_windowed(f):
        options["refresh"] = args.refresh
    if args.threads != 1:
        options["threads"] = args.threads
    return f.add_lines(block, **options)


def _line_blocks(files: list[str], threads: int, ahead: bool = False) -> LineBlocks | ReadAhead:
    """The input in blocks of BLOCK bytes a thread (--threads 0: a CPU), up
    to 32: a threaded add cuts a block into parts of at least 16,384 lines,
    so one thread's block would keep the others idle. ahead: read one block
    ahead, on a thread of its own."""
    per_cpu = threads or os.cpu_count() or 1
    blocks = LineBlocks(files, BLOCK * max(1, min(per_cpu, 32)), buffers=3 if ahead else 1)
    return ReadAhead(blocks) if ahead else blocks


def _clock(args: argparse.Namespace) -> Any:
    """--now, fixed for the whole run, or None: the system clock (a state
    saved on another clock, a small --now, is then refused, saying so)."""
    now = args.now
    return None if now is None else (lambda: now)


def _check_now(args: argparse.Namespace, window: float) -> None:
    """--now more than a window ahead of this machine's clock: the state it
    saved would be refused by the next run on the clock (refuse_ahead)."""
    ahead = (args.now - time.time()) if args.now is not None else 0.0
    if ahead > window:
        raise UsageError(f"--now {args.now:.0f} is {ahead:.0f} s ahead of this machine's clock, more than the "
                         f"{window:g} s window: a state saved at it would be refused by the next run on the clock")


def _windowed_state(path: str | None) -> bool:
    return bool(path) and os.path.exists(str(path)) and _windowed_bytes(filter_bytes(str(path)))


def _windowed_bytes(data: bytes) -> bool:
    try:
        return bool(read_header(data)["kind"] == "WindowedBloomFilter")
    except ValueError:
        return False  # (open_filter says what is wrong with it)


def _open_state(args: argparse.Namespace) -> Filter:
    """dedup's --state: the filter in it; a windowed one on the run's clock
    (--now). Its window and generations win over the options."""
    data = filter_bytes(args.state)
    f: Filter
    if _windowed_bytes(data):  # (read once, on the run's clock: a state ahead of it is refused, naming the file)
        try:
            f = windowed_kind().from_bytes(data, clock=_clock(args))
        except ValueError as exc:
            raise CliError(f"{input_name(args.state)}: {exc} (in dedup: --now SECONDS)") from None
        _check_now(args, f.window)
        # (saved in the form it was found in: a ring that processes map stays one they can map)
        args.state_shared = bool(read_header(data).get("shared"))
        for option, given, kept in (("--window", args.window, f.window), ("--generations", args.generations,
                                                                          f.generations)):
            if given is not None and given != kept:
                note(f"{option} {given:g} is ignored: {args.state} holds a filter made for {option[2:]} {kept:g} "
                     "(delete it to start over)")
    else:
        f = open_filter(args.state, data)
    if args.window is not None and not is_windowed(f):
        raise UsageError(f"{args.state} holds a {type(f).__name__}, which has no window: give another --state file "
                         "for --window, or drop --window")
    return f


def _new_filter(kind: Any, capacity: int, error_rate: float, layout: str, origin: str, **options: Any) -> Any:
    """A new local filter; one it has no memory for is one line saying how
    much it needs. origin: where the capacity came from; options: a
    windowed filter's (window, generations, clock)."""
    try:
        return kind(capacity, error_rate, layout=layout, **options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except MemoryError:
        if "generations" in options:  # (G + 1 generations, each at its share of the error rate)
            g = options["generations"]
            rate = _core.window_generation_error_rate(error_rate, g)
            bits = (g + 1) * optimal_params(capacity, rate, layout).num_bits
        else:
            bits = optimal_params(capacity, error_rate, layout).num_bits * (4 if kind is CountingBloomFilter else 1)
        raise CliError(f"capacity {capacity:,} (from {origin}) at error rate {error_rate:g} needs {format_bytes(bits / 8)} of memory for the "
                       f"{kind.__name__} (held in memory whole), more than this machine could give") from None


def _redis_errors(exc: Exception) -> CliError | None:
    """An add's Redis error (redis-py's or bloomline.redis's own) as one
    line, saying which lines of its block _answered_lines writes."""
    if not type(exc).__module__.startswith(("redis", "bloomline.redis")):
        return None
    new, unknown = facts(exc)
    if new is None or unknown is None:
        held = "nothing is known of this block's lines, so all of them were written"
    else:
        held = (f"this block's {count(int(new.sum()), 'line')} answered new and {int(unknown.sum()):,} without an "
                "answer (perhaps recorded) were written, the rest dropped as seen")
    return CliError(f"redis: {exc}; {held}; the lines after it were not read")


def _answered_lines(block: Any, exc: Exception, args: argparse.Namespace) -> Any:
    """The lines of a block whose add raised that must be written: those
    answered new (recorded as seen in Redis) and those without an answer
    (perhaps recorded: at least once, never lost); the whole block where the
    error says nothing of it."""
    new, unknown = facts(exc)
    if new is None or unknown is None:
        chars = np.frombuffer(block, dtype=np.uint8)
        lines = int(np.count_nonzero(chars == 10)) + int(chars[-1] != 10)  # (a last line without a newline)
        return select_lines(block, np.ones(lines, dtype=bool), threads=args.threads)
    return select_lines(block, new | unknown, threads=args.threads)


def cmd_dedup(args: argparse.Namespace) -> int:
    refuse_same_file("dedup", [("--state", args.state)] * (args.state is not None) + [("stdout", "-")],
                     args.files or ["-"])
    if args.state is None:
        return _dedup(args)
    check_output(args.state)
    with holding_state(args.state):  # (from its load to its save: one run at a time)
        return _dedup(args)


def _dedup(args: argparse.Namespace) -> int:
    f = _dedup_filter(args)
    read = written = 0
    expected_fp = 0.0
    # A local BloomFilter or CountingBloomFilter adds a block and copies its new lines in one call (dedup_lines).
    # Where nothing can block for long (input files, and stdout, that are regular files) the next block is also
    # read, and the last one written, on threads of their own. A pipe or a terminal keeps the serial loop: a
    # reader thread would take stdin from whoever reads it next, and a writer blocked on a pipe would outlive the
    # command. The others (Redis, windowed, scalable) take a block at a time: with Redis the lines a failed write
    # leaves are recorded as seen there, and the message counts them in the one block that failed.
    fused = hasattr(f, "dedup_lines")
    blocks = _line_blocks(args.files, args.threads, ahead=fused and regular_inputs(args.files))
    progress = Progress(blocks.total_bytes, args.quiet)

    def write(out: bytes) -> None:
        try:
            write_all(out)
        except OutputError as exc:
            raise CliError(str(exc) + _not_written(args, out[exc.written:].count(b"\n"))) from None
        except BrokenPipeError as exc:  # (`| head`: main ends by SIGPIPE, silently, unless lines are lost)
            lost = _not_written(args, out[getattr(exc, "written", 0):].count(b"\n")) if args.redis else ""
            if lost:
                sys.stderr.write(f"{PROG}: the output was closed{lost}\n")
            raise

    with Interrupt() as interrupt:
        behind = WriteBehind(write) if fused and stdout_is_regular() else None

        def written_whole() -> None:
            """Every block handed to the writer written (or its error raised); a second Ctrl-C gives it up."""
            if behind is not None:
                interrupt.phase = "block"
                behind.wait()
                interrupt.phase = "note"

        kept = 0
        try:
            for block in interrupt.blocks(blocks):
                rate = f.expected_fp_rate
                if fused:
                    out, lines, kept = f.dedup_lines(block, threads=args.threads)  # type: ignore[attr-defined]
                else:
                    try:
                        new = _add_lines(f, block, args)
                    except Exception as exc:
                        cli_error = _redis_errors(exc)
                        if cli_error is None:
                            raise
                        write(_answered_lines(block, exc, args))  # (before the error: none recorded is lost)
                        raise cli_error from None
                    lines, kept = len(new), int(new.sum())
                    out = select_lines(block, new, threads=args.threads)
                # Whole before the next block is read, or, behind, before the next is handed over: --state is
                # saved only after every line in it was written (a failure leaves the old state as it was).
                (behind.write if behind is not None else write)(out)
                read += lines
                written += kept
                expected_fp += rate * kept
                progress.update(blocks.bytes_read, read)
            written_whole()
        except KeyboardInterrupt:
            progress.done()
            sys.stderr.write(f"{PROG}: interrupted again: the block being written was given up"
                             + _not_written(args, kept, maybe=True) + "\n")
            return 130
        except Exception:
            # The blocks before the failure are written whole, as the serial loop wrote each before it read on;
            # a write of theirs that failed is the error the serial loop would have met first.
            written_whole()
            raise
        finally:
            if behind is not None:
                behind.close()
        progress.done()
        if args.state:
            try:
                write_filter(f, args.state, shared=getattr(args, "state_shared", False))
            except OSError as exc:  # (the output is whole; the state file is as it was)
                raise CliError(f"cannot save {args.state}: {exc.strerror or exc}; it holds what it held before this "
                               f"run, so the next run writes this run's {written:,} lines again") from None
    if not args.quiet:
        sys.stderr.write(
            f"{PROG} dedup: {count(read, 'line')} read, {written:,} written, {read - written:,} dropped as seen "
            + (f"(of which about {_about(expected_fp)} may be false positives)\n" if expected_fp >= 0.05
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
    return format_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # KiB on Linux


def _about(x: float) -> str:
    """An expected or estimated count as a person reads one: 104,836 (not
    104,836.1 nor 1.04836e+05), one decimal below 10 (0.3, 2.5)."""
    return f"{x:,.1f}" if x < 10 else f"{round(x):,}"


def _warn_capacity(command: str, f: Filter, what: str, source: tuple[str, str]) -> None:
    """A warning (even with -q) once the filter holds more keys than its
    capacity, naming where that capacity came from and what to do (source).
    The count is the filter's own count of new keys (exactly at capacity is
    within it), which a filter far past its capacity keeps low (every key
    looks seen): "at least", with the bits' estimate where that is higher.
    The bits' estimate alone where it keeps no count."""
    capacity = f.capacity
    held = getattr(f, "insert_count", -1)
    where = by_bits = ""
    if is_windowed(f):  # capacity is per window, and so per generation
        held = max((g.insert_count for _, g in f.live_generations), default=0)
        where = f" in one generation (a {f.window / f.generations:g} s slice of its window)"
    elif held >= 0 and f.approx_count > held * 1.1:
        by_bits = f" (about {_about(f.approx_count)} by its bits)" if math.isfinite(f.approx_count) else \
            " (every bit is set: how many is past telling)"
    estimated = held < 0
    held = round(f.approx_count) if estimated else held
    if capacity and held > capacity:
        sys.stderr.write(
            f"{PROG} {command}: warning: the filter holds {'about ' if estimated else 'at least '}"
            f"{count(held, what)}{where}{by_bits}, more "
            f"than its capacity of {capacity:,} (from {source[0]}); its false-positive rate is now "
            f"{f.expected_fp_rate:.2g}. {source[1]}\n"
        )


def cmd_build(args: argparse.Namespace) -> int:
    capacity = args.capacity
    files = args.files or ["-"]
    refuse_same_file("build", [("OUT", args.output)], files)
    if capacity is None:
        # Counting the lines first reads each input twice: regular files only.
        for name in files:
            st = input_stat(name)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UsageError(f"build needs --capacity when it reads {input_name(name)} ({what_it_is(st)}, which "
                                 "can be read only once: the filter is sized before its keys are read)")
    check_output(args.output)
    if capacity is None:
        capacity = max(1, count_lines(files))
        source = ("the input's line count, as no --capacity was given", "")
    else:
        source = ("--capacity", "Raise --capacity.")
    kind = CountingBloomFilter if args.counting else BloomFilter
    f = _new_filter(kind, capacity, args.error_rate, args.layout, source[0])
    keys = 0
    blocks = _line_blocks(files, args.threads)
    progress = Progress(blocks.total_bytes, args.quiet)
    for block in blocks:
        keys += len(f.add_lines(block, threads=args.threads))
        progress.update(blocks.bytes_read, keys)
    progress.done()
    write_filter(f, args.output)
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
    refuse_same_file("query", [("stdout", "-")], [args.filter, *(args.files or ["-"])])
    f = open_filter(args.filter)
    lines = 0
    blocks = LineBlocks(args.files)
    progress = Progress(blocks.total_bytes, args.quiet)
    for block in blocks:
        hit = f.contains_lines(block)
        write_all(select_lines(block, hit != args.absent))
        lines += len(hit)
        progress.update(blocks.bytes_read, lines)
    progress.done()
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    data = filter_bytes(args.filter)
    f = open_filter(args.filter, data)  # every check a reader makes, as one line naming the file
    header = read_header(data)
    # "fill" is the fraction of bits (counters) set; the header's count of
    # them is shown under its own name.
    header.pop("fill", None)
    if isinstance(f, CountingBloomFilter):
        header["counters_set"] = f.nonzero_counters
    elif is_windowed(f):
        live = f.live_generations  # (by the system clock)
        header["live_generations"] = len(live)
        header["bits_set"] = sum(g.bits_set for _, g in live)
    else:
        header["bits_set"] = f.bits_set if isinstance(f, BloomFilter) else sum(s.bits_set for s in f.stages)
    header.update(fill=f.fill_ratio, approx_count=f.approx_count, expected_fp_rate=f.expected_fp_rate,
                  nbytes=f.nbytes, file_bytes=len(data))
    if args.json:
        sys.stdout.write(json.dumps(header, indent=1) + "\n")
        return 0
    width = max(len(k) for k in header)
    for k, v in header.items():
        if k == "approx_count":  # an estimate of a count of keys: a whole number (--json keeps the float)
            text = f"about {_about(v)}" if math.isfinite(v) else "inf (every bit set)"
        elif isinstance(v, int) and not isinstance(v, bool):
            text = f"{v:,}"
        else:
            text = f"{v:.6g}" if isinstance(v, float) else v
        sys.stdout.write(f"{k:<{width}}  {text}\n")
    return 0


def cmd_params(args: argparse.Namespace) -> int:
    rows = []
    for layout in ("blocked", "standard"):  # every row known before anything is printed
        try:
            rows.append((layout, optimal_params(args.capacity, args.error_rate, layout)))
        except (ValueError, OverflowError) as exc:  # (a capacity past 2**64 is an OverflowError)
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
