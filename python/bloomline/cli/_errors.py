"""How a command fails: the two errors main() reports as one line each,
``bloomline: error: ...``, and the name those lines start with."""

from __future__ import annotations

PROG = "bloomline"


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


class UsageError(Exception):
    """Bad usage found after parsing: one line, exit status 2."""
