"""RedisBloomFilter: one Bloom filter shared by many processes through Redis.

Three backends, the same answers:

``"module"``
    bloomline's own Redis module (``redis-server --loadmodule $(bloomline
    redis-module)``): each batch is one ``BLOOMLINE.ADD`` per shard, whose
    one bytes argument holds the positions the client computed
    (docs/FORMAT.md, "Positions"), tested and set in the string's memory.
``"plain"``
    Any Redis, no module: adds are one script call per shard, its arguments
    the batch's ``BITFIELD SET u1`` operations encoded by the core;
    lookups one ``BITFIELD_RO`` per shard.
``"bf"``
    The server's own Bloom commands (RedisBloom, Redis 8, valkey-bloom):
    ``BF.RESERVE`` with ``EXPANSION`` (it grows), ``BF.MADD``, ``BF.MEXISTS``.

``backend="auto"`` (the default) picks the module when the server has it,
else plain. ``f.backend`` says which runs.

The "module" and "plain" backends keep the bits in plain Redis strings,
byte for byte a local filter's payload (``from_filter``/``to_filter`` copy
bytes unchanged, and either backend reads what the other wrote). The
positions come from the core, exactly as a local ``BloomFilter`` of the same
geometry computes them.

Layout in Redis (``key`` is the name you give):
  ``{key}:meta``              a hash with the filter's parameters
  ``{key}:bits:{i}``          shard i: a string of ``shard_bits`` bits, made
                              at its full size (the last may be shorter)
  ``{shard}:ans:{batch id}``  a batch's answer, kept for ``answer_ttl_ms``
  ``{key}:bf``                the RedisBloom filter (backend "bf")

**New, exactly once.** Each key of an add is tested and set atomically, so
among processes adding the same key at once exactly one sees it new. A
batch carries a random id; its answer is kept on the server for a while, and
a batch sent again after a dropped connection (by redis-py's retries or
ours) gets that answer back instead of being added again: no key is ever
reported "seen" to the caller whose add set it. Retries are bounded
(``retries``, with backoff); past them the call raises redis's
``ConnectionError``, and the batch may or may not have been applied.

**Cluster.** Shards are whole runs of 512-bit blocks under Redis's 512 MB
string limit, so filters of more than ``2**32`` bits work; shard names hash
to different slots, so a cluster spreads them over its masters. A batch's
answer key shares its shard's slot (a hash tag), and each shard's part of
a batch is atomic. The standard layout spreads a key's bits over the whole
array and so is kept in one shard (at most ``2**32`` bits).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Optional, Union, cast

import numpy as np
import numpy.typing as npt

from . import _core, optimal_params
from ._core import BloomFilter
from .scalable import StaleChain, _in_place

if TYPE_CHECKING:
    from ._core import Keys, Layout, Nulls

try:
    import redis as _redis
except ImportError as exc:  # pragma: no cover - exercised only without redis-py
    raise ImportError("bloomline.redis needs redis-py: pip install 'bloomline[redis]'") from exc

__all__ = ["RedisBloomFilter", "RedisStages", "StaleChain", "module_path"]


FORMAT_VERSION = 1


def _no_script(e: Exception) -> bool:
    """Did the server not know a script (NOSCRIPT)? redis-py turns that
    reply into NoScriptError, whose text no longer says NOSCRIPT."""
    return isinstance(e, _redis.exceptions.NoScriptError) or str(e).startswith("NOSCRIPT")

DEFAULT_SHARD_BITS = 2**31  # 256 MB: far under Redis's 512 MB string limit
_REDIS_MAX_BITS = 2**32
BACKENDS = ("auto", "module", "plain", "bf")


def _lua_apply_bits(first_arg: int) -> str:
    """Lua shared by the plain scripts: BITFIELD over ARGV[first_arg..] (4
    arguments a bit, k = ARGV[3] bits a key) in chunks of whole keys, the
    old bits concatenated into `answer`."""
    return f"""local k = tonumber(ARGV[3])
