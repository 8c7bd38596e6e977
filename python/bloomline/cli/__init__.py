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
  redis-module      the path of bloomline's Redis module (redis-server --loadmodule PATH)
  redis dump        a Redis filter or growing chain -> a filter file
  redis restore     a filter file -> a Redis filter or chain
  redis import-set  a scrapy-redis fingerprint set -> the filter RedisBloomDupeFilter uses

Exit codes follow Unix tools: 0 success, 1 failure while working (a file that
cannot be read, ...), 2 bad usage. Errors are one line on stderr, naming the
path the user gave. Inputs are told apart by what they are (stat), not by
their names: only a regular file can be read twice (build counts its lines
first), so a pipe, a FIFO or ``<(...)`` needs ``--capacity``.

The modules, lowest first; each imports only modules above it in this list:
  _errors   CliError (exit 1), UsageError (exit 2), PROG
  _parser   the commands and options (argparse) and the argument types
  _input    reading: lines in blocks, what an input is, filter files,
            progress, Ctrl-C in dedup
  _output   writing: stdout whole, filters atomically, remarks, and the
            checks made before any input is read
  _demo     demo
  _local    dedup, build, query, info, params, bench
  _redis    redis-module, redis dump, redis restore, redis import-set
  __init__  main: parse, run the command, report its failure in one line
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from .. import CapacityWarning
from ._demo import cmd_demo
from ._errors import PROG, CliError, UsageError
from ._input import BLOCK, LineBlocks, Progress
from ._local import cmd_bench, cmd_build, cmd_dedup, cmd_info, cmd_params, cmd_query
from ._output import OutputError, hold_standard_fds, quiet_stdout, whole_text_writes
from ._parser import build_parser
from ._redis import cmd_redis, cmd_redis_module

__all__ = ["BLOCK", "COMMANDS", "PROG", "CliError", "LineBlocks", "OutputError", "Progress", "UsageError", "main"]


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


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: TextIO | None = None, line: str | None = None) -> None:
    """warnings.showwarning for the command: `bloomline: warning: ...`, the
    message on one line, without the file and line of the code that warned."""
    (file or sys.stderr).write(f"{PROG}: warning: {' '.join(str(message).split())}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Errors are one line, ``bloomline: error: ...``, exit status 2 for bad
    usage and 1 for a failure while working; a closed output pipe ends the
    process by SIGPIPE, silently, as coreutils do."""
    hold_standard_fds()
    parser = build_parser()
    args = parser.parse_args(argv)
    whole_text_writes()
    try:
        with warnings.catch_warnings():
            # A warning is one line, as an error is, not Python's two (message, then the source line).
            warnings.showwarning = _one_line_warning
            if args.command in ("dedup", "build"):
                # they say it in one line of their own, naming where the capacity came from
                warnings.simplefilter("ignore", CapacityWarning)
            else:
                # a report, never the command's failure (even under -W error): the work it speaks of is done
                warnings.simplefilter("default", CapacityWarning)
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
        quiet_stdout()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
        return 141  # not reached
    except OSError as exc:
        if exc.filename is not None:  # ('' too: an empty name given)
            message = f"{exc.strerror}: {exc.filename!r}"
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            message = f"cannot write the output: {exc.strerror}"
        else:
            message = exc.strerror or str(exc)
        sys.stderr.write(f"{PROG}: error: {message}\n")
        quiet_stdout()
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except MemoryError:  # (a line longer than memory allows, say: the sizes the commands foresee say their own)
        sys.stderr.write(f"{PROG}: error: out of memory: the input or the options asked for more than this machine "
                         "could give\n")
        quiet_stdout()
        return 1
    except ValueError as exc:  # refused data or arguments the checks above did not foresee: still one line
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
