"""WAIT after an add: the one place every Redis filter (fixed, a chain's
stages, windowed; every backend) holds its answers to what the replicas
acknowledged (``wait_replicas``; docs/design/redis.md, "Durability").
The Sender sends the WAIT on the one socket that answered the add
(``Sender.replicated``); here its outcome becomes the add's: NotDurable,
or a raising add's answered keys moved to its ``unknown``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from ._backend import NEW, UNSURE, AddOutcome
from ._errors import NotDurable
from ._wire import Sender


def replicated(sender: Sender, routes: Sequence[bytes], what: str, out: AddOutcome, wrote: bool) -> None:
    """With the sender's wait_replicas: WAIT on the nodes of routes after an
    add that wrote (`wrote`: a key new, or a windowed filter's refresh), and
    hold the add's answers to what the replicas acknowledged. An add that
    succeeded and fell short gets NotDurable as its error, its new keys the
    primary's answers (new, not yet safe). An add that failed part-way (a
    lost reply, a key gone, the server's refusal) keeps its own error, but
    the keys it did answer new are waited for all the same: a raising add's
    `new` makes a returning add's promise, so when too few replicas
    acknowledged (or the WAIT itself failed) they move to its `unknown`
    (act on them as new: they are not safe), and the error says why.
    Unwaited, a failover lost such keys and they were new again to another
    writer."""
    if not sender.wait_replicas:
        return
    try:
        new = int(np.count_nonzero(out.new))
        if not (new if out.error is not None else wrote):
            return
        try:
            acked, why = sender.replicated(routes)
        except Exception as e:  # noqa: BLE001 - the add's own error, with its facts, stays the one raised
            if out.error is None:
                raise
            acked, why = 0, f"its WAIT failed ({e!r})"
    finally:
        sender.forget_writes()
    if not why:
        return
    if out.error is None:
        out.error = NotDurable(
            f"an add to {what} is not yet on wait_replicas={sender.wait_replicas} replicas: {why}. Its {new} new "
            "keys are new (act on them: an add sent again would answer 'seen') but not safe: if the primary fails "
            "before a replica has them, they are reported new again", acked=acked, wanted=sender.wait_replicas)
        return
    out.codes[out.codes == NEW] = UNSURE
    add_note(out.error, f"Its {new} keys answered new are in `unknown`, not `new`: they are not yet on "
                        f"wait_replicas={sender.wait_replicas} replicas ({why}); act on them as new, they are not safe")


def add_note(e: BaseException, note: str) -> None:
    """A note on an exception: PEP 678's where Python shows it (3.11 on), else
    at the end of its message (3.9 and 3.10 print no notes)."""
    if sys.version_info >= (3, 11):
        e.add_note(note)
    elif e.args and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]}. {note}", *e.args[1:])
    else:
        e.args = (*e.args, note)
