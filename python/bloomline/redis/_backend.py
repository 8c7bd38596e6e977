"""What every backend shares: the interface a backend implements, and how
replies become answers (and faults errors). A filter's keys in Redis
(FilterKeys, StageGuard, WindowKeys) are _names'.

A backend turns a batch into commands (``Part``s: the jobs, and the batch
indices their reply answers, in its order); the filter and each stage of a
chain run them alike through ``run_adds`` and ``run_lookups``. Every add
reply is ``[answer, count]``: one byte per key taken (``1`` new, ``0``
present, ``?`` unknown: a re-send whose kept answer was gone found it
present) and the count of new keys where the command keeps one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from .. import _core
from ._errors import MissingKeyError, UnknownOutcome, with_facts
from ._names import FilterKeys, StageGuard, WindowKeys, check_geometry, routable, sibling
from ._wire import Job, Script, Sender, _error_code

if TYPE_CHECKING:
    from .._core import BloomFilter, Layout, Nulls
    from ._handle import Handle

NEW, PRESENT, UNSURE, NOT_TAKEN = ord("1"), ord("0"), ord("?"), 0
ONE = np.zeros(1, dtype=np.int64)  # the batch index of a single key
WINDOW_BYTES = 8 << 20  # commands sent in one go: a large batch flows, not one huge write
_IDENT_NAMED = re.compile(r":[0-9a-f]{16}(\}|$)")  # a key name that ends in a filter's ident (_meta.plan)


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


@dataclass
class AddOutcome:
    """What an add's replies say, as a value: each key's answer byte (NEW,
    PRESENT, UNSURE; NOT_TAKEN where a stage add stopped before it or no
    reply came), the counts the replies reported, the error replies a stage
    add tolerates (STALE: those parts took nothing), and `error`, the cause
    when the add cannot be trusted whole (a part failed, whatever its error,
    or a key is unsure). The outermost call raises it, once, with the facts
    in its caller's shape."""

    codes: npt.NDArray[np.uint8]
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[Exception] = field(default_factory=list)
    error: Optional[Exception] = None
    resent: Optional[npt.NDArray[np.bool_]] = None  # the keys of parts re-sent after a lost reply

    @property
    def new(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.codes == NEW)

    @property
    def unknown(self) -> npt.NDArray[np.bool_]:
        """Every key without an answer: a failed part's keys, whatever its
        error, the unsure ones, and those a full stage did not take. Left
        out, those read as "seen" to a caller that trusts the facts."""
        return np.asarray((self.codes != NEW) & (self.codes != PRESENT))

    def raise_error(self, valid: Optional[npt.NDArray[np.bool_]] = None) -> None:
        """Raise the add's error (if any) with its facts, in the caller's shape."""
        if self.error is not None:
            raise with_facts(self.error, self.new, self.unknown, valid)


