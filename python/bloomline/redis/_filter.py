"""RedisBloomFilter: one Bloom filter shared by many processes through Redis
(the module doc of bloomline.redis says what it promises)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np
import numpy.typing as npt
import redis as _redis

from .. import _core
from .._core import BloomFilter, CapacityWarning
from ..scalable import _in_place
from ._backend import (NEW, FilterKeys, Prepared, gone, replicated, run_adds, run_lookups, settle_adds,
                       settle_lookups)
from ._errors import facts, with_facts
from ._meta import DEFAULT_SHARD_BITS, data_keys, eviction_policy, keys_of, open_filter, plan
from ._registry import choose_backend, new_backend
from ._names import batch_ids, client_of
from ._wire import DEFAULT_RETRIES, DEFAULT_WAIT_TIMEOUT_MS, Job, Script, Sender

if TYPE_CHECKING:
    from .._core import Keys, Layout, Nulls

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


class RedisBloomFilter:
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
    primary's answers (docs/DECISIONS.md, "Redis: durability, and the
    backend a filter was made with").
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
        if backend not in ("auto", "module", "plain", "bf"):
            raise ValueError(f"backend must be one of 'auto', 'module', 'plain', 'bf', got {backend!r}")
        sender = Sender(client, retries=retries, answer_ttl_ms=answer_ttl_ms, wait_replicas=wait_replicas,
                        wait_timeout_ms=wait_timeout_ms)
        new = None
        if capacity is not None:
            new = plan(capacity, 0.01 if error_rate is None else error_rate, layout or "blocked",
                       0 if seed is None else seed, shards, shard_bits, "bf" if backend == "bf" else "bits")
            if backend != "bf" and not client.exists(f"{key}:meta"):  # (made here, perhaps: its backend recorded)
                new["backend"] = new_backend(backend, client)
        wanted: dict[str, Any] = {}
        if capacity is not None or error_rate is not None:
            wanted.update(layout=layout or "blocked", seed=0 if seed is None else seed)
            wanted.update({k: v for k, v in (("capacity", capacity), ("error_rate", error_rate), ("shards", shards))
                           if v is not None})
        wanted.update({k: v for k, v in (("layout", layout), ("seed", seed)) if v is not None})
        meta = open_filter(sender, key, new, wanted)
        self._setup(sender, key, meta, backend, eviction_policy(client))

    def _setup(self, sender: Sender, key: str, meta: dict[str, str], backend: str, policy: str) -> None:
        self._sender = sender
        self._r = sender.client
        self._key = key
        self._meta = meta
        self._kind = meta["kind"]
        self._keys: FilterKeys = keys_of(key, meta)
        self._capacity = int(meta["capacity"])
        self._error_rate = float(meta["error_rate"])
        self._policy = policy
        self._what = f"the filter at {key!r}"
        self._backend = choose_backend(self._kind, backend, self._r, key, meta.get("backend"))
        self._counts: dict[str, int] = {}
        self._warned = False

    @classmethod
    def _attach_stage(cls, sender: Sender, key: str, backend: str, policy: str,
                      missing: Callable[[str], Exception]) -> RedisBloomFilter:
        """A stage of a chain in Redis (RedisStages), sharing its sender;
        missing(meta_key) is the error when the stage's meta is gone."""
        self = cls.__new__(cls)
        self._setup(sender, key, open_filter(sender, key, None, {}, missing), backend, policy)
        return self

    # ---- batches ------------------------------------------------------------------

    def _refuse_stage(self, what: str) -> None:
        if self._kind == "stage":
            raise TypeError(f"{self._key!r} is a stage of a scalable chain: {what} the chain, which keeps the "
                            "stage's count")

    def _prepare(self, keys: Keys, nulls: Nulls) -> Prepared:
        return self._backend.prepare(keys, nulls, self._keys.seed)

    def add_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch (one command per shard and chunk, one round trip per
        node); True where the key was new. Among processes adding the same
        key at once exactly one sees it new, re-sends included; a fault that
        cannot be survived raises, whatever the error (UnknownOutcome,
        MissingKeyError, or the server's own: OOM, READONLY...), with ``new``
        and ``unknown`` saying what is known (bloomline.redis._errors).
        nulls='skip' leaves nulls out (False), as BloomFilter.add_many."""
        self._refuse_stage("add to")
        batch = self._prepare(keys, nulls)
        parts = self._backend.add_parts(self._keys, batch, batch_ids.next(), self._sender.answer_ttl_ms)
        try:
            codes, counts, _ = run_adds(self._sender, parts, batch.n, self._what, self._policy)
        except Exception as e:  # (every error of an add carries its facts: in the caller's shape, nulls included)
            with_facts(e, *(None if a is None else _in_place(batch.valid, a) for a in facts(e)))
            raise
        self._note(counts)
        self._replicated(codes == NEW, batch.valid)
        return _in_place(batch.valid, codes == NEW)

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where the key may be present (one read per shard, one round
        trip per node); False for nulls with nulls='skip'."""
        batch = self._prepare(keys, nulls)
        parts = self._backend.has_parts(self._keys, batch)
        return _in_place(batch.valid, run_lookups(self._sender, parts, batch.n, self._what, self._policy))

    def _note(self, counts: dict[str, int]) -> None:
        """Keep the shards' counts the replies reported; warn once when
        their sum passes the capacity."""
        self._counts.update(counts)
        if not self._warned and counts and sum(self._counts.values()) > self._capacity:
            self._warned = True
            warnings.warn(
                f"the Redis filter at {self._key!r} has taken {sum(self._counts.values()):,} new keys, past its "
                f"capacity of {self._capacity:,}: its false-positive rate now rises past {self._error_rate:g} (new "
                "pages reported seen). Make it with a larger capacity, or use a growing chain "
                "(ScalableBloomFilter(..., store=RedisStages(redis, key)))", CapacityWarning, stacklevel=3)

    def add(self, key: Any) -> bool:
        """Add a key; True if it was new, atomically (one command, under the
        same protocol as add_many's)."""
        self._refuse_stage("add to")
        part = self._backend.add_one(self._keys, key, batch_ids.next(), self._sender.answer_ttl_ms)
        reply = self._sender.one(part.jobs[0])
        if isinstance(reply, list) and reply[0] in (b"1", b"0"):  # the common case, read without arrays
            if part.count_key is not None and (reply[0] == b"1" or not self._counts):
                self._note({part.count_key: int(reply[1])})  # (a count moves only when a key is new)
            new = reply[0] == b"1"
        else:
            codes, counts, _ = settle_adds((part,), (reply,), 1, self._what, self._policy)  # raises, or reads a count
            self._note(counts)
            new = codes[0] == NEW
        if self._sender.wait_replicas:
            self._replicated(np.array([new]), None)
        return bool(new)

    def _replicated(self, new: npt.NDArray[np.bool_], valid: Optional[npt.NDArray[np.bool_]]) -> None:
        """With wait_replicas: WAIT on each node of the filter (NotDurable
        when too few replicas acknowledged; its facts in the batch's shape)."""
        if not self._sender.wait_replicas:
            return
        known, unknown = (a if valid is None else _in_place(valid, a) for a in (new, np.zeros(len(new), dtype=bool)))
        routes = [s.encode() for s in self._keys.shards] or [str(self._keys.bf).encode()]
        replicated(self._sender, routes, self._what, known, unknown)

    def __contains__(self, key: object) -> bool:
        part = self._backend.has_one(self._keys, key)
        replies = self._sender.direct(part.jobs)
        if len(replies) == 1 and replies[0] in (b"1", b"0"):  # the module's answer, read without arrays
            return bool(replies[0] == b"1")
        return bool(settle_lookups((part,), replies, 1, self._what, self._policy)[0])

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it."""
        return self.add_many(self._lines(data))

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text."""
        return self.contains_many(self._lines(data))

    def _lines(self, data: Any) -> Any:
        if self._kind == "bf":  # the server needs the lines themselves
            return [bytes(line) for line in bytes(data).splitlines()]
        return _core.hash_lines(data, self._keys.seed)

    def update(self, *iterables: Keys, nulls: Nulls = "raise") -> None:
        for keys in iterables:
            self.add_many(keys, nulls=nulls)

    # ---- keys, life and TTL ------------------------------------------------------------

    def _all_keys(self) -> list[str]:
        return [f"{self._key}:meta", *data_keys(self._keys)]

    def _each(self, command: bytes, *args: Any) -> list[Any]:
        """command on every key of the filter (with EXISTS beside it: a key
        that is gone raises MissingKeyError)."""
        jobs = [j for k in self._all_keys() for j in (Job(k.encode(), b"EXISTS", (k,)), Job(k.encode(), command, (k,), args))]
        replies = self._sender.each(jobs)
        for k, there in zip(self._all_keys(), replies[::2]):
            if not int(there):
                raise gone(k, self._what, self._policy)
        return replies[1::2]

    def expire(self, seconds: float) -> None:
        """Give every key of the filter the same time to live: after it, the
        filter is gone (until then it answers as before)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < 2**40:
            raise ValueError(f"seconds must be a positive number, got {seconds!r}")
        self._each(b"PEXPIRE", max(1, round(seconds * 1000)))

    def persist(self) -> None:
        """Remove the time to live of every key of the filter."""
        self._each(b"PERSIST")

    def ttl(self) -> Optional[float]:
        """Seconds until the first key of the filter expires, or None if none will."""
        timed = [int(t) for t in self._each(b"PTTL") if int(t) >= 0]
        return min(timed) / 1000 if timed else None

    def clear(self) -> None:
        """Forget every key (each value zeroed in place, its TTL kept)."""
        self._refuse_stage("clear")
        if self._kind == "bf":
            from ._bf import CREATE

            self._sender.each([Job(self._keys.bf.encode(), b"DEL", (self._keys.bf,))])  # type: ignore[union-attr]
            self._sender.script(CREATE, [self._keys.bf], [self._error_rate, self._capacity])
            return
        k = self._keys
        self._sender.each([Job(s.encode(), _CLEAR_SHARD, (s, c), (n,))
                                for s, c, n in zip(k.shards, k.counts, k.nbytes)])
        self._counts.clear()

    def delete(self) -> None:
        """Remove the filter from Redis entirely (its meta last)."""
        self._sender.each([Job(k.encode(), b"DEL", (k,)) for k in data_keys(self._keys)])
        self._sender.call(f"{self._key}:meta", b"DEL", f"{self._key}:meta")

    @classmethod
    def drop(cls, redis: Any, key: str) -> int:
        """Delete every key of the filter at `key`, whatever state it is in
        (its meta gone, a shard evicted): the way to start over after
        MissingKeyError. Returns how many keys were deleted."""
        from ._meta import key_patterns
        from ._stages import delete_matching

        return delete_matching(client_of(redis), key_patterns(key))

    # ---- facts ----------------------------------------------------------------------

    def _shard_values(self, command: bytes, then: Sequence[Job] = ()) -> list[Any]:
        """command on each shard, then its STRLEN (a shard that is gone
        raises MissingKeyError instead of reading as zeros; nothing makes a
        vanished shard anew, so one present after the read was during it);
        then the replies of `then`, sent behind them on the same connection
        (each node's in order)."""
        k = self._keys
        reads = [j for s in k.shards for j in (Job(s.encode(), command, (s,)), Job(s.encode(), b"STRLEN", (s,)))]
        replies = self._sender.each([*reads, *then])
        for shard, size, length in zip(k.shards, k.nbytes, replies[1 : len(reads) : 2]):
            if int(length) != size:
                raise gone(shard, self._what, self._policy, "is gone" if not int(length) else "has the wrong size")
        return replies[: len(reads) : 2] + replies[len(reads) :]

    def _bits_then(self, counts: Sequence[str]) -> tuple[bytes, list[int]]:
        """The shards' bytes, and the counts read after them in the same
        round: an add sets its bits and its count in one step, so a count
        read after the bits is never lower than what they hold (read before,
        the keys added in between were in the bits and not in the count)."""
        values = self._shard_values(b"GET", [Job(c.encode(), b"GET", (c,)) for c in counts])
        n = len(self._keys.shards)
        for name, c in zip(counts, values[n:]):
            if c is None:
                raise gone(name, self._what, self._policy)
        return b"".join(values[:n]), [int(c) for c in values[n:]]

    def _need_bits(self, what: str) -> None:
        if self._kind == "bf":
            raise ValueError(f"backend 'bf' keeps RedisBloom's own data: {what} is not known")

    @property
    def bits_set(self) -> int:
        """BITCOUNT over all shards (not known for backend 'bf')."""
        self._need_bits("bits_set")
        return int(sum(self._shard_values(b"BITCOUNT")))

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits that are 1 (for backend 'bf', from BF.CARD)."""
        if self._kind == "bf":
            return 1.0 - math.exp(-self.approx_count * self.num_hashes / self.num_bits)
        return self.bits_set / self.num_bits

    @property
    def nbytes(self) -> int:
        """Bytes of bits the filter takes in Redis."""
        if self._kind == "bf":
            return int(self._sender.call(self._keys.bf, b"MEMORY", b"USAGE", self._keys.bf) or 0)
        return sum(self._keys.nbytes)

    @property
    def approx_count(self) -> float:
        """Distinct keys estimated from the bits set (BF.CARD for backend 'bf')."""
        if self._kind == "bf":
            return float(self._sender.call(self._keys.bf, b"BF.CARD", self._keys.bf))
        return _core.estimate_count(self.bits_set, self.num_bits, self.num_hashes, self.layout)

    @property
    def insert_count(self) -> int:
        """Adds that found their key new, over every process (the shards'
        counts; not kept for backend 'bf' or a chain's stage: -1)."""
        if not self._keys.counts:
            return -1
        counts = self._sender.each([Job(c.encode(), b"GET", (c,)) for c in self._keys.counts])
        return sum(int(c or 0) for c in counts)

    @property
    def expected_fp_rate(self) -> float:
        n = self.approx_count
        return 1.0 if math.isinf(n) else _core.false_positive_rate(n, self.num_bits, self.num_hashes, self.layout)

    # ---- interop with local filters (_travel) ------------------------------------------

    @classmethod
    def from_filter(cls, bf: BloomFilter, redis: Any, key: str, *, shard_bits: int = DEFAULT_SHARD_BITS,
                    backend: str = "auto", retries: int = DEFAULT_RETRIES,
                    answer_ttl_ms: Optional[int] = None) -> RedisBloomFilter:
        """Upload a local BloomFilter (made with a capacity and error_rate) to a
        new Redis filter at key; answers are identical afterwards."""
        from ._travel import upload

        return upload(cls, bf, client_of(redis), key, shard_bits=shard_bits, backend=backend, retries=retries,
                      answer_ttl_ms=answer_ttl_ms)

    def to_filter(self) -> BloomFilter:
        """Download into a local BloomFilter with identical answers."""
        if self._kind == "bf":
            raise ValueError("backend 'bf' keeps RedisBloom's own data: it has no bloomline bits to download")
        bits, counts = self._bits_then(self._keys.counts)
        return self._local(bits, sum(counts))

    def _local(self, bits: bytes, count: int) -> BloomFilter:
        return BloomFilter.from_buffer(bits, self.num_bits, self.num_hashes, layout=self.layout, seed=self.seed,
                                       capacity=self._capacity, error_rate=self._error_rate, insert_count=count)

    # ---- what it is ---------------------------------------------------------------------

    @property
    def backend(self) -> str:
        """Which backend runs: 'module', 'plain' or 'bf'."""
        return self._backend.name

    @property
    def key(self) -> str:
        return self._key

    @property
    def num_bits(self) -> int:
        return self._keys.num_bits

    @property
    def num_hashes(self) -> int:
        return self._keys.num_hashes

    @property
    def layout(self) -> Layout:
        return self._keys.layout

    @property
    def seed(self) -> int:
        return self._keys.seed

    @property
    def shards(self) -> int:
        return max(1, len(self._keys.shards))

    @property
    def shard_bits(self) -> int:
        return self._keys.shard_bits

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def error_rate(self) -> float:
        return self._error_rate

    @property
    def wait_replicas(self) -> int:
        """Replicas each add waits for (WAIT; 0: none)."""
        return self._sender.wait_replicas

    @property
    def retry_window_s(self) -> Optional[float]:
        """The longest a batch's tries may take, in seconds: (retries + 1)
        times the client's socket timeout, plus the pauses between tries;
        None for a client without a socket timeout."""
        return self._sender.window_s

    @property
    def answer_ttl_ms(self) -> int:
        """How long a batch's answer is kept for a re-send (see the class doc)."""
        return self._sender.answer_ttl_ms

    def shard_keys(self) -> list[str]:
        return list(self._keys.shards)

    def _repr_html_(self) -> str:
        from ..display import filter_html

        return filter_html(self)

    def __repr__(self) -> str:
        return (f"<RedisBloomFilter key={self._key!r} backend='{self.backend}' capacity={self._capacity} "
                f"error_rate={self._error_rate} layout='{self.layout}' num_bits={self.num_bits} "
                f"num_hashes={self.num_hashes} shards={self.shards} seed={self.seed}>")
