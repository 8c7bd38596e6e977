"""RedisBloomFilter: one Bloom filter shared by many processes through Redis
(the module doc of bloomline.redis says what it promises)."""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from .. import _core
from .._core import BloomFilter, CapacityWarning
from .._facts import batch_shaped, with_facts
from ..display import remote_filter_html
from ._backend import NEW, AddOutcome, gone, settle_adds, settle_lookups
from ._errors import MissingKeyError, NotDurable
from ._handle import Expiring, Handle
from ._meta import DEFAULT_SHARD_BITS, delete_matching, eviction_policy, key_patterns, plan
from ._names import batch_ids, client_of, refuse_other_kinds
from ._registry import check_name, new_backend
from ._wire import DEFAULT_RETRIES, DEFAULT_WAIT_TIMEOUT_MS, Job, Script, Sender, _error_code

if TYPE_CHECKING:
    from .._core import Keys, Layout, Nulls


# KEYS: a filter's meta, then its other keys    ARGV: the making's ident
_DROP_MINE = Script("""
if redis.call('HGET', KEYS[1], 'ident') ~= ARGV[1] then return 0 end
return redis.call('DEL', unpack(KEYS))
""")


class RedisBloomFilter(Expiring):
    """A Bloom filter stored in Redis, safe to share between processes.

    ``RedisBloomFilter(redis, key, capacity, error_rate)`` creates the filter
    (or attaches to it if it exists with the same parameters);
    ``RedisBloomFilter(redis, key)`` attaches to an existing one. ``redis`` is
    a redis-py client (``redis.Redis`` or ``redis.cluster.RedisCluster``) or a
    URL. Attaching with a ``layout``, ``seed``, capacity or error rate that
    differs from the stored one raises ``ValueError`` naming the field.
    ``retries`` re-sends of a batch after a lost reply, each kept answer
    ``answer_ttl_ms`` (None: twice the retry window, at least 10 s). The
    retry window (``retry_window_s``) is every try's socket timeout plus the
    pauses between them, with the timeout the client's connections really
    have: the one it was given, else redis-py's default (5 s in redis-py 8:
    with the default 8 retries a window of 52 s, answers kept 105 s). Only a
    client made with ``socket_timeout=None`` has no bound on a try: then
    answers are kept 2 minutes.

    ``backend`` is recorded in the filter's meta when it is made ('auto':
    the module where the server and the replicas it can reach have it,
    else plain) and binds from then on: attaching never switches it.

    Durability: Redis replicates asynchronously, so an add acknowledged by
    the primary and lost in a failover (or by a restart from an older RDB)
    is reported new again. ``wait_replicas=n`` sends ``WAIT n
    wait_timeout_ms`` after each add (to each node it wrote to): if fewer
    replicas acknowledged, the add raises ``NotDurable``, its ``new`` the
    primary's answers (docs/design/redis.md, "Durability: failovers and
    restarts").
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        redis: Any,
        key: str,
        capacity: Optional[int] = None,
        error_rate: Optional[float] = None,
        *,
        layout: Optional[Layout] = None,
        seed: Optional[int] = None,
        shards: Optional[int] = None,
        shard_bits: int = DEFAULT_SHARD_BITS,
        backend: str = "auto",
        retries: int = DEFAULT_RETRIES,
        answer_ttl_ms: Optional[int] = None,
        wait_replicas: int = 0,
        wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
    ) -> None:
        client = client_of(redis)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        check_name(backend)
        sender = Sender(client, retries=retries, answer_ttl_ms=answer_ttl_ms, wait_replicas=wait_replicas,
                        wait_timeout_ms=wait_timeout_ms)
        new = None
        if capacity is not None:  # (made here, perhaps: with the backend it is made with, recorded)
            refuse_other_kinds(client, key, "filter")
            made_with = new_backend(backend, client)
            new = plan(capacity, 0.01 if error_rate is None else error_rate, layout or "blocked",
                       0 if seed is None else seed, shards, shard_bits, made_with.kinds[0])
            new["backend"] = made_with.name
        wanted: dict[str, Any] = {}
        if capacity is not None or error_rate is not None:
            wanted.update(layout=layout or "blocked", seed=0 if seed is None else seed)
            wanted.update({k: v for k, v in (("capacity", new and new["capacity"]), ("error_rate", error_rate),
                                                             ("shards", shards))
                           if v is not None})
        wanted.update({k: v for k, v in (("layout", layout), ("seed", seed)) if v is not None})
        self._setup(Handle.open(sender, key, new, wanted, backend, eviction_policy(client), f"the filter at {key!r}"))

    def _setup(self, h: Handle) -> None:
        self._h = h
        self._counts: dict[str, int] = {}
        self._warned = False

    @classmethod
    def _of(cls, h: Handle) -> RedisBloomFilter:
        """The filter a handle holds (a stage of a chain in Redis: RedisStages)."""
        self = cls.__new__(cls)
        self._setup(h)
        return self

    # ---- batches ------------------------------------------------------------------

    def _refuse_stage(self, what: str) -> None:
        if self._h.meta["kind"] == "stage":
            raise TypeError(f"{self.key!r} is a stage of a scalable chain: {what} the chain, which keeps the "
                            "stage's count")

    def add_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch (one command per shard and chunk, one round trip per
        node); True where the key was new. Among processes adding the same
        key at once exactly one sees it new, re-sends included; a fault that
        cannot be survived raises, whatever the error (UnknownOutcome,
        MissingKeyError, or the server's own: OOM, READONLY...), with ``new``
        and ``unknown`` saying what is known (bloomline.redis._errors).
        nulls='skip' leaves nulls out (False), as BloomFilter.add_many."""
        self._refuse_stage("add to")
        batch = self._h.prepare(keys, nulls)
        out = self._settled(self._h.add(batch), batch.valid)
        return batch_shaped(batch.valid, out.new)

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where the key may be present (one read per shard, one round
        trip per node); False for nulls with nulls='skip'."""
        batch = self._h.prepare(keys, nulls)
        return batch_shaped(batch.valid, self._h.lookup(batch))

    def _settled(self, out: AddOutcome, valid: Optional[npt.NDArray[np.bool_]] = None) -> AddOutcome:
        """An add's outcome held to the replicas (wait_replicas), its counts
        kept, and its error raised with its facts in the caller's shape."""
        self._h.replicated(out)
        if out.error is None or isinstance(out.error, NotDurable):
            try:
                self._note(out.counts)  # (the keys are on the primary: its counts are the filter's)
            except Exception as e:  # a warning made an error: it carries the add's facts, as the add's own errors do
                raise with_facts(e, out.new, out.unknown, valid) from out.error
        out.raise_error(valid)
        return out

    def _note(self, counts: dict[str, int]) -> None:
        """Keep the shards' counts the replies reported; warn once when
        their sum passes the capacity."""
        self._counts.update(counts)
        if not self._warned and counts and sum(self._counts.values()) > self._h.capacity:
            self._warned = True
            warnings.warn(
                f"the Redis filter at {self.key!r} has taken {sum(self._counts.values()):,} new keys, past its "
                f"capacity of {self.capacity:,}: its false-positive rate now rises past {self.error_rate:g} (new "
                "pages reported seen). Make it with a larger capacity, or use a growing chain "
                "(ScalableBloomFilter(..., store=RedisStages(redis, key)))", CapacityWarning, stacklevel=3)

    def add(self, key: Any) -> bool:
        """Add a key; True if it was new, atomically (one command, under the
        same protocol as add_many's)."""
        self._refuse_stage("add to")
        h = self._h
        part = h.backend.add_one(h.keys, key, batch_ids.next(), h.sender.answer_ttl_ms)
        h.sender.forget_writes()
        reply = h.sender.one(part.jobs[0])
        if isinstance(reply, list) and reply[0] in (b"1", b"0") and not h.sender.wait_replicas:
            # The common case, read without arrays.
            if part.count_key is not None and (reply[0] == b"1" or not self._counts):
                try:
                    self._note({part.count_key: int(reply[1])})  # (a count moves only when a key is new)
                except Exception as e:  # a warning made an error: with the answer, as _settled gives it
                    raise with_facts(e, np.array([reply[0] == b"1"]), np.zeros(1, dtype=bool)) from None
            return bool(reply[0] == b"1")
        out = self._settled(settle_adds((part,), (reply,), 1, h.what, h.policy))
        return bool(out.codes[0] == NEW)

    def __contains__(self, key: object) -> bool:
        h = self._h
        part = h.backend.has_one(h.keys, key)
        replies = h.sender.direct(part.jobs)
        if len(replies) == 1 and replies[0] in (b"1", b"0"):  # the module's answer, read without arrays
            return bool(replies[0] == b"1")
        return bool(settle_lookups((part,), replies, 1, h.what, h.policy)[0])

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it."""
        return self.add_many(self._h.backend.lines(data, self.seed))

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text."""
        return self.contains_many(self._h.backend.lines(data, self.seed))

    def update(self, *iterables: Keys, nulls: Nulls = "raise") -> None:
        """Add every key of each iterable, in order."""
        for keys in iterables:
            self.add_many(keys, nulls=nulls)

    # ---- keys, life and TTL (Expiring: expire, persist, ttl) ---------------------------

    def _each(self, command: bytes, *args: Any) -> list[Any]:
        return self._h.each(command, *args)

    def clear(self) -> None:
        """Forget every key (each value zeroed in place, its TTL kept)."""
        self._refuse_stage("clear")
        self._h.backend.clear(self._h)
        self._counts.clear()

    def delete(self) -> None:
        """Remove the filter from Redis entirely (its meta last)."""
        self._h.sender.each([Job(k.encode(), b"DEL", (k,)) for k in self._h.keys.data])
        self._h.sender.call(self._h.keys.meta, b"DEL", self._h.keys.meta)

    @classmethod
    def drop(cls, redis: Any, key: str) -> int:
        """Delete every key of the filter at `key`, whatever state it is in
        (its meta gone, a shard evicted): the way to start over after
        MissingKeyError. Returns how many keys were deleted."""
        return delete_matching(client_of(redis), key_patterns(key))

    # ---- facts ----------------------------------------------------------------------

    def __bool__(self) -> bool:
        """False while no key was added (or after clear()): no bit is set, as
        an empty set is false. One read of the filter's fill from Redis."""
        return self.approx_count > 0

    @property
    def bits_set(self) -> int:
        """BITCOUNT over all shards (not known for backend 'bf')."""
        return self._h.backend.bits_set(self._h)

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits that are 1 (for backend 'bf', from BF.CARD)."""
        return self._h.backend.fill_ratio(self._h)

    @property
    def nbytes(self) -> int:
        """Bytes of the filter's own structure in Redis: its bits (for
        backend 'bf', the server's filter's size, BF.INFO SIZE); not the
        key's overhead, nor its kept answers or counts."""
        return self._h.backend.nbytes(self._h)

    @property
    def approx_count(self) -> float:
        """Distinct keys estimated from the bits set (BF.CARD for backend 'bf')."""
        return self._h.backend.approx_count(self._h)

    @property
    def insert_count(self) -> int:
        """Adds that found their key new, over every process (the counts
        Redis keeps; -1 for a filter of backend 'bf' made before idents,
        which keeps none)."""
        counts = self._h.keys.counts
        if not counts:
            return -1
        return sum(int(c or 0) for c in self._h.sender.each([Job(c.encode(), b"GET", (c,)) for c in counts]))

    @property
    def expected_fp_rate(self) -> float:
        """The false-positive rate at the current fill (from approx_count; 1.0 once full)."""
        n = self.approx_count
        return 1.0 if math.isinf(n) else _core.expected_rate(n, self.num_bits, self.num_hashes, self.layout)

    # ---- interop with local filters ----------------------------------------------------

    @classmethod
    def from_filter(cls, bf: BloomFilter, redis: Any, key: str, *, shard_bits: int = DEFAULT_SHARD_BITS,
                    backend: str = "auto", retries: int = DEFAULT_RETRIES,
                    answer_ttl_ms: Optional[int] = None) -> RedisBloomFilter:
        """Upload a local BloomFilter (made with a capacity and error_rate) to a
        new Redis filter at key; answers are identical afterwards."""
        if bf.capacity is None or bf.error_rate is None:
            raise ValueError("from_filter needs a filter built with a capacity and error_rate (not from_params)")
        client = client_of(redis)
        if client.exists(f"{key}:meta"):
            raise ValueError(f"a filter already exists at key {key!r}; delete() it first")
        made_with = new_backend(backend, client)
        made_with.check_travel()  # (before anything is made)
        h: Optional[Handle] = None
        try:
            rf = cls(client, key, bf.capacity, bf.error_rate, layout=bf.layout, seed=bf.seed, shard_bits=shard_bits,
                     backend=made_with.name, retries=retries, answer_ttl_ms=answer_ttl_ms)
            h = rf._h
            ident = str(h.meta["ident"])  # (each write checks the filter is still this making: another restore's)
            try:
                ones = h.backend.upload(h.sender, h.keys, bf, ident=ident)
            except _redis.ResponseError as e:
                if _error_code(e) != "REPLACED":
                    raise
                raise gone(h.keys.meta, h.what, "", "was made again (another restore, replace=True) while this "
                           "upload ran") from None
            # Each shard's count: its share of the filter's count, by its bits.
            total = sum(ones) or 1
            h.sender.each([Job(c.encode(), b"SET", (c,), (round(bf.insert_count * n / total),))
                           for c, n in zip(h.keys.counts, ones)])
        except (ValueError, MissingKeyError):  # (refused before writing: another's filter, or leftovers, there)
            raise
        except BaseException:  # (nothing left half made or half uploaded: its missing bits' keys would read new)
            with contextlib.suppress(Exception):  # (the upload's error is the one that says what happened)
                # Only while the filter there is this upload's making: another restore's, finished meanwhile, stays.
                if h is None:
                    cls.drop(client, key)
                else:
                    h.sender.script(_DROP_MINE, h.all_keys(), [str(h.meta["ident"])])
            raise
        return rf

    def to_filter(self) -> BloomFilter:
        """Download into a local BloomFilter with identical answers."""
        bits, counts = self._h.download(self._h.keys.counts)
        return self._h.local(bits, sum(counts))

    # ---- what it is ---------------------------------------------------------------------

    @property
    def backend(self) -> str:
        """Which backend runs: 'module', 'plain' or 'bf'."""
        return self._h.backend.name

    @property
    def key(self) -> str:
        """The filter's name: the key it was made with, under which its Redis keys live."""
        return self._h.name

    @property
    def num_bits(self) -> int:
        """m: bits of the whole filter, over all its shards."""
        return self._h.keys.num_bits

    @property
    def num_hashes(self) -> int:
        """k: bits set and tested per key."""
        return self._h.keys.num_hashes

    @property
    def layout(self) -> Layout:
        """"blocked" or "standard", as recorded when the filter was made ("standard-v1": the standard layout's
        first index, of a filter made by an earlier bloomline)."""
        return self._h.keys.layout

    @property
    def seed(self) -> int:
        """The hash seed, as recorded when the filter was made."""
        return self._h.keys.seed

    @property
    def shards(self) -> int:
        """How many Redis strings hold the bits."""
        return max(1, len(self._h.keys.shards))

    @property
    def shard_bits(self) -> int:
        """Bits per shard (a multiple of 512; the last shard may hold fewer)."""
        return self._h.keys.shard_bits

    @property
    def capacity(self) -> int:
        """Keys it was sized for."""
        return self._h.capacity

    @property
    def error_rate(self) -> float:
        """The false-positive rate it was sized for, at capacity."""
        return self._h.error_rate

    @property
    def wait_replicas(self) -> int:
        """Replicas each add waits for (WAIT; 0: none)."""
        return self._h.sender.wait_replicas

    @property
    def retry_window_s(self) -> Optional[float]:
        """The longest a batch's tries may take, in seconds: (retries + 1)
        times the client's socket timeout, plus the pauses between tries;
        None for a client without a socket timeout."""
        return self._h.sender.window_s

    @property
    def answer_ttl_ms(self) -> int:
        """How long a batch's answer is kept for a re-send (see the class doc)."""
        return self._h.sender.answer_ttl_ms

    def shard_keys(self) -> list[str]:
        """The keys that hold the filter's data: its shards (for backend
        'bf', the server's own Bloom key)."""
        return list(self._h.keys.shards)

    def _repr_html_(self) -> str:
        return remote_filter_html(self, [("key", self.key), ("backend", self.backend), ("layout", self.layout),
                                         ("capacity", f"{self.capacity:,}"), ("error rate", f"{self.error_rate:g}"),
                                         ("num_bits", f"{self.num_bits:,}"), ("num_hashes", self.num_hashes)])

    def __repr__(self) -> str:
        return (f"<RedisBloomFilter key={self.key!r} backend='{self.backend}' capacity={self.capacity} "
                f"error_rate={self.error_rate} layout='{self.layout}' num_bits={self.num_bits} "
                f"num_hashes={self.num_hashes} shards={self.shards} seed={self.seed}>")
