"""Moving a crawl in from scrapy-redis: its fingerprint set becomes the
growing filter RedisBloomDupeFilter attaches to (``bloomline redis
import-set``).

scrapy-redis keeps every request's fingerprint, 40 hex characters, as a
member of a Redis SET (``%(spider)s:dupefilter``): about 100 bytes a
fingerprint with Redis's overhead, where the filter takes 2 to 3. The
import reads the set with SSCAN a chunk at a time and adds the fingerprints
(their 20 bytes) to a chain in Redis made as the dupefilter makes its own
(growth 2, tightening 0.9, the dupefilter's share of the error budget),
its first stage sized from SCARD with room to spare, so that the crawl's
past fits one stage. The chain records the rule the fingerprints were made
by (scrapy-redis's own by default: bloomline.scrapy.fingerprints), and the
dupefilter fingerprints requests by it from then on.

The SSCAN cursor is kept in Redis (``{key}:import``) after each chunk: an
interrupted import resumes where it stopped. The import's state, naming the
set and the rule, is written before the chain is made, so an import stopped
between making the chain and recording its rule resumes too. At the end
every member is looked up in the filter; only after that check passes is
the set deleted, and only when asked, by a script that deletes it only if
it still has the size the check began with (a dupefilter's set only grows:
a crawler's SADD after the check is imported and checked, never lost).
"""

from __future__ import annotations

import binascii
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import ScalableBloomFilter
from ..redis import RedisStages
from ..redis._names import client_of
from ..redis._wire import Script, Sender
from ..redis._travel import attached_chain
from ._settings import DEFAULT_ERROR_RATE, FRONT_SHARE, GROWTH, TIGHTENING
from .fingerprints import DEFAULT_RULE, rule as fingerprint_rule

__all__ = ["ImportReport", "import_set"]

HEADROOM = 1.25  # the first stage holds the set's size and a quarter more
MIN_CAPACITY = 1000
ROUNDS = 3  # imports and checks of a set that keeps growing before it is left alone

# KEYS: the set    ARGV: its size when the check began. Deleted only if it
# has not grown since: a member added after the check is in neither the
# filter nor the set once the set is gone.
_DELETE_IF_CHECKED = Script("""
local size = redis.call('SCARD', KEYS[1])
if size ~= tonumber(ARGV[1]) then return size end
redis.call('UNLINK', KEYS[1])
return -1
""")


@dataclass
class ImportReport:
    """What an import did (import_set's answer)."""

    set_key: str
    into: str
    members: int = 0  # the set's SCARD when the import began
    imported: int = 0  # fingerprints added (a member SSCAN returned twice counts twice)
    invalid: int = 0  # members that are not 40 hex characters: not added
    invalid_examples: list[str] = field(default_factory=list)
    missing: int = -1  # after the check: members the filter does not hold (-1: not checked)
    resumed: bool = False
    rounds: int = 1  # passes over the set: more when it grew during the check (a crawl still adding)
    set_bytes: int = 0
    filter_bytes: int = 0
    seconds: float = 0.0
    deleted: bool = False


def _fingerprints(members: list[bytes], report: ImportReport) -> list[bytes]:
    """The 20 bytes of each member that is 40 hex characters; the others
    counted (a few kept to name)."""
    good = [m for m in members if len(m) == 40]
    try:
        raw = binascii.unhexlify(b"".join(good))
    except binascii.Error:  # a bad character somewhere: member by member
        checked = []
        for m in good:
            try:
                checked.append(binascii.unhexlify(m))
            except binascii.Error:
                continue
        bad = len(members) - len(checked)
        report.invalid += bad
        report.invalid_examples += [m.decode("utf-8", "replace")[:60] for m in members
                                    if len(m) != 40 or not _is_hex(m)][: max(0, 5 - len(report.invalid_examples))]
        return checked
    if len(good) < len(members):
        report.invalid += len(members) - len(good)
        report.invalid_examples += [m.decode("utf-8", "replace")[:60] for m in members
                                    if len(m) != 40][: max(0, 5 - len(report.invalid_examples))]
    return [raw[i : i + 20] for i in range(0, len(raw), 20)]


def _is_hex(m: bytes) -> bool:
    try:
        binascii.unhexlify(m)
    except binascii.Error:
        return False
    return True


def _memory(client: Any, keys: list[str]) -> int:
    return sum(int(client.memory_usage(k, samples=0) or 0) for k in keys)


