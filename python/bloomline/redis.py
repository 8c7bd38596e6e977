"""RedisBloomFilter: one Bloom filter shared by many processes through Redis.

Positions are computed here, in C++ (``bloomline.key_positions``), exactly as
a local ``BloomFilter`` of the same geometry computes them, and Redis only
stores bits. With the blocked layout all k bits of a key lie in one 64-byte
block of one Redis string, so one ``BITFIELD key SET u1 o1 1 SET u1 o2 1 ...``
per key tests and sets them atomically: ``add`` reports a key as new exactly
once, however many processes add it at the same moment. A batch is one
pipeline: one round trip.

Layout in Redis (``key`` is the name you give):
  ``{key}:meta``      a hash with the filter's parameters (created once)
  ``{key}:bits:{i}``  shard i: a string of at most ``shard_bits`` bits

Shards are whole runs of 512-bit blocks, far under Redis's 512 MB string
limit (``2**31`` bits, 256 MB, by default), so filters of more than ``2**32``
bits work; their names hash to different Redis Cluster slots, so a cluster
spreads them over its masters. The standard layout spreads a key's bits over
the whole array and so is kept in one shard (at most ``2**32`` bits).

Bit numbering: Redis numbers bits from the most significant bit of each byte
(SETBIT offset 0 is 0x80 of byte 0); bloomline from the least significant.
Bit i here is Redis offset ``8 * (i // 8) + 7 - i % 8``, which makes the
Redis strings byte for byte the payload of a local filter:
``from_filter``/``to_filter`` copy bytes unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union, cast

import numpy as np
import numpy.typing as npt

from . import _core, optimal_params
from ._core import BloomFilter

if TYPE_CHECKING:
    from ._core import Layout

try:
    import redis as _redis
except ImportError as exc:  # pragma: no cover - exercised only without redis-py
    raise ImportError("bloomline.redis needs redis-py: pip install 'bloomline[redis]'") from exc

__all__ = ["RedisBloomFilter"]

Keys = Union[npt.NDArray[Any], Iterable[Any]]

FORMAT_VERSION = 1
DEFAULT_SHARD_BITS = 2**31  # 256 MB: far under Redis's 512 MB string limit
_REDIS_MAX_BITS = 2**32


def _redis_offsets(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """bloomline bit numbers -> Redis offsets (MSB-first within each byte)."""
    return (bits & ~np.uint64(7)) + (np.uint64(7) - (bits & np.uint64(7)))


class RedisBloomFilter:
    """A Bloom filter stored in Redis, safe to share between processes.

    ``RedisBloomFilter(redis, key, capacity, error_rate)`` creates the filter
    (or attaches to it if it exists with the same parameters);
    ``RedisBloomFilter(redis, key)`` attaches to an existing one. ``redis`` is
    a redis-py client (``redis.Redis`` or ``redis.cluster.RedisCluster``) or a
    URL. Attaching with parameters that differ from the stored ones raises
    ``ValueError`` naming the field.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        redis: Any,
        key: str,
        capacity: int | None = None,
        error_rate: float | None = None,
        *,
        layout: Layout = "blocked",
        seed: int = 0,
        shards: int | None = None,
        shard_bits: int = DEFAULT_SHARD_BITS,
    ) -> None:
        if isinstance(redis, str):
            redis = _redis.Redis.from_url(redis)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        self._r = redis
        self._key = key
        self._meta_key = f"{key}:meta"
        stored = self._read_meta()
        if stored is None:
            if capacity is None:
                raise ValueError(f"no filter at key {key!r}: pass capacity (and error_rate) to create one")
            meta = self._plan(capacity, 0.01 if error_rate is None else error_rate, layout, seed, shards, shard_bits)
            # Two processes may create at once: HSETNX on one field decides,
            # and everyone then compares against what was stored.
            if self._r.hsetnx(self._meta_key, "version", FORMAT_VERSION):
                self._r.hset(self._meta_key, mapping={k: str(v) for k, v in meta.items()})
            stored = self._wait_meta()
            self._check(stored, meta)
        else:
            given: dict[str, Any] = {}
            if capacity is not None:
                given["capacity"] = capacity
            if error_rate is not None:
                given["error_rate"] = error_rate
            if capacity is not None or error_rate is not None:
                given.update(layout=layout, seed=seed)
                if shards is not None:
                    given["shards"] = shards
            self._check(stored, given)
        self._meta = stored
        self._layout = cast("Layout", str(stored["layout"]))
        self._num_bits = int(stored["num_bits"])
        self._num_hashes = int(stored["num_hashes"])
        self._seed = int(stored["seed"])
        self._shards = int(stored["shards"])
        self._shard_bits = int(stored["shard_bits"])
        self._capacity = int(stored["capacity"])
        self._error_rate = float(stored["error_rate"])

    # ---- metadata -------------------------------------------------------------

    @staticmethod
    def _plan(capacity: int, error_rate: float, layout: Layout, seed: int, shards: int | None, shard_bits: int) -> dict[str, Any]:
        params = optimal_params(capacity, error_rate, layout)  # checks capacity, error_rate, layout
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")
        if not isinstance(shard_bits, int) or shard_bits % 512 or not 512 <= shard_bits <= _REDIS_MAX_BITS:
            raise ValueError(f"shard_bits must be a multiple of 512 in [512, 2**32], got {shard_bits!r}")
        num_bits = params.num_bits
        if layout == "standard":
            if math.ceil(num_bits / 512) * 512 > _REDIS_MAX_BITS:
                raise ValueError(
                    f"layout 'standard' keeps every bit in one Redis string, at most 2**32 bits; this filter needs "
                    f"{num_bits} (use layout 'blocked', which shards)"
                )
            if shards not in (None, 1):
                raise ValueError(f"layout 'standard' uses one shard, got shards={shards}")
            return dict(layout=layout, num_bits=num_bits, num_hashes=params.num_hashes, seed=seed, shards=1,
                        shard_bits=math.ceil(num_bits / 512) * 512, capacity=capacity, error_rate=error_rate)
        blocks = num_bits // 512
        if shards is None:
            shards = max(1, math.ceil(num_bits / shard_bits))
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= blocks:
            raise ValueError(f"shards must be an int in [1, {blocks}], got {shards!r}")
        per_shard_blocks = math.ceil(blocks / shards)
        if per_shard_blocks * 512 > _REDIS_MAX_BITS:
            raise ValueError(f"shards={shards} puts {per_shard_blocks * 512} bits in a shard, over Redis's 2**32")
        return dict(layout=layout, num_bits=num_bits, num_hashes=params.num_hashes, seed=seed, shards=shards,
                    shard_bits=per_shard_blocks * 512, capacity=capacity, error_rate=error_rate)

    def _read_meta(self) -> dict[str, str] | None:
        raw = self._r.hgetall(self._meta_key)
        if not raw:
            return None
        meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}
        if meta.get("version") != str(FORMAT_VERSION):
            raise ValueError(f"{self._meta_key!r} holds version {meta.get('version')!r}, this bloomline reads {FORMAT_VERSION}")
        return meta

    def _wait_meta(self) -> dict[str, str]:
        # The creator writes version first, then the rest in one HSET.
        for _ in range(1000):
            meta = self._read_meta()
            if meta is not None and "num_bits" in meta:
                return meta
            time.sleep(0.001)
        raise ValueError(f"{self._meta_key!r} is incomplete (a creator died mid-way?); delete it and create again")

    def _check(self, stored: dict[str, str], wanted: dict[str, Any]) -> None:
        for field in ("layout", "capacity", "error_rate", "seed", "shards", "num_bits", "num_hashes", "shard_bits"):
            if field not in wanted:
                continue
            have, want = stored[field], wanted[field]
            same = float(have) == float(want) if field == "error_rate" else str(have) == str(want)
            if not same:
                raise ValueError(f"the filter at key {self._key!r} differs in {field} (stored {have} != given {want})")

    # ---- positions -----------------------------------------------------------------

    def _shard_key(self, i: int) -> str:
        return f"{self._key}:bits:{i}"

    def _locate(self, keys: Keys) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """Per key: its shard, and its k Redis offsets inside that shard."""
        pos = _core.key_positions(keys, self._num_bits, self._num_hashes, layout=self._layout, seed=self._seed)
        shard = (pos[:, 0] // np.uint64(self._shard_bits)).astype(np.int64)
        local = pos - (shard.astype(np.uint64) * np.uint64(self._shard_bits))[:, None]
        return shard, _redis_offsets(local)

    def _run(self, keys: Keys, command: str) -> list[Any]:
        shard, offsets = self._locate(keys)
        op = ("SET", "u1", None, 1) if command == "BITFIELD" else ("GET", "u1", None)
        pipe = self._r.pipeline(transaction=False)
        for s, offs in zip(shard.tolist(), offsets.tolist()):
            args: list[Any] = []
            for o in offs:
                args.extend((op[0], "u1", o) + ((1,) if command == "BITFIELD" else ()))
            pipe.execute_command(command, self._shard_key(s), *args)
        # A failure anywhere raises (redis.ConnectionError, ...): no partial
        # result is returned as if it were complete.
        return list(pipe.execute())

    # ---- the API ------------------------------------------------------------------

    def add(self, key: Any) -> bool:
        """Add a key; True if it was new (some bit was 0), atomically."""
        return bool(self.add_many([key])[0])

    def __contains__(self, key: object) -> bool:
        return bool(self.contains_many([key])[0])

    def add_many(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """Add a batch in one round trip; True where the key was new. Each key
        is tested and set by one atomic BITFIELD, so among processes adding
        the same key at once exactly one sees it as new."""
        replies = self._run(keys, "BITFIELD")
        return np.fromiter((0 in r for r in replies), dtype=bool, count=len(replies))

    def contains_many(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """True where the key may be present (BITFIELD_RO, one round trip)."""
        replies = self._run(keys, "BITFIELD_RO")
        return np.fromiter((0 not in r for r in replies), dtype=bool, count=len(replies))

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it."""
        return self.add_many(_core.hash_lines(data, self._seed))

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text."""
        return self.contains_many(_core.hash_lines(data, self._seed))

    def update(self, *iterables: Keys) -> None:
        for keys in iterables:
            self.add_many(keys)

    @property
    def bits_set(self) -> int:
        """BITCOUNT over all shards."""
        pipe = self._r.pipeline(transaction=False)
        for i in range(self._shards):
            pipe.bitcount(self._shard_key(i))
        return int(sum(pipe.execute()))

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits that are 1 (BITCOUNT over all shards)."""
        return self.bits_set / self._num_bits

    @property
    def nbytes(self) -> int:
        """Bytes of bits the filter takes in Redis when full-sized."""
        return math.ceil(self._num_bits / 512) * 64

    @property
    def approx_count(self) -> float:
        return _core.estimate_count(self.bits_set, self._num_bits, self._num_hashes, self._layout)

    @property
    def expected_fp_rate(self) -> float:
        n = self.approx_count
        return 1.0 if math.isinf(n) else _core.false_positive_rate(n, self._num_bits, self._num_hashes, self._layout)

    def clear(self) -> None:
        """Forget every key (delete the bit shards, keep the parameters)."""
        for i in range(self._shards):
            self._r.delete(self._shard_key(i))

    def delete(self) -> None:
        """Remove the filter from Redis entirely (shards and parameters)."""
        self.clear()
        self._r.delete(self._meta_key)

    # ---- interop with local filters ---------------------------------------------------

    @classmethod
    def from_filter(cls, bf: BloomFilter, redis: Any, key: str, *, shard_bits: int = DEFAULT_SHARD_BITS) -> RedisBloomFilter:
        """Upload a local BloomFilter (made with a capacity and error_rate) to a
        new Redis filter at key; answers are identical afterwards."""
        if bf.capacity is None or bf.error_rate is None:
            raise ValueError("from_filter needs a filter built with a capacity and error_rate (not from_params)")
        if isinstance(redis, str):
            redis = _redis.Redis.from_url(redis)
        if redis.exists(f"{key}:meta"):
            raise ValueError(f"a filter already exists at key {key!r}; delete() it first")
        rf = cls(redis, key, bf.capacity, bf.error_rate, layout=bf.layout, seed=bf.seed, shard_bits=shard_bits)
        if (rf.num_bits, rf.num_hashes) != (bf.num_bits, bf.num_hashes):  # pragma: no cover - same sizing math
            raise ValueError("the Redis filter's geometry differs from the local one")
        data = memoryview(bf)
        shard_bytes = rf._shard_bits // 8
        chunk = 64 * 2**20  # SETRANGE in 64 MB pieces: no single huge request
        for i in range(rf._shards):
            part = data[i * shard_bytes : (i + 1) * shard_bytes]
            for start in range(0, len(part), chunk):
                piece = bytes(part[start : start + chunk])
                if piece.strip(b"\x00"):
                    redis.setrange(rf._shard_key(i), start, piece)
        return rf

    def to_filter(self) -> BloomFilter:
        """Download into a local BloomFilter with identical answers."""
        nbytes = math.ceil(self._num_bits / 512) * 64
        shard_bytes = self._shard_bits // 8
        parts = []
        for i in range(self._shards):
            data = self._r.get(self._shard_key(i)) or b""
            want = min(shard_bytes, nbytes - i * shard_bytes)
            parts.append(data[:want] + bytes(want - len(data[:want])))
        payload = b"".join(parts)
        return BloomFilter.from_buffer(
            payload, self._num_bits, self._num_hashes, layout=self._layout, seed=self._seed,
            capacity=self._capacity, error_rate=self._error_rate,
        )

    # ---- facts ----------------------------------------------------------------------

    @property
    def key(self) -> str:
        return self._key

    @property
    def num_bits(self) -> int:
        return self._num_bits

    @property
    def num_hashes(self) -> int:
        return self._num_hashes

    @property
    def layout(self) -> Layout:
        return self._layout

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def shards(self) -> int:
        return self._shards

    @property
    def shard_bits(self) -> int:
        return self._shard_bits

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def error_rate(self) -> float:
        return self._error_rate

    def shard_keys(self) -> list[str]:
        return [self._shard_key(i) for i in range(self._shards)]

    def _repr_html_(self) -> str:
        from .display import filter_html

        return filter_html(self)

    def __repr__(self) -> str:
        return (
            f"<RedisBloomFilter key={self._key!r} capacity={self._capacity} error_rate={self._error_rate} "
            f"layout='{self._layout}' num_bits={self._num_bits} num_hashes={self._num_hashes} "
            f"shards={self._shards} seed={self._seed}>"
        )