class Backend:
    """One way of keeping a filter in Redis: the whole storage strategy.
    It makes a filter's keys, turns batches into commands, and answers for
    the rest of the filter's life (clear, stats, the bits that travel). The
    fixed filter and every stage of a chain use these alike, through a
    Handle (_handle.py); the subclasses are the only places that know their
    server's commands. `kinds`: the meta kinds a backend keeps ("bits" and a
    chain's "stage" for bloomline's bits; one backend per other kind)."""

    name: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]]
    max_keys: ClassVar[int]  # keys per command: one command holds the server for a bounded time
    no_stages: ClassVar[str] = ""  # why it keeps no chain's stages, where it keeps none
    no_windows: ClassVar[str] = "it keeps no windowed filters"  # why, where it keeps none (plain does)
    our_index: ClassVar[bool] = True  # its bits set by our index, which the meta's layout names (_meta.stored_layout)

    # -- making a filter -------------------------------------------------------------------

    def geometry(self, num_bits: int, layout: Layout, shards: Optional[int], shard_bits: int) -> dict[str, int]:
        """A new filter's shards and shard_bits (ValueError naming the
        parameter when they cannot hold num_bits)."""
        raise NotImplementedError

    def keys_of(self, name: str, meta: dict[str, Any]) -> FilterKeys:
        """The names of a filter's keys, from its meta."""
        raise NotImplementedError

    def key_patterns(self, name: str, star: str) -> list[str]:
        """Names (`star` where a pattern's * goes) of every key a filter at
        `name` kept by this backend may have, but its meta."""
        raise NotImplementedError

    def finish(self, sender: Sender, meta: dict[str, str], keys: FilterKeys) -> None:
        """Make the filter's data keys where they are missing (idempotent)."""
        raise NotImplementedError

    # -- batches ---------------------------------------------------------------------------

    def prepare(self, keys: Any, nulls: Nulls, seed: int) -> Prepared:
        raise NotImplementedError

    def lines(self, data: Any, seed: int) -> Any:
        """The lines of a block of text, as keys prepare() takes."""
        raise NotImplementedError

    def add_parts(self, f: FilterKeys, batch: Prepared, batch_id: str, ttl_ms: int) -> Iterable[Part]:
        raise NotImplementedError

    def stage_parts(self, f: FilterKeys, guard: StageGuard, batch: Prepared, batch_id: str,
                    ttl_ms: int) -> Iterable[Part]:
        raise ValueError(f"backend {self.name!r} cannot keep a scalable chain's stages: {self.no_stages}")

    def has_parts(self, f: FilterKeys, batch: Prepared) -> Iterable[Part]:
        raise NotImplementedError

    # -- a windowed filter (_windowed.py): its commands, where the backend keeps one ---------

    window_form_add: ClassVar[Literal["positions", "set"]] = "set"
    window_form_has: ClassVar[Literal["positions", "get"]] = "get"

    def refuse_windows(self) -> None:
        """Raise where this backend keeps no windowed filter."""
        if self.no_windows:
            raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_chunk_keys(self, w: WindowKeys) -> int:
        """Keys per command of a windowed filter (each tests all its generations)."""
        return self.max_keys

    def window_add_job(self, w: WindowKeys, answer: str, ttl_ms: int, refresh: bool, body: bytes,
                       count: int, newest: int = -1, epoch: str = "") -> Job:
        """One chunk added at the server's time; its reply [answer, count
        of the current generation, its number, the meta's epoch]. newest:
        the newest generation the caller has added to, and epoch the meta's
        it added under (a meta gone, or made again, while it lives is lost)."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_has_job(self, w: WindowKeys, body: bytes, count: int, newest: int = -1, epoch: str = "") -> Job:
        """One chunk looked up in the live generations at the server's time;
        its reply [answer, the current generation's number]. newest, epoch:
        as an add's (a lookup that cannot see the caller's live keys is
        refused, never answered "not seen")."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_live_job(self, w: WindowKeys, newest: int = -1, epoch: str = "") -> Job:
        """The current generation's number and, for each live generation, [slot, number, count, bits set],
        read at the server's time (newest, epoch: as a lookup's)."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_dump_job(self, w: WindowKeys, newest: int = -1, epoch: str = "") -> Job:
        """The current generation's number and each live one's [slot, number, count, bits], at the server's time
        (newest, epoch: as a lookup's)."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_upload_job(self, w: WindowKeys, generations: Sequence[tuple[int, int, bytes]]) -> Job:
        """(number, count, bits) written into an empty ring, those live at the server's time (_window_travel)."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def window_clear_job(self, w: WindowKeys) -> Job:
        """Every generation deleted, with the meta's records of them, in one step (its epoch marked cleared)."""
        raise ValueError(f"backend {self.name!r} cannot keep a RedisWindowedFilter: {self.no_windows}")

    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        """A single key (add, in): one part, made without the batch's arrays."""
        raise NotImplementedError

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        raise NotImplementedError

    # -- the rest of a filter's life -------------------------------------------------------

    def clear(self, h: Handle) -> None:
        """Forget every key, each key's TTL kept."""
        raise NotImplementedError

    def approx_count(self, h: Handle) -> float:
        raise NotImplementedError

    def fill_ratio(self, h: Handle) -> float:
        raise NotImplementedError

    def nbytes(self, h: Handle) -> int:
        raise NotImplementedError

    def bits_set(self, h: Handle) -> int:
        raise NotImplementedError

    def download(self, h: Handle, counts: Sequence[str]) -> tuple[bytes, list[int]]:
        """The filter's bits, and the counts read after them in one round."""
        raise NotImplementedError

    def upload(self, sender: Sender, keys: FilterKeys, bf: BloomFilter, ident: Optional[str] = None) -> list[int]:
        """bf's bits written into the filter's (new, empty) keys; each
        shard's count of set bits. ident: each write is refused (REPLACED)
        unless the filter's meta still names this making (a restore's stage
        that another restore, replace=True, made again meanwhile)."""
        raise NotImplementedError

    def check_travel(self) -> None:
        """Raise where the filter's data is not bloomline's bits (it does
        not travel to or from a local filter)."""


# KEYS: the filter's meta, a shard    ARGV: the making's ident, offset, bytes
_UPLOAD_MINE = Script("""
if redis.call('HGET', KEYS[1], 'ident') ~= ARGV[1] then return redis.error_reply('REPLACED ' .. KEYS[1]) end
return redis.call('SETRANGE', KEYS[2], ARGV[2], ARGV[3])
""")


def gone(key: str, what: str, policy: str = "", state: str = "is gone") -> MissingKeyError:
    """The error for a key of a filter (or chain: `what`) that vanished."""
    how = (f" (this server's maxmemory-policy is {policy!r}: it evicts keys under memory pressure)"
           if policy and policy != "noeviction" else "")
    fix = "RedisStages(redis, key).reset()" if what.startswith("the chain") else "RedisBloomFilter.drop(redis, key)"
    if _IDENT_NAMED.search(key):  # named by the filter's ident (each backend's keys_of)
        return MissingKeyError(
            f"{key!r}, a key of {what}, {state}: the filter was dropped, or dropped and made again (a restore "
            "--replace), since this handle attached, or the key was evicted, expired or deleted. Refused rather "
            "than added to a filter this handle does not know: attach again", key=key)
    return MissingKeyError(
        f"{key!r}, a key of {what}, {state}: evicted{how}, expired (an EXPIRE, or expire()), or deleted. Refused "
        f"rather than answered from a fresh, empty filter: remove what is left ({fix}) and make it anew, or "
        "restore it", key=key)


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
             tolerate: Sequence[str] = ()) -> AddOutcome:
    """Send an add's parts (the windows after a failed one are not sent):
    its outcome, error replies whose code is in `tolerate` skipped."""
    sender.forget_writes()
    settled = _Settled(n, tolerate)
    try:
        for window in windows(parts):
            maybe_ran: list[bool] = []
            replies = sender.run([p.jobs[0] for p in window], maybe_ran)
            settled.take(window, replies, maybe_ran)
            if settled.failed:
                break
    except Exception as e:  # raised while sending (a cluster's slot map unreadable...): it carries the facts too
        settled.failed.append(e)
    return settled.outcome(what, policy)


