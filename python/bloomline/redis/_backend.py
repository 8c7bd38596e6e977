"""What every backend shares: a filter's keys in Redis, the interface a
backend implements, and how replies become answers (and faults errors).

A backend turns a batch into commands (``Part``s: the jobs, and the batch
indices their reply answers, in its order); the filter and each stage of a
chain run them alike through ``run_adds`` and ``run_lookups``. Every add
reply is ``[answer, count]``: one byte per key taken (``1`` new, ``0``
present, ``?`` unknown: a re-send whose kept answer was gone found it
present) and the count of new keys where the command keeps one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from .. import _core
from ._errors import MissingKeyError, NotDurable, UnknownOutcome, with_facts
from ._wire import Job, Sender, _error_code

if TYPE_CHECKING:
    from .._core import Layout, Nulls

NEW, PRESENT, UNSURE, NOT_TAKEN = ord("1"), ord("0"), ord("?"), 0
ONE = np.zeros(1, dtype=np.int64)  # the batch index of a single key
WINDOW_BYTES = 8 << 20  # commands sent in one go: a large batch flows, not one huge write


@dataclass(frozen=True)
class FilterKeys:
    """A filter in Redis: its geometry and the names of its keys. shards[i]
    holds nbytes[i] bytes; counts[i] its count of new keys (a fixed filter
    keeps one per shard, so that each add updates its own in one step)."""

    name: str
    layout: Layout
    num_bits: int
    num_hashes: int
    seed: int
    shard_bits: int
    shards: tuple[str, ...] = ()
    nbytes: tuple[int, ...] = ()
    counts: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()  # each shard's answer-name prefix (a batch's id follows)
    bf: Optional[str] = None


@dataclass(frozen=True)
class StageGuard:
    """What a stage add checks in the same step (a chain in Redis): the
    chain's stage count is `expected`, and the stage's count of new keys,
    at `count`, stays within `capacity`."""

    stages: str
    expected: int
    capacity: int
    count: str
    answers: str  # the prefix of the stage's answer keys


@dataclass
class Part:
    """Commands of a batch and the batch indices their answer covers (in the
    reply's order); decode turns the replies of a lookup into a bool per
    index. count_key: the count an add reply reports."""

    jobs: list[Job]
    idx: npt.NDArray[np.int64]
    decode: Optional[Callable[[list[Any]], npt.NDArray[np.bool_]]] = None
    count_key: Optional[str] = None


@dataclass
class Prepared:
    """A batch ready for a backend: hashes (bits backends) or key bytes in
    bodies of at most max_keys (bf); n keys, valid the batch's non-nulls."""

    n: int
    valid: npt.NDArray[np.bool_]
    hashes: Any = None
    bodies: list[bytes] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


class Backend:
    """One way of keeping a filter in Redis. The fixed filter and every stage
    of a chain use these alike; the three subclasses are the only places
    that know their server's commands."""

    name: ClassVar[str]
    max_keys: ClassVar[int]  # keys per command: one command holds the server for a bounded time

    def prepare(self, keys: Any, nulls: Nulls, seed: int) -> Prepared:
        raise NotImplementedError

    def add_parts(self, f: FilterKeys, batch: Prepared, batch_id: str, ttl_ms: int) -> Iterable[Part]:
        raise NotImplementedError

    def stage_parts(self, f: FilterKeys, guard: StageGuard, batch: Prepared, batch_id: str,
                    ttl_ms: int) -> Iterable[Part]:
        raise ValueError(f"backend {self.name!r} cannot keep a scalable chain's stages")

    def has_parts(self, f: FilterKeys, batch: Prepared) -> Iterable[Part]:
        raise NotImplementedError

    # A single key (add, in): one part, made without the batch's arrays.
    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        raise NotImplementedError

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        raise NotImplementedError


def gone(key: str, what: str, policy: str = "", state: str = "is gone") -> MissingKeyError:
    """The error for a key of a filter (or chain: `what`) that vanished."""
    how = (f" (this server's maxmemory-policy is {policy!r}: it evicts keys under memory pressure)"
           if policy and policy != "noeviction" else "")
    fix = "RedisStages(redis, key).reset()" if what.startswith("the chain") else "RedisBloomFilter.drop(redis, key)"
    if ":count:" in key:  # named by the filter's ident (_meta.keys_of)
        return MissingKeyError(
            f"{key!r}, a key of {what}, {state}: the filter was dropped, or dropped and made again (a restore "
            "--replace), since this handle attached, or the key was evicted, expired or deleted. Refused rather "
            "than added to a filter this handle does not know: attach again", key=key)
    return MissingKeyError(
        f"{key!r}, a key of {what}, {state}: evicted{how}, expired (an EXPIRE, or expire()), or deleted. Refused "
        f"rather than answered from a fresh, empty filter: remove what is left ({fix}) and make it anew, or "
        "restore it", key=key)


def replicated(sender: Sender, routes: Sequence[bytes], what: str, new: npt.NDArray[np.bool_],
               unknown: npt.NDArray[np.bool_]) -> None:
    """With the sender's wait_replicas: WAIT on the nodes of routes after an
    add; NotDurable (the primary's answers as its facts) when fewer replicas
    acknowledged."""
    if not sender.wait_replicas:
        return
    acked, why = sender.replicated(routes)
    if why:
        raise NotDurable(
            f"an add to {what} is not yet on wait_replicas={sender.wait_replicas} replicas: {why}. Its "
            f"{int(new.sum())} new keys are new (act on them: an add sent again would answer 'seen') but not safe: "
            "if the primary fails before a replica has them, they are reported new again",
            acked=acked, wanted=sender.wait_replicas, new=new, unknown=unknown)


def missing_error(e: Exception, what: str, policy: str = "") -> Exception:
    """A server's MISSING (or WRONGSIZE) reply as MissingKeyError; other
    errors as they are."""
    if not isinstance(e, _redis.ResponseError) or _error_code(e) not in ("MISSING", "WRONGSIZE"):
        return e
    words = str(e).split()
    return gone(words[1] if len(words) > 1 else "?", what, policy,
                "is gone" if words[0] == "MISSING" else "has the wrong size")


def windows(parts: Iterable[Part]) -> Iterator[list[Part]]:
    """Parts in groups of about WINDOW_BYTES of commands, made as they are sent."""
    window: list[Part] = []
    size = 0
    for part in parts:
        window.append(part)
        size += sum(len(j.body) for j in part.jobs)
        if size >= WINDOW_BYTES:
            yield window
            window, size = [], 0
    if window:
        yield window


def run_adds(sender: Sender, parts: Iterable[Part], n: int, what: str, policy: str = "",
             tolerate: Sequence[str] = ()) -> tuple[npt.NDArray[np.uint8], dict[str, int], list[Exception]]:
    """Send an add's parts: each key's answer byte (NOT_TAKEN where a stage
    add stopped before it), the counts the replies reported, and the error
    replies whose code is in `tolerate` (their parts took nothing). Raises
    when any other part failed or any answer is unknown, with what is known
    (the windows after a failed one are not sent)."""
    settled = _Settled(n, tolerate)
    try:
        for window in windows(parts):
            settled.take(window, sender.run([p.jobs[0] for p in window]))
            if settled.failed:
                break
    except Exception as e:  # raised while sending (a cluster's slot map unreadable...): it carries the facts too
        settled.failed.append((None, e))
    return settled.result(what, policy)


def settle_adds(parts: Sequence[Part], replies: Sequence[Any], n: int, what: str,
                policy: str = "") -> tuple[npt.NDArray[np.uint8], dict[str, int], list[Exception]]:
    """run_adds's result for replies already received (a single key's)."""
    settled = _Settled(n, ())
    settled.take(parts, replies)
    return settled.result(what, policy)


class _Settled:
    """An add's replies, as answers and counts, and the error it raises."""

    def __init__(self, n: int, tolerate: Sequence[str]) -> None:
        self.codes = np.zeros(n, dtype=np.uint8)
        self.counts: dict[str, int] = {}
        self.failed: list[tuple[Optional[Part], Exception]] = []
        self.skipped: list[Exception] = []
        self.tolerate = tolerate

    def take(self, parts: Sequence[Part], replies: Sequence[Any]) -> None:
        for part, reply in zip(parts, replies):
            if isinstance(reply, Exception):
                if isinstance(reply, _redis.ResponseError) and _error_code(reply) in self.tolerate:
                    self.skipped.append(reply)
                else:
                    self.failed.append((part, reply))
                continue
            answer, count = reply
            self.codes[part.idx[: len(answer)]] = np.frombuffer(answer, dtype=np.uint8)
            if part.count_key is not None and int(count) >= 0:
                self.counts[part.count_key] = int(count)

    def result(self, what: str, policy: str) -> tuple[npt.NDArray[np.uint8], dict[str, int], list[Exception]]:
        unsure = self.codes == UNSURE
        if not self.failed and not unsure.any():
            return self.codes, self.counts, self.skipped
        # Raising: every key without an answer is unknown (to be treated as
        # new), not only the '?' ones: a failed part's keys, whatever its
        # error, and the keys a full stage did not take. Left out, those read
        # as "seen" to a caller that trusts the facts.
        unknown = (self.codes != NEW) & (self.codes != PRESENT)
        error = self.failed[0][1] if self.failed else UnknownOutcome(
            f"{int(unsure.sum())} keys of a batch to {what} were re-sent after a lost reply whose kept answer was "
            "gone, and found present: the lost send may have added them")
        # Whatever the error (OOM, READONLY, NOPERM, a script's...), it
        # carries the facts: raised bare, a caller took the batch as lost or
        # as seen, and the keys it had added read "seen" on a retry.
        raise with_facts(missing_error(error, what, policy), self.codes == NEW, unknown)


def run_lookups(sender: Sender, parts: Iterable[Part], n: int, what: str, policy: str = "") -> npt.NDArray[np.bool_]:
    """Send a lookup's parts; True where the key may be present (in any of
    the filters the parts read: a chain's stages at once)."""
    out = np.zeros(n, dtype=bool)
    for window in windows(parts):
        _settle_window(window, sender.run([j for p in window for j in p.jobs]), out, what, policy)
    return out


def settle_lookups(parts: Sequence[Part], replies: Sequence[Any], n: int, what: str,
                   policy: str = "") -> npt.NDArray[np.bool_]:
    """run_lookups's result for replies already received (a single key's)."""
    out = np.zeros(n, dtype=bool)
    _settle_window(parts, replies, out, what, policy)
    return out


def _settle_window(window: Sequence[Part], replies: Sequence[Any], out: npt.NDArray[np.bool_], what: str,
                   policy: str) -> None:
    at = 0
    for part in window:
        mine = replies[at : at + len(part.jobs)]
        at += len(part.jobs)
        try:
            for reply in mine:
                if isinstance(reply, Exception):
                    raise reply
            assert part.decode is not None
            out[part.idx] |= part.decode(list(mine))
        except _redis.ResponseError as e:
            raise missing_error(e, what, policy) from None


def check_size(key: str, nbytes: int, reply: Any) -> None:
    """A shard's STRLEN (or EXISTS for 1) read beside a lookup, as MISSING."""
    if int(reply) != nbytes:
        raise _redis.ResponseError(f"{'MISSING' if int(reply) == 0 else 'WRONGSIZE'} {key}")



class BitsBackend(Backend):
    """The backends that keep bloomline's bits in Redis strings (module,
    plain): a batch is hashed once, cut into chunks of max_keys, and each
    chunk grouped by shard by the core (its operands in the subclass's form).
    A fixed filter sends a command per shard part, each with its own answer
    key in its shard's slot; a stage sends one per chunk, over all its
    shards (they share a slot)."""

    form_add: ClassVar[Literal["positions", "set"]]
    form_has: ClassVar[Literal["positions", "get"]]

    def prepare(self, keys: Any, nulls: Nulls, seed: int) -> Prepared:
        hashed, valid = _core.hash_valid(keys, seed, nulls=nulls)
        return Prepared(len(hashed), valid, hashes=hashed)

    def chunk_keys(self, f: FilterKeys) -> int:
        """Keys per command for this filter's geometry."""
        return self.max_keys

    def _chunks(self, f: FilterKeys, hashes: Any, form: Literal["positions", "set", "get"],
                joined: bool = False) -> Any:
        step = self.chunk_keys(f)
        for lo in range(0, len(hashes), step):
            shards, starts, order, bodies, counts = _core.redis_batch(
                hashes[lo : lo + step], f.num_bits, f.num_hashes, layout=f.layout, seed=f.seed,
                shard_bits=f.shard_bits, form=form, joined=joined)
            yield lo, shards.tolist(), starts, order, bodies, counts.tolist()

    def add_parts(self, f: FilterKeys, batch: Prepared, batch_id: str, ttl_ms: int) -> Iterator[Part]:
        for c, (lo, shards, starts, order, bodies, counts) in enumerate(self._chunks(f, batch.hashes, self.form_add)):
            for p, s in enumerate(shards):
                job = self.add_job(f, s, f"{f.answers[s]}{batch_id}.{c}", ttl_ms, bodies[p], counts[p])
                yield Part([job], lo + order[starts[p] : starts[p + 1]], count_key=f.counts[s])

    def stage_parts(self, f: FilterKeys, guard: StageGuard, batch: Prepared, batch_id: str,
                    ttl_ms: int) -> Iterator[Part]:
        chunks = self._chunks(f, batch.hashes, self.form_add, joined=True)
        for c, (lo, shards, starts, order, bodies, counts) in enumerate(chunks):
            job = self.stage_job(f, guard, shards, np.diff(starts).tolist(), f"{guard.answers}{batch_id}.{c}",
                                 ttl_ms, bodies[0], counts[0])
            yield Part([job], lo + order, count_key=guard.count)

    def has_parts(self, f: FilterKeys, batch: Prepared) -> Iterator[Part]:
        for lo, shards, starts, order, bodies, counts in self._chunks(f, batch.hashes, self.form_has):
            for p, s in enumerate(shards):
                jobs, decode = self.has_jobs(f, s, bodies[p], counts[p])
                yield Part(jobs, lo + order[starts[p] : starts[p + 1]], decode=decode)

    def _key(self, f: FilterKeys, key: Any, form: Literal["positions", "set", "get"]) -> tuple[int, bytes, int]:
        return _core.redis_key(key, f.num_bits, f.num_hashes, f.layout, f.seed, f.shard_bits, form)

    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        s, body, count = self._key(f, key, self.form_add)
        return Part([self.add_job(f, s, f"{f.answers[s]}{batch_id}.0", ttl_ms, body, count)], ONE,
                    count_key=f.counts[s])

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        s, body, count = self._key(f, key, self.form_has)
        jobs, decode = self.has_jobs(f, s, body, count)
        return Part(jobs, ONE, decode=decode)

    # -- each bits backend's commands ------------------------------------------------------

    def add_job(self, f: FilterKeys, shard: int, answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        raise NotImplementedError

    def stage_job(self, f: FilterKeys, guard: StageGuard, shards: list[int], keys_per_shard: list[int],
                  answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        raise NotImplementedError

    def has_jobs(self, f: FilterKeys, shard: int, body: bytes,
                 count: int) -> tuple[list[Job], Callable[[list[Any]], npt.NDArray[np.bool_]]]:
        raise NotImplementedError