def import_set(
    redis: Any,
    set_key: str,
    into: Optional[str] = None,
    *,
    rule: str = DEFAULT_RULE,
    error_rate: float = DEFAULT_ERROR_RATE,
    backend: str = "auto",
    chunk: int = 10_000,
    delete_set: bool = False,
    progress: Optional[Callable[[ImportReport], None]] = None,
) -> ImportReport:
    """Import the scrapy-redis fingerprint set at `set_key` into the growing
    filter RedisBloomDupeFilter attaches to at `into` (default: the same
    name, as both default to ``%(spider)s:dupefilter``). `rule` names how
    the fingerprints were made (bloomline.scrapy.fingerprints.RULES);
    `error_rate` is the crawl's BLOOMLINE_ERROR_RATE. progress(report) is
    called after each chunk. Raises ValueError when the set is not a set,
    or when `into` holds a filter of other fingerprints."""
    fingerprint_rule(rule)  # checks the name
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}")
    client = client_of(redis)
    into = into or set_key
    kind = client.type(set_key).decode()  # (client_of's client reads bytes, whatever the caller's did)
    if kind != "set":
        raise ValueError(f"{set_key!r} holds no set (its type is {kind!r}): scrapy-redis keeps its fingerprints in "
                         "a set at %(spider)s:dupefilter")
    report = ImportReport(set_key, into, members=int(client.scard(set_key)))
    started = time.monotonic()
    store = RedisStages(client, into, backend=backend)
    state_key = store.import_key
    info = store.info()
    state = {k.decode(): v.decode() for k, v in client.hgetall(state_key).items()}
    # A chain with no rule recorded that this very import began (its state,
    # written before the chain, names the set and the rule): stopped between
    # making the chain and recording the rule. It is the same import.
    ours = info is not None and "fingerprints" not in info and state.get("set") == set_key and (
        state.get("rule") == rule and state.get("done") == "0")
    if info is None:
        state = {"set": set_key, "rule": rule, "cursor": "0", "imported": "0", "invalid": "0", "done": "0"}
        client.hset(state_key, mapping=state)
        capacity = max(MIN_CAPACITY, math.ceil(report.members * HEADROOM))
        chain = ScalableBloomFilter(capacity, error_rate * (1 - FRONT_SHARE), growth=GROWTH, tightening=TIGHTENING,
                                    store=store)
        store.set_info(fingerprints=rule, imported_from=set_key)
    else:
        if ours:
            store.set_info(fingerprints=rule, imported_from=set_key)
            info = dict(info, fingerprints=rule, imported_from=set_key)
        if info.get("fingerprints") != rule:
            made = f"by the rule {info['fingerprints']!r}" if info.get("fingerprints") else "by Scrapy's fingerprinter"
            raise ValueError(f"the filter at {into!r} holds fingerprints made {made}, not by {rule!r}: importing "
                             "would mix them; import into another key (--into), or drop that filter first")
        chain = attached_chain(store, info)
        if state.get("set") == set_key and state.get("done") == "0" and state.get("cursor", "0") != "0":
            report.resumed = True
            report.imported, report.invalid = int(state["imported"]), int(state["invalid"])
        else:
            state = {"set": set_key, "rule": rule, "cursor": "0", "imported": "0", "invalid": "0", "done": "0"}
            client.hset(state_key, mapping=state)
    sender = Sender(client)
    cursor = int(state.get("cursor", "0"))
    while True:
        # (a later round reads the set again: its members that are not fingerprints were counted)
        tally = report if report.rounds == 1 else ImportReport(set_key, into)
        _import_pass(client, chain, set_key, state_key, cursor, chunk, report, tally, started, progress)
        # The check: every member that is a fingerprint is in the filter.
        size = int(client.scard(set_key))
        report.set_bytes = _memory(client, [set_key])  # (measured before --delete-set deletes it)
        report.missing = _check(client, chain, set_key, into, chunk)
        if not delete_set or report.missing:
            break
        grown = int(sender.script(_DELETE_IF_CHECKED, [set_key], [size]))
        report.deleted = grown < 0
        if report.deleted or report.rounds == ROUNDS:
            break  # (still growing: a crawl writes to it; left, and said so)
        report.rounds += 1
        report.members, cursor = grown, 0  # what came in since: imported (re-adds are not new), checked again
    client.hset(state_key, mapping={"done": "1"})
    report.filter_bytes = _memory(client, store.keys())
    report.seconds = time.monotonic() - started
    return report


def _import_pass(client: Any, chain: ScalableBloomFilter, set_key: str, state_key: str, cursor: int, chunk: int,
                 report: ImportReport, tally: ImportReport, started: float,
                 progress: Optional[Callable[[ImportReport], None]]) -> None:
    """SSCAN the set from `cursor` to its end, adding each chunk's
    fingerprints, the cursor kept after each; members that are not
    fingerprints counted in `tally`."""
    first = True
    while first or cursor != 0:
        first = False
        cursor, members = client.sscan(set_key, cursor, count=chunk)
        fps = _fingerprints(members, tally)
        if fps:
            chain.add_many(fps)
        report.imported += len(fps)
        client.hset(state_key, mapping={"cursor": cursor, "imported": report.imported, "invalid": report.invalid})
        report.seconds = time.monotonic() - started
        if progress is not None:
            progress(report)


def _check(client: Any, chain: ScalableBloomFilter, set_key: str, into: str, chunk: int) -> int:
    """How many of the set's fingerprints the filter does not hold."""
    missing, cursor, first = 0, 0, True
    while first or cursor != 0:
        first = False
        cursor, members = client.sscan(set_key, cursor, count=chunk)
        fps = _fingerprints(members, ImportReport(set_key, into))
        if fps:
            missing += int((~chain.contains_many(fps)).sum())
    return missing