def settle_adds(parts: Sequence[Part], replies: Sequence[Any], n: int, what: str, policy: str = "") -> AddOutcome:
    """run_adds's outcome for replies already received (a single key's)."""
    settled = _Settled(n, ())
    settled.take(parts, replies)
    return settled.outcome(what, policy)


class _Settled:
    """An add's replies, gathered into its outcome."""

    def __init__(self, n: int, tolerate: Sequence[str]) -> None:
        self.out = AddOutcome(np.zeros(n, dtype=np.uint8), resent=np.zeros(n, dtype=bool))
        self.failed: list[Exception] = []
        self.tolerate = tolerate

    def take(self, parts: Sequence[Part], replies: Sequence[Any], maybe_ran: Sequence[bool] = ()) -> None:
        assert self.out.resent is not None
        for part, ran in zip(parts, maybe_ran):
            if ran:
                self.out.resent[part.idx] = True
        for part, reply in zip(parts, replies):
            if isinstance(reply, Exception):
                if isinstance(reply, _redis.ResponseError) and _error_code(reply) in self.tolerate:
                    self.out.skipped.append(reply)
                else:
                    self.failed.append(reply)
                continue
            answer, count = reply
            self.out.codes[part.idx[: len(answer)]] = np.frombuffer(answer, dtype=np.uint8)
            if part.count_key is not None and int(count) >= 0:
                self.out.counts[part.count_key] = int(count)

    def outcome(self, what: str, policy: str) -> AddOutcome:
        unsure = int(np.count_nonzero(self.out.codes == UNSURE))
        if self.failed:
            # Whatever the error (OOM, READONLY, NOPERM, a script's...), it
            # is the add's: raised bare, a caller took the batch as lost or
            # as seen, and the keys it had added read "seen" on a retry.
            self.out.error = missing_error(self.failed[0], what, policy)
        elif unsure:
            self.out.error = UnknownOutcome(
                f"{unsure} keys of a batch to {what} were re-sent after a lost reply whose kept answer was gone, "
                "and found present: the lost send may have added them")
        return self.out


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



