"""What a Redis filter raises when a fault cannot be survived, and the facts
every error of an add carries.

Every exception an add raises once its batch is under way (whatever its
cause: a lost connection, OOM, READONLY, NOPERM, a script's error, a key of
the wrong type, LOADING for too long, a capacity warning made an error
after the batch was answered) carries what is known of the batch,
set on the exception itself, whose class is left as it is (code that catches
``redis.exceptions.OutOfMemoryError`` still does): ``new`` is True where a
key was reported new to this call (its add was answered), ``unknown`` True
where the call has no answer for it (its command may or may not have run,
or was refused, or never reached it), both in the caller's batch shape. A
key neither new nor unknown was answered "seen". A caller that must not
lose a key treats every ``unknown`` key as new (fetch the page): at least
once, never lost. When ``new`` is None nothing is known of the batch: treat
every key as unknown. ``facts(e)`` reads them from any exception (None,
None where it has none: an argument refused before anything was sent).
With ``wait_replicas``, an add that raised for another cause than
``NotDurable`` waited for the keys it answered new, as a returning add
does: its ``new`` keys were acknowledged by the replicas, and keys it
answered new that were not are in ``unknown`` (a note on the error says
why). A ``NotDurable``'s ``new`` keys are exactly the unacknowledged ones.

``UnknownOutcome`` and ``MissingKeyError`` are bloomline's own two causes
(a re-send that could not be told from a first send; a key of the filter
that vanished) and declare the two fields.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from .._facts import facts, with_facts

__all__ = ["EvictionWarning", "MissingKeyError", "ModuleMissing", "NotDurable", "UnknownOutcome", "facts",
           "with_facts"]

class _BatchFacts:
    new: Optional[npt.NDArray[np.bool_]]
    unknown: Optional[npt.NDArray[np.bool_]]

    def _facts(self, new: Any, unknown: Any) -> None:
        with_facts(self, new, unknown)  # type: ignore[arg-type]  # (a mixin of exceptions)


class UnknownOutcome(_redis.ConnectionError, _BatchFacts):
    """A command whose reply was lost could not be sent again safely (its
    retries ran out, or its answer may have expired or been evicted), so
    whether its keys were added is unknown. A subclass of redis's
    ConnectionError: code that retries on those keeps working, and must
    treat ``unknown`` keys as new."""

    def __init__(self, message: str, *, new: Any = None, unknown: Any = None) -> None:
        super().__init__(message)
        self._facts(new, unknown)


class MissingKeyError(_redis.ResponseError, _BatchFacts):
    """A key of a filter that should exist does not: evicted, expired or
    deleted. bloomline refuses rather than answer from a fresh, empty
    filter (every key would look new, or every page seen)."""

    def __init__(self, message: str, *, key: str = "", new: Any = None, unknown: Any = None) -> None:
        super().__init__(message)
        self.key = key
        self._facts(new, unknown)


class ModuleMissing(_redis.ResponseError, ValueError):
    """A filter made with backend 'module' met a server (or a replica of
    it) without bloomline's module: refused, never read as plain Redis
    (every key would be new again). A ValueError when a filter is opened;
    a ResponseError too, as the server's own refusal of a module command
    is, so that an add meeting it mid-batch (a chain growing a stage on a
    promoted replica without the module) is caught where the add's other
    refusals are, with the batch's facts on it."""


class NotDurable(_redis.RedisError, _BatchFacts):
    """An add asked for ``wait_replicas`` (Redis's WAIT) and fewer replicas
    acknowledged it within ``wait_timeout_ms``. Every key was answered by
    the primary: ``new`` is True where it was new there (the caller's, to
    act on as new: an add sent again would answer "seen"), ``unknown`` True
    only where the call has no answer (a chain's keys a full stage did not
    take). The batch is not yet safe: if the primary fails before a replica
    has it, a promoted replica reports these keys new again. ``acked`` and
    ``wanted`` are the replicas that acknowledged and those asked for. Not a
    ConnectionError: the server answered, and retrying the add would lose
    the answers."""

    def __init__(self, message: str, *, acked: int, wanted: int, new: Any = None, unknown: Any = None) -> None:
        super().__init__(message)
        self.acked = acked
        self.wanted = wanted
        self._facts(new, unknown)


class EvictionWarning(UserWarning):
    """The server's ``maxmemory-policy`` can evict a filter's keys (the
    filter then refuses: MissingKeyError) or the kept answers that make a
    re-sent batch safe (the re-send then raises UnknownOutcome)."""