local per = 4 * k
local step = per * math.max(1, math.floor(7000 / per))
local parts = {{}}
for first = {first_arg}, #ARGV, step do
  parts[#parts + 1] = table.concat(redis.call('BITFIELD', KEYS[1],
                                              unpack(ARGV, first, math.min(first + step - 1, #ARGV))))
end
local answer = table.concat(parts)
"""


# Adds on plain Redis: the batch's BITFIELD SET operations, run by this
# script so that the answer is kept for a repeat of the batch. The answer is
# the old value of every bit, one character each ("0"/"1", k per key): the
# client finds the new keys (any "0") itself, so the script has no loop per
# key. Lua's stack takes a few thousand values per call, so BITFIELD runs on
# a chunk of whole keys' operations at a time.
#   KEYS: shard, answer key
#   ARGV: ttl ms, keys in the batch, k, then 4 arguments per bit
_PLAIN_ADD = """
local done = redis.call('GET', KEYS[2])
if done then return done end
""" + _lua_apply_bits(4) + """redis.call('SET', KEYS[2], answer, 'PX', ARGV[1])
return answer
"""

# The same for a stage of a scalable chain kept in Redis (RedisStages): the
# add is refused ("STALE n") unless the chain has the length the client
# thinks, and its count of new keys goes to the stage's counter.
#   KEYS: shard, answer key, the chain's stage count, the stage's counter
#   ARGV: ttl ms, keys in the batch, k, expected stage count, then the bits
_PLAIN_CADD = """
local done = redis.call('GET', KEYS[2])
if done then return done end
local have = redis.call('GET', KEYS[3]) or '0'
if have ~= ARGV[4] then return redis.error_reply('STALE ' .. have) end
""" + _lua_apply_bits(5) + """local news = 0
for i = 1, #answer, k do
  if string.find(string.sub(answer, i, i + k - 1), '0', 1, true) then news = news + 1 end
end
redis.call('SET', KEYS[2], answer, 'PX', ARGV[1])
redis.call('INCRBY', KEYS[4], news)
return answer
"""

# Adds on RedisBloom, kept for a repeat of the batch like the others.
#   KEYS: the BF key, answer key    ARGV: ttl ms, then the items
_BF_ADD = """
local done = redis.call('GET', KEYS[2])
if done then return done end
local parts = {}
for first = 2, #ARGV, 5000 do
  parts[#parts + 1] = table.concat(redis.call('BF.MADD', KEYS[1], unpack(ARGV, first, math.min(first + 4999, #ARGV))))
end
local answer = table.concat(parts)
redis.call('SET', KEYS[2], answer, 'PX', ARGV[1])
return answer
"""


def module_path() -> str:
    """The path of bloomline's Redis module, for ``redis-server --loadmodule``."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis_module.so")
    if not os.path.exists(path):  # pragma: no cover - a broken install
        raise FileNotFoundError(f"bloomline's Redis module is not installed at {path}")
    if not os.access(path, os.X_OK):  # pragma: no cover - a broken install
        # redis-server 7 refuses to load a module file it may not execute.
        raise PermissionError(f"bloomline's Redis module at {path} is not executable; run: chmod a+x {path}")
    return path


def _resp(*args: bytes) -> bytes:
    """The RESP encoding of a command's arguments."""
    return b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


_hiredis_pack: Optional[Callable[[tuple[Any, ...]], Any]]
try:  # hiredis packs a command's many arguments in C
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - the redis extra brings hiredis
    _hiredis_pack = None


def _pack(args: list[Any]) -> bytes:
    """A whole command (str arguments as UTF-8)."""
    if _hiredis_pack is not None:
        return bytes(_hiredis_pack(tuple(args)))
    items = [a.encode() if isinstance(a, str) else a for a in args]
    return b"*%d\r\n" % len(items) + _resp(*items)


def _b(v: Any) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


class _Sender:
    """Sends a batch's commands, one per shard, and reads their replies:
    each node's commands written together and read together (one round trip
    per node), retried on a dropped connection (the same commands again, so
    the same batch ids)."""

    def __init__(self, client: Any, retries: int) -> None:
        self.client = client
        self.cluster = hasattr(client, "get_node_from_key")
        self.retries = retries

    def _pool(self, key: bytes) -> Any:
        if self.cluster:
            return self.client.get_node_from_key(key).redis_connection.connection_pool
        return self.client.connection_pool

    def run(self, jobs: list[tuple[bytes, bytes]]) -> list[Any]:
        """jobs: (routing key, packed command); the replies in job order.
        An error reply raises redis's ResponseError."""
        by_pool: dict[int, tuple[Any, list[int]]] = {}
        for i, (key, _) in enumerate(jobs):
            pool = self._pool(key)
            by_pool.setdefault(id(pool), (pool, []))[1].append(i)
        replies: list[Any] = [None] * len(jobs)
        for pool, idx in by_pool.values():
            payload = b"".join(jobs[i][1] for i in idx)
            for i, reply in zip(idx, self._exchange(pool, payload, len(idx))):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def _exchange(self, pool: Any, payload: bytes, count: int) -> list[Any]:
        delay = 0.05
        for attempt in range(self.retries + 1):
            conn = pool.get_connection()
            try:
                conn.send_packed_command([payload])
                out = []
                for _ in range(count):
                    try:
                        out.append(conn.read_response())
                    except _redis.ResponseError as e:
                        out.append(e)
                return out
            except (_redis.ConnectionError, _redis.TimeoutError):
                conn.disconnect()
                if attempt == self.retries:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                pool.release(conn)
        raise AssertionError("unreachable")  # pragma: no cover


class RedisBloomFilter:
    """A Bloom filter stored in Redis, safe to share between processes.

    ``RedisBloomFilter(redis, key, capacity, error_rate)`` creates the filter
    (or attaches to it if it exists with the same parameters);
    ``RedisBloomFilter(redis, key)`` attaches to an existing one. ``redis`` is
    a redis-py client (``redis.Redis`` or ``redis.cluster.RedisCluster``) or a
    URL. Attaching with a ``layout``, ``seed``, capacity or error rate that
    differs from the stored one raises ``ValueError`` naming the field.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        redis: Any,
        key: str,
        capacity: int | None = None,
        error_rate: float | None = None,
        *,
        layout: Layout | None = None,
        seed: int | None = None,
        shards: int | None = None,
        shard_bits: int = DEFAULT_SHARD_BITS,
        backend: str = "auto",
        retries: int = 8,
        answer_ttl_ms: int = 120_000,
    ) -> None:
        if isinstance(redis, str):
            redis = _redis.Redis.from_url(redis)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if isinstance(answer_ttl_ms, bool) or not isinstance(answer_ttl_ms, int) or answer_ttl_ms < 1000:
            raise ValueError(f"answer_ttl_ms must be an int >= 1000, got {answer_ttl_ms!r}")
        self._r = redis
        self._key = key
        self._meta_key = f"{key}:meta"
        self._sender = _Sender(redis, retries)
        self._ttl = answer_ttl_ms
        stored = self._read_meta()
        if stored is not None and "num_bits" not in stored:
            stored = self._wait_meta()  # another process is creating it right now
        if stored is None:
            if capacity is None:
                raise ValueError(f"no filter at key {key!r}: pass capacity (and error_rate) to create one")
            kind = "bf" if backend == "bf" else "bits"
            meta = self._plan(capacity, 0.01 if error_rate is None else error_rate, layout or "blocked",
                              0 if seed is None else seed, shards, shard_bits, kind)
            # Two processes may create at once: HSETNX on one field decides,
            # and everyone then compares against what was stored.
            if self._r.hsetnx(self._meta_key, "version", FORMAT_VERSION):
                self._create(meta)
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
                given.update(layout=layout or "blocked", seed=0 if seed is None else seed)
                if shards is not None:
                    given["shards"] = shards
            if layout is not None:
                given["layout"] = layout
            if seed is not None:
                given["seed"] = seed
            self._check(stored, given)
        self._meta = stored
        self._kind = stored.get("kind", "bits")
        self._layout = cast("Layout", str(stored["layout"]))
        self._num_bits = int(stored["num_bits"])
        self._num_hashes = int(stored["num_hashes"])
        self._seed = int(stored["seed"])
        self._shards = int(stored["shards"])
        self._shard_bits = int(stored["shard_bits"])
        self._capacity = int(stored["capacity"])
        self._error_rate = float(stored["error_rate"])
        self._backend = self._choose_backend(backend)
        self._plain_sha = self._r.script_load(_PLAIN_ADD) if self._backend == "plain" else None
        self._bf_sha = self._r.script_load(_BF_ADD) if self._backend == "bf" else None
        self._plain_cadd_sha: str | None = None

    # ---- metadata -------------------------------------------------------------

    @staticmethod
    def _plan(capacity: int, error_rate: float, layout: Layout, seed: int, shards: int | None, shard_bits: int,
              kind: str = "bits") -> dict[str, Any]:
        params = optimal_params(capacity, error_rate, layout)  # checks capacity, error_rate, layout
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")
        if not isinstance(shard_bits, int) or shard_bits % 512 or not 512 <= shard_bits <= _REDIS_MAX_BITS:
            raise ValueError(f"shard_bits must be a multiple of 512 in [512, 2**32], got {shard_bits!r}")
        num_bits = params.num_bits
        base = dict(kind=kind, layout=layout, num_bits=num_bits, num_hashes=params.num_hashes, seed=seed,
                    capacity=capacity, error_rate=error_rate)
        if kind == "bf":
            return dict(base, shards=1, shard_bits=0)
        if layout == "standard":
            if math.ceil(num_bits / 512) * 512 > _REDIS_MAX_BITS:
                raise ValueError(
                    f"layout 'standard' keeps every bit in one Redis string, at most 2**32 bits; this filter needs "
                    f"{num_bits} (use layout 'blocked', which shards)"
                )
            if shards not in (None, 1):
                raise ValueError(f"layout 'standard' uses one shard, got shards={shards}")
            return dict(base, shards=1, shard_bits=math.ceil(num_bits / 512) * 512)
        blocks = num_bits // 512
        if shards is None:
            shards = max(1, math.ceil(num_bits / shard_bits))
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= blocks:
            raise ValueError(f"shards must be an int in [1, {blocks}], got {shards!r}")
        per_shard_blocks = math.ceil(blocks / shards)
        if per_shard_blocks * 512 > _REDIS_MAX_BITS:
            raise ValueError(f"shards={shards} puts {per_shard_blocks * 512} bits in a shard, over Redis's 2**32")
        return dict(base, shards=shards, shard_bits=per_shard_blocks * 512)

    def _create(self, meta: dict[str, Any]) -> None:
        """Make the filter's values at their full size, over whatever stale
        values an earlier filter of this name left (its meta gone)."""
        if meta["kind"] == "bf":
            self._r.delete(f"{self._key}:bf")
            self._r.execute_command("BF.RESERVE", f"{self._key}:bf", meta["error_rate"], meta["capacity"],
                                    "EXPANSION", 2)
            return
        nbytes = math.ceil(meta["num_bits"] / 512) * 64
        shard_bytes = meta["shard_bits"] // 8
        for i in range(meta["shards"]):
            size = min(shard_bytes, nbytes - i * shard_bytes)
            shard = self._shard_key(i)
            pipe = self._r.pipeline(transaction=True)
            pipe.delete(shard)
            pipe.setrange(shard, size - 1, b"\0")  # allocated once, zeroed
            pipe.execute()

    def _read_meta(self) -> dict[str, str] | None:
        raw = self._r.hgetall(self._meta_key)
        if not raw:
            return None
        meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in raw.items()}
        if meta.get("version") != str(FORMAT_VERSION):
            raise ValueError(f"{self._meta_key!r} holds version {meta.get('version')!r}, this bloomline reads "
                             f"{FORMAT_VERSION}")
        return meta

    def _wait_meta(self) -> dict[str, str]:
        # The creator writes version first, then the rest in one HSET.
        for _ in range(2000):
            meta = self._read_meta()
            if meta is not None and "num_bits" in meta:
                return meta
            time.sleep(0.005)
        raise ValueError(f"{self._meta_key!r} is incomplete (a creator died mid-way?); delete it and create again")

    def _check(self, stored: dict[str, str], wanted: dict[str, Any]) -> None:
        for field in ("kind", "layout", "capacity", "error_rate", "seed", "shards", "num_bits", "num_hashes",
                      "shard_bits"):
            if field not in wanted:
                continue
            have, want = stored.get(field, "bits" if field == "kind" else ""), wanted[field]
            same = float(have) == float(want) if field == "error_rate" else str(have) == str(want)
            if not same:
                shown = f"{float(have)!r} != given {want!r}" if field == "error_rate" else f"{have} != given {want}"
                raise ValueError(f"the filter at key {self._key!r} differs in {field} (stored {shown})")

    def _choose_backend(self, backend: str) -> str:
        if self._kind == "bf":
            if backend not in ("auto", "bf"):
                raise ValueError(f"the filter at key {self._key!r} is a server Bloom filter (BF.*): backend must "
                                 f"be 'bf' or 'auto', got {backend!r}")
            return "bf"
        if backend == "bf":
            raise ValueError(f"the filter at key {self._key!r} keeps bloomline's bits: backend 'bf' cannot read it "
                             "(use 'module', 'plain' or 'auto')")
        has_module = self._server_has_module()
        if backend == "module" and not has_module:
            raise ValueError("backend 'module' needs bloomline's module on the server: redis-server --loadmodule "
                             f"{module_path()}")
        return backend if backend != "auto" else ("module" if has_module else "plain")

    def _server_has_module(self) -> bool:
        client = self._r
        if hasattr(client, "get_nodes"):
            client = client.get_nodes()[0].redis_connection
        try:
            mods = client.execute_command("MODULE", "LIST")
        except _redis.ResponseError:  # MODULE LIST refused (ACLs): assume plain Redis
            return False
        for m in mods or []:
            name = m.get(b"name") if isinstance(m, dict) else (m[1] if len(m) > 1 else None)
            if name in (b"bloomline", "bloomline"):
                return True
        return False

    # ---- batches ------------------------------------------------------------------

    def _shard_key(self, i: int) -> str:
        return f"{self._key}:bits:{i}"

    def _geometry(self) -> dict[str, Any]:
        return dict(layout=self._layout, seed=self._seed, shard_bits=self._shard_bits)

    def _answer_key(self, routing: str, batch: str) -> str:
        # In the routing key's slot: its own hash tag if it has one, else
        # the whole name as the tag.
        opened = routing.find("{")
        if opened >= 0 and routing.find("}", opened + 2) > opened:
            return f"{routing}:ans:{batch}"
        return f"{{{routing}}}:ans:{batch}"

    def add_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch (one command per shard, in one round trip per node);
        True where the key was new. Among processes adding the same key at
        once exactly one sees it new, retries included. nulls='skip' leaves
        nulls out (False), as BloomFilter.add_many."""
        if isinstance(keys, Iterator):  # a retry below must see the same keys again
            keys = list(keys)
        try:
            return self._add_many(keys, nulls)
        except _redis.ResponseError as e:
            if not _no_script(e):
                raise
            # A server restarted (or a node new to the cluster) forgot the
            # script: load it again; the batch was not applied anywhere it
            # was missing, and is idempotent where it was.
            self._plain_sha = self._r.script_load(_PLAIN_ADD) if self._backend == "plain" else None
            self._bf_sha = self._r.script_load(_BF_ADD) if self._backend == "bf" else None
            return self._add_many(keys, nulls)

    def _add_many(self, keys: Keys, nulls: Nulls) -> npt.NDArray[np.bool_]:
        batch = os.urandom(12).hex()
        if self._backend == "bf":
            items, valid = self._bf_items(keys, nulls)
            bf_key = f"{self._key}:bf"
            cmd = _pack([b"EVALSHA", _b(self._bf_sha), b"2", bf_key, self._answer_key(bf_key, batch), _b(self._ttl),
                         *items])
            (answer,) = self._sender.run([(bf_key.encode(), cmd)])
            return _in_place(valid, np.frombuffer(answer, dtype=np.uint8) == ord("1"))
        keys, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        if self._backend == "module":
            shards, starts, order, blobs, n = _core.redis_positions(keys, self._num_bits, self._num_hashes,
                                                                    **self._geometry())
            jobs = []
            for s, blob in zip(shards.tolist(), blobs):
                shard = self._shard_key(s)
                args = (b"BLOOMLINE.ADD", shard.encode(), self._answer_key(shard, batch).encode(), _b(self._ttl), blob)
                jobs.append((shard.encode(), b"*5\r\n" + _resp(*args)))
        else:
            shards, starts, order, ops, counts, n = _core.redis_bitfield_ops(
                keys, self._num_bits, self._num_hashes, set=True, **self._geometry())
            jobs = []
            for s, arg_bytes, count, lo, hi in zip(shards.tolist(), ops, counts.tolist(), starts[:-1].tolist(),
                                                   starts[1:].tolist()):
                shard = self._shard_key(s)
                plain = (b"EVALSHA", _b(self._plain_sha), b"2", shard.encode(),
                         self._answer_key(shard, batch).encode(), _b(self._ttl), _b(hi - lo), _b(self._num_hashes))
                jobs.append((shard.encode(), b"*%d\r\n" % (len(plain) + count) + _resp(*plain) + arg_bytes))
        return _in_place(valid, self._scatter(n, order, starts, self._sender.run(jobs)))

    def _chain_add(self, keys: Keys, stages_key: str, expected: int, count_key: str) -> tuple[npt.NDArray[np.bool_], int]:
        """add_many for a stage of a chain (RedisStages): refused with
        StaleChain unless the chain at stages_key has `expected` stages; the
        new keys are counted at count_key. Returns the answers and the
        stage's count after them (read in the same round trip)."""
        if self._backend == "bf":
            raise ValueError("a scalable chain's stages keep bloomline's bits: backend 'bf' grows by itself")
        batch = os.urandom(12).hex()
        jobs = []
        if self._backend == "module":
            shards, starts, order, blobs, n = _core.redis_positions(keys, self._num_bits, self._num_hashes,
                                                                    **self._geometry())
            for s, blob in zip(shards.tolist(), blobs):
                shard = self._shard_key(s)
                args = (b"BLOOMLINE.CADD", shard.encode(), self._answer_key(shard, batch).encode(),
                        stages_key.encode(), count_key.encode(), _b(self._ttl), _b(expected), blob)
                jobs.append((shard.encode(), b"*8\r\n" + _resp(*args)))
        else:
            if self._plain_cadd_sha is None:
                self._plain_cadd_sha = self._r.script_load(_PLAIN_CADD)
            sha = self._plain_cadd_sha
            shards, starts, order, ops, counts, n = _core.redis_bitfield_ops(
                keys, self._num_bits, self._num_hashes, set=True, **self._geometry())
            for s, arg_bytes, count, lo, hi in zip(shards.tolist(), ops, counts.tolist(), starts[:-1].tolist(),
                                                   starts[1:].tolist()):
                shard = self._shard_key(s)
                head = (b"EVALSHA", _b(sha), b"4", shard.encode(), self._answer_key(shard, batch).encode(),
                        stages_key.encode(), count_key.encode(), _b(self._ttl), _b(hi - lo), _b(self._num_hashes),
                        _b(expected))
                jobs.append((shard.encode(), b"*%d\r\n" % (len(head) + count) + _resp(*head) + arg_bytes))
        jobs.append((count_key.encode(), b"*2\r\n" + _resp(b"GET", count_key.encode())))
        try:
            replies = self._sender.run(jobs)
        except _redis.ResponseError as e:
            if str(e).startswith("STALE"):
                raise StaleChain(int(str(e).split()[1])) from None
            if _no_script(e):
                self._plain_cadd_sha = None
                return self._chain_add(keys, stages_key, expected, count_key)
            raise
        return self._scatter(n, order, starts, replies[:-1]), int(replies[-1] or 0)

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where the key may be present (one read per shard, one round
        trip per node); False for nulls with nulls='skip'."""
        if self._backend == "bf":
            items, valid = self._bf_items(keys, nulls)
            bf_key = f"{self._key}:bf"
            (reply,) = self._sender.run([(bf_key.encode(), _pack([b"BF.MEXISTS", bf_key, *items]))])
            return _in_place(valid, np.asarray(reply, dtype=np.int64) == 1 if len(items) else np.zeros(0, dtype=bool))
        keys, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        if self._backend == "module":
            shards, starts, order, blobs, n = _core.redis_positions(keys, self._num_bits, self._num_hashes,
                                                                    **self._geometry())
            jobs = [(self._shard_key(s).encode(),
                     b"*3\r\n" + _resp(b"BLOOMLINE.HAS", self._shard_key(s).encode(), blob))
                    for s, blob in zip(shards.tolist(), blobs)]
            out = np.zeros(n, dtype=bool)
            for reply, lo, hi in zip(self._sender.run(jobs), starts[:-1].tolist(), starts[1:].tolist()):
                out[order[lo:hi]] = np.frombuffer(reply, dtype=np.uint8) == ord("1")
        else:
            shards, starts, order, ops, counts, n = _core.redis_bitfield_ops(
                keys, self._num_bits, self._num_hashes, set=False, **self._geometry())
            jobs = []
            for s, arg_bytes, count in zip(shards.tolist(), ops, counts.tolist()):
                shard = self._shard_key(s).encode()
                jobs.append((shard, b"*%d\r\n" % (2 + count) + _resp(b"BITFIELD_RO", shard) + arg_bytes))
            replies = self._sender.run(jobs)
            answers = [(np.asarray(r, dtype=np.uint8).reshape(-1, self._num_hashes).all(axis=1)) for r in replies]
            out = np.zeros(n, dtype=bool)
            for a, lo, hi in zip(answers, starts[:-1].tolist(), starts[1:].tolist()):
                out[order[lo:hi]] = a
        return _in_place(valid, out)

    def _scatter(self, n: int, order: npt.NDArray[np.int64], starts: npt.NDArray[np.int64],
                 replies: list[bytes]) -> npt.NDArray[np.bool_]:
        """Per-shard add answers back to batch order: one '1'/'0' per key
        (the module), or the old value of each of a key's k bits (plain
        Redis: the key was new if any was '0')."""
        out = np.zeros(n, dtype=bool)
        for reply, lo, hi in zip(replies, starts[:-1].tolist(), starts[1:].tolist()):
            chars = np.frombuffer(reply, dtype=np.uint8)
            if self._backend == "plain":
                out[order[lo:hi]] = (chars.reshape(hi - lo, self._num_hashes) == ord("0")).any(axis=1)
            else:
                out[order[lo:hi]] = chars == ord("1")
        return out

    @staticmethod
    def _bf_items(keys: Keys, nulls: Nulls) -> tuple[list[Any], npt.NDArray[np.bool_]]:
        """The keys' bytes by bloomline's key rules (str as UTF-8, int as 8
        little-endian bytes), as the server's BF commands take them, and
        where the batch's keys are not null (nulls='skip'). A list of str and
        bytes goes as it is (the packer writes str as UTF-8)."""
        if isinstance(keys, list) and all(type(k) in (str, bytes) for k in keys):
            return keys, np.ones(len(keys), dtype=bool)
        if isinstance(keys, np.ndarray) and keys.dtype.kind in "iub":
            wide = keys.reshape(-1).astype("<i8" if keys.dtype.kind == "i" else "<u8")
            raw = wide.tobytes()
            return [raw[i : i + 8] for i in range(0, len(raw), 8)], np.ones(keys.shape, dtype=bool)
        # Anything else is checked by the core first: what is not a key
        # (or a single key where a batch belongs) is refused, naming its
        # place, and so is a null unless nulls='skip'.
        if not isinstance(keys, np.ndarray) and _core.offers_arrow(keys):
            _, valid = _core.hash_valid(keys, nulls=nulls)
            return _core.arrow_key_bytes(keys), valid
        if isinstance(keys, (str, bytes, bytearray, int)):
            _core.hash_many(keys)  # the core's own error for a single key where a batch belongs
        items = keys.reshape(-1).tolist() if isinstance(keys, np.ndarray) else list(cast(Iterable[Any], keys))
        _, valid = _core.hash_valid(items, nulls=nulls)
        if isinstance(keys, np.ndarray):
            valid = valid.reshape(keys.shape)
        out = []
        for k in items:
            if k is None:
                continue
            if isinstance(k, str):
                out.append(k.encode())
            elif isinstance(k, (bytes, bytearray, memoryview)):
                out.append(bytes(k))
            else:
                out.append(int(k).to_bytes(8, "little", signed=int(k) < 0))
        return out, valid

    # ---- the API ------------------------------------------------------------------

    def add(self, key: Any) -> bool:
        """Add a key; True if it was new, atomically."""
        return bool(self.add_many([key])[0])

    def __contains__(self, key: object) -> bool:
        return bool(self.contains_many([cast(Any, key)])[0])

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it."""
        if self._backend == "bf":
            return self.add_many([bytes(line) for line in bytes(data).splitlines()])
        return self.add_many(_core.hash_lines(data, self._seed))

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text."""
        if self._backend == "bf":
            return self.contains_many([bytes(line) for line in bytes(data).splitlines()])
        return self.contains_many(_core.hash_lines(data, self._seed))

    def update(self, *iterables: Keys, nulls: Nulls = "raise") -> None:
        for keys in iterables:
            self.add_many(keys, nulls=nulls)

    @property
    def bits_set(self) -> int:
        """BITCOUNT over all shards (for backend 'bf', an estimate from BF.CARD)."""
        if self._backend == "bf":
            raise ValueError("backend 'bf' keeps RedisBloom's own data: bits_set is not known")
        pipe = self._r.pipeline(transaction=False)
        for i in range(self._shards):
            pipe.bitcount(self._shard_key(i))
        return int(sum(pipe.execute()))

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits that are 1 (BITCOUNT over all shards)."""
        if self._backend == "bf":
            return 1.0 - math.exp(-self.approx_count * self._num_hashes / self._num_bits)
        return self.bits_set / self._num_bits

    @property
    def nbytes(self) -> int:
        """Bytes of bits the filter takes in Redis."""
        if self._backend == "bf":
            return int(self._r.memory_usage(f"{self._key}:bf") or 0)
        return math.ceil(self._num_bits / 512) * 64

    @property
    def approx_count(self) -> float:
        if self._backend == "bf":
            return float(self._r.execute_command("BF.CARD", f"{self._key}:bf"))
        return _core.estimate_count(self.bits_set, self._num_bits, self._num_hashes, self._layout)

    @property
    def expected_fp_rate(self) -> float:
        n = self.approx_count
        return 1.0 if math.isinf(n) else _core.false_positive_rate(n, self._num_bits, self._num_hashes, self._layout)

    def clear(self) -> None:
        """Forget every key (the values made anew at full size, the
        parameters kept)."""
        meta: dict[str, Any] = {k: (int(v) if k in ("num_bits", "shards", "shard_bits", "capacity") else v)
                                for k, v in self._meta.items()}
        meta["error_rate"] = float(self._meta["error_rate"])
        meta["kind"] = self._kind
        self._create(meta)

    def delete(self) -> None:
        """Remove the filter from Redis entirely (values and parameters)."""
        if self._kind == "bf":
            self._r.delete(f"{self._key}:bf")
        for i in range(self._shards if self._kind == "bits" else 0):
            self._r.delete(self._shard_key(i))
        self._r.delete(self._meta_key)

    # ---- interop with local filters ---------------------------------------------------

    @classmethod
    def from_filter(cls, bf: BloomFilter, redis: Any, key: str, *, shard_bits: int = DEFAULT_SHARD_BITS,
                    backend: str = "auto") -> RedisBloomFilter:
        """Upload a local BloomFilter (made with a capacity and error_rate) to a
        new Redis filter at key; answers are identical afterwards."""
        if bf.capacity is None or bf.error_rate is None:
            raise ValueError("from_filter needs a filter built with a capacity and error_rate (not from_params)")
        if backend == "bf":
            raise ValueError("from_filter copies bits: backend 'bf' keeps RedisBloom's own data")
        if isinstance(redis, str):
            redis = _redis.Redis.from_url(redis)
        if redis.exists(f"{key}:meta"):
            raise ValueError(f"a filter already exists at key {key!r}; delete() it first")
        rf = cls(redis, key, bf.capacity, bf.error_rate, layout=bf.layout, seed=bf.seed, shard_bits=shard_bits,
                 backend=backend)
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
        if self._backend == "bf":
            raise ValueError("backend 'bf' keeps RedisBloom's own data: it has no bloomline bits to download")
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
    def backend(self) -> str:
        """Which backend runs: 'module', 'plain' or 'bf'."""
        return self._backend

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
        return [self._shard_key(i) for i in range(self._shards)] if self._kind == "bits" else []

    def _repr_html_(self) -> str:
        from .display import filter_html

        return filter_html(self)

    def __repr__(self) -> str:
        return (
            f"<RedisBloomFilter key={self._key!r} backend='{self._backend}' capacity={self._capacity} "
            f"error_rate={self._error_rate} layout='{self._layout}' num_bits={self._num_bits} "
            f"num_hashes={self._num_hashes} shards={self._shards} seed={self._seed}>"
        )


class RedisStages:
    """A scalable chain's stages in Redis, for
    ``ScalableBloomFilter(..., store=RedisStages(redis, key))``: the same
    stage maths and compound error bound as a local chain, shared by every
    process attached to the key.

    Keys (one hash tag, so a Redis Cluster keeps a chain on one node):
    ``{key}:stages`` (how many), stage i a RedisBloomFilter at
    ``{key}:s{i}``, and its count of new keys at ``{key}:s{i}:count``.

    Every add goes to the last stage with a guard: refused when another
    process has added a stage meanwhile (the chain then reads the stages
    again and adds there), so a key is new to exactly one process even
    while the chain grows. A new stage is made by whoever first finds the
    last one full; the others attach to it.
    """

    shared = True

    def __init__(self, redis: Any, key: str, *, backend: str = "auto", retries: int = 8,
                 answer_ttl_ms: int = 120_000) -> None:
        if isinstance(redis, str):
            redis = _redis.Redis.from_url(redis)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        self._r = redis
        self._base = f"{{{key}}}"
        self._backend = backend
        self._retries = retries
        self._ttl = answer_ttl_ms

    def _stage_key(self, i: int) -> str:
        return f"{self._base}:s{i}"

    @property
    def stages_key(self) -> str:
        return f"{self._base}:stages"

    def count_key(self, i: int) -> str:
        return f"{self._base}:s{i}:count"

    def stage_count(self) -> int:
        """How many stages the chain has in Redis now."""
        return int(self._r.get(self.stages_key) or 0)

    def stages(self) -> list[tuple[Any, int]]:
        n = self.stage_count()
        out = []
        for i in range(n):
            stage = RedisBloomFilter(self._r, self._stage_key(i), backend=self._backend, retries=self._retries,
                                     answer_ttl_ms=self._ttl)
            out.append((stage, int(self._r.get(self.count_key(i)) or 0)))
        return out

    def new_stage(self, index: int, capacity: int, error_rate: float, layout: Layout, seed: int) -> Any:
        stage = RedisBloomFilter(self._r, self._stage_key(index), capacity, error_rate, layout=layout, seed=seed,
                                 shards=1 if capacity * 64 < DEFAULT_SHARD_BITS else None, backend=self._backend,
                                 retries=self._retries, answer_ttl_ms=self._ttl)
        # The chain grows from index to index + 1 stages once, whoever asks first.
        self._r.eval("if (redis.call('GET', KEYS[1]) or '0') == ARGV[1] then "
                     "redis.call('SET', KEYS[1], ARGV[2]) end", 1, self.stages_key, str(index), str(index + 1))
        return stage

    def add_to_last(self, index: int, stage: Any, keys: Any) -> tuple[npt.NDArray[np.bool_], int]:
        """Add to stage `index`, the last; StaleChain if it no longer is."""
        return cast("RedisBloomFilter", stage)._chain_add(keys, self.stages_key, index + 1, self.count_key(index))

    def reset(self) -> None:
        for stage, _ in self.stages():
            stage.delete()
        n = int(self._r.get(self.stages_key) or 0)
        self._r.delete(self.stages_key, *[self.count_key(i) for i in range(n)])

    def close(self) -> None:
        pass