# KEYS: shard, count    ARGV: bytes. Make a shard (and its count) where missing.
_MAKE_SHARD = Script("""
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SETRANGE', KEYS[1], ARGV[1] - 1, '\\0') end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], '0') end
return redis.call('STRLEN', KEYS[1])
""")

# KEYS: shard, count    ARGV: bytes. Zero a shard, keeping its TTL.
_CLEAR_SHARD = Script("""
local len = redis.call('STRLEN', KEYS[1])
if len ~= tonumber(ARGV[1]) then return redis.error_reply((len == 0 and 'MISSING ' or 'WRONGSIZE ') .. KEYS[1]) end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SETRANGE', KEYS[1], ARGV[1] - 1, '\\0')
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
redis.call('SET', KEYS[2], '0', 'KEEPTTL')
return 1
""")

_REDIS_MAX_BITS = 2**32  # a Redis string holds at most 512 MB
_PIECE = 64 * 2**20  # uploads SETRANGE in 64 MB pieces: no single huge request


class BitsBackend(Backend):
    """The backends that keep bloomline's bits in Redis strings (module,
    plain): a batch is hashed once, cut into chunks of max_keys, and each
    chunk grouped by shard by the core (its operands in the subclass's form).
    A fixed filter sends a command per shard part, each with its own answer
    key in its shard's slot; a stage sends one per chunk, over all its
    shards (they share a slot). Both keep the same keys, byte for byte a
    local filter's payload, so either reads what the other wrote."""

    kinds = ("bits", "stage")
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

    # -- making a filter (the same keys for both bits backends) ---------------------------

    def geometry(self, num_bits: int, layout: Layout, shards: Optional[int], shard_bits: int) -> dict[str, int]:
        if layout != "blocked":  # standard: a key's bits spread over the whole array: one string
            if math.ceil(num_bits / 512) * 512 > _REDIS_MAX_BITS:
                raise ValueError(f"layout 'standard' keeps every bit in one Redis string, at most 2**32 bits; this "
                                 f"filter needs {num_bits} (use layout 'blocked', which shards)")
            if shards not in (None, 1):
                raise ValueError(f"layout 'standard' uses one shard, got shards={shards}")
            return dict(shards=1, shard_bits=math.ceil(num_bits / 512) * 512)
        blocks = num_bits // 512
        if shards is None:
            shards = max(1, math.ceil(num_bits / shard_bits))
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= blocks:
            raise ValueError(f"shards must be an int in [1, {blocks}], got {shards!r}")
        per_shard_blocks = math.ceil(blocks / shards)
        if math.ceil(blocks / per_shard_blocks) != shards:  # (the creation failed with Redis's "offset is out of range")
            raise ValueError(f"shards={shards} would leave the last shard empty ({blocks} blocks of 512 bits, "
                             f"{per_shard_blocks} to a shard): pass shards={math.ceil(blocks / per_shard_blocks)}")
        if per_shard_blocks * 512 > _REDIS_MAX_BITS:
            raise ValueError(f"shards={shards} puts {per_shard_blocks * 512} bits in a shard, over Redis's 2**32")
        return dict(shards=shards, shard_bits=per_shard_blocks * 512)

    def keys_of(self, name: str, meta: dict[str, Any]) -> FilterKeys:
        # Every add reads its count first: a count named by the filter's ident
        # is its identity check (filters made before idents: ":count"). A
        # stage of a chain keeps one count for the stage, its guard's.
        check_geometry(name, meta)
        total, per = math.ceil(int(meta["num_bits"]) / 512) * 64, int(meta["shard_bits"]) // 8
        shards = tuple(routable(f"{name}:bits:{i}") for i in range(int(meta["shards"])))
        suffix = f":count:{meta['ident']}" if meta.get("ident") else ":count"
        counts = ((f"{name}{suffix}",) if meta["kind"] == "stage" else tuple(sibling(s, suffix) for s in shards))
        return FilterKeys(name, str(meta["layout"]), int(meta["num_bits"]), int(meta["num_hashes"]),  # type: ignore[arg-type]
                          int(meta["seed"]), int(meta["shard_bits"]), shards,
                          tuple(min(per, total - i * per) for i in range(len(shards))), counts,
                          tuple(sibling(s, ":ans:") for s in shards))

    def key_patterns(self, name: str, star: str) -> list[str]:
        shards = routable(f"{name}:bits:{star}")
        return [shards, sibling(shards, ":count"), sibling(shards, f":count:{star}"), sibling(shards, f":ans:{star}")]

    def finish(self, sender: Sender, meta: dict[str, str], keys: FilterKeys) -> None:
        jobs = [Job(s.encode(), _MAKE_SHARD, (s, c), (n,)) for s, c, n in zip(keys.shards, keys.counts, keys.nbytes)]
        for shard, size, reply in zip(keys.shards, keys.nbytes, sender.run(jobs)):
            if isinstance(reply, Exception):
                raise reply
            if int(reply) != size:
                raise ValueError(f"{shard!r} holds {int(reply)} bytes where the filter at {keys.name!r} needs {size}: "
                                 "a key of another filter? Drop it to start over")

    def lines(self, data: Any, seed: int) -> Any:
        return _core.hash_lines(data, seed)

    # -- the rest of a filter's life ------------------------------------------------------

    def clear(self, h: Handle) -> None:
        k = h.keys
        h.sender.each([Job(s.encode(), _CLEAR_SHARD, (s, c), (n,)) for s, c, n in zip(k.shards, k.counts, k.nbytes)])

    def shard_values(self, h: Handle, command: bytes, then: Sequence[Job] = ()) -> list[Any]:
        """command on each shard, then its STRLEN (a shard that is gone
        raises MissingKeyError instead of reading as zeros; nothing makes a
        vanished shard anew, so one present after the read was during it);
        then the replies of `then`, sent behind them on the same connection
        (each node's in order)."""
        k = h.keys
        reads = [j for s in k.shards for j in (Job(s.encode(), command, (s,)), Job(s.encode(), b"STRLEN", (s,)))]
        replies = h.sender.each([*reads, *then])
        for shard, size, length in zip(k.shards, k.nbytes, replies[1 : len(reads) : 2]):
            if int(length) != size:
                raise gone(shard, h.what, h.policy, "is gone" if not int(length) else "has the wrong size")
        return replies[: len(reads) : 2] + replies[len(reads) :]

    def bits_set(self, h: Handle) -> int:
        return int(sum(self.shard_values(h, b"BITCOUNT")))

    def approx_count(self, h: Handle) -> float:
        return _core.estimate_count(self.bits_set(h), h.keys.num_bits, h.keys.num_hashes, h.keys.layout)

    def fill_ratio(self, h: Handle) -> float:
        return self.bits_set(h) / h.keys.num_bits

    def nbytes(self, h: Handle) -> int:
        return sum(h.keys.nbytes)

    def download(self, h: Handle, counts: Sequence[str]) -> tuple[bytes, list[int]]:
        # An add sets its bits and its count in one step, so a count read
        # after the bits is never lower than what they hold (read before,
        # the keys added in between were in the bits and not in the count).
        values = self.shard_values(h, b"GET", [Job(c.encode(), b"GET", (c,)) for c in counts])
        n = len(h.keys.shards)
        for name, c in zip(counts, values[n:]):
            if c is None:
                raise gone(name, h.what, h.policy)
        return b"".join(values[:n]), [int(c) for c in values[n:]]

    def upload(self, sender: Sender, keys: FilterKeys, bf: BloomFilter, ident: Optional[str] = None) -> list[int]:
        data = memoryview(bf).cast("B")
        per = keys.shard_bits // 8
        jobs, ones = [], []
        for i, shard in enumerate(keys.shards):
            part = data[i * per : i * per + keys.nbytes[i]]
            for start in range(0, len(part), _PIECE):
                piece = bytes(part[start : start + _PIECE])
                if not piece.strip(b"\x00"):
                    continue
                jobs.append(Job(shard.encode(), b"SETRANGE", (shard,), (start, piece)) if ident is None else
                            Job(shard.encode(), _UPLOAD_MINE, (keys.meta, shard), (ident, start, piece)))
            ones.append(int(np.unpackbits(np.frombuffer(part, dtype=np.uint8)).sum()))
        sender.each(jobs)
        return ones
