"""RedisStages: a scalable chain's stages in Redis, shared by every process
attached to the key.

Every key of a chain starts with one hash tag (``{key}``: one slot, one
node), so each step below is one atomic command:

- growth (``_GROW``): stage i's meta, shards and count are made, and the
  chain's stage count set to i + 1, together; a re-send, or a second
  process growing at once, finds the stage made and reads it;
- an add to the last stage (the backend's stage command) is refused
  ("STALE") unless the chain has the length the client thinks, and takes
  keys only while the stage's count of new keys is under its capacity: it
  stops before the key that would pass it and says so, and the chain sends
  the rest to the next stage. However many processes add, no stage takes
  more than its capacity, so the chain keeps the bound one process keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from ..scalable import ChainMismatch, StageAdd
from ._backend import NOT_TAKEN, Prepared, gone, run_adds, run_lookups
from ._durable import replicated
from ._errors import MissingKeyError, UnknownOutcome
from ._filter import RedisBloomFilter
from ._handle import Expiring, Handle
from .._layouts import layout_matches
from ._meta import META_VERSION, as_dict, delete_matching, eviction_policy, keys_of, plan, read_layout, stored_layout
from ._names import StageGuard, batch_ids, client_of, refuse_other_kinds, tag_of_chain
from ._registry import BACKENDS, check_name, new_backend
from ._wire import DEFAULT_RETRIES, DEFAULT_WAIT_TIMEOUT_MS, Job, Script, Sender, _error_code

if TYPE_CHECKING:
    from .._core import Layout

# KEYS: stages, the chain's meta, the stage's meta, its count, shard_1 .. shard_n
# ARGV: index, n, bytes of each shard, then m and the stage meta's m
#       arguments (field, value, ...), then the chain meta's (for stage 0)
_CHAIN_VERSION = 1  # the chain hash's version (its layout, stored_layout: 2 for the standard layout's second index)

_GROW = Script("""
local index = tonumber(ARGV[1])
local have = redis.call('GET', KEYS[1])
if not have then
  if index > 0 or redis.call('EXISTS', KEYS[3]) == 1 then return redis.error_reply('MISSING ' .. KEYS[1]) end
  have = 0
else
  have = tonumber(have)
end
if have > index then return have end
if have < index then return redis.error_reply('STALE ' .. have) end
local n = tonumber(ARGV[2])
for i = 3, 4 + n do
  if redis.call('EXISTS', KEYS[i]) == 1 then return redis.error_reply('LEFTOVER ' .. KEYS[i]) end
end
local m = tonumber(ARGV[3 + n])
local ttl = redis.call('PTTL', KEYS[1])
redis.call('HSET', KEYS[3], unpack(ARGV, 4 + n, 3 + n + m))
redis.call('SET', KEYS[4], '0')
for s = 1, n do redis.call('SETRANGE', KEYS[4 + s], tonumber(ARGV[2 + s]) - 1, '\\0') end
if index == 0 and #ARGV > 3 + n + m then redis.call('HSET', KEYS[2], unpack(ARGV, 4 + n + m)) end
redis.call('SET', KEYS[1], index + 1, 'KEEPTTL')
if ttl > 0 then
  for i = 3, 4 + n do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return index + 1
""")

# KEYS: every key of the chain    ARGV: command, its argument (or '')
# The chain's length is checked by the caller's count of KEYS (STALE).
_EACH = Script("""
local have = tonumber(redis.call('GET', KEYS[1]) or '-1')
if have ~= tonumber(ARGV[3]) then return redis.error_reply('STALE ' .. have) end
local out = {}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then return redis.error_reply('MISSING ' .. KEYS[i]) end
  if ARGV[2] == '' then out[i] = redis.call(ARGV[1], KEYS[i]) else out[i] = redis.call(ARGV[1], KEYS[i], ARGV[2]) end
end
return out
""")


# KEYS: stages, stage 0's meta, the count of a restore under way. The
# chain's stage count and whether its first stage exists, read together:
# read apart, a chain made between the two reads looked like a count gone
# while its stages remain.
_COUNT = Script("""
return {redis.call('GET', KEYS[1]) or '', redis.call('EXISTS', KEYS[2]), redis.call('EXISTS', KEYS[3])}
""")

# KEYS: the restore's count, stages    ARGV: the restore's stage count
# A restored chain appears whole, in one step: its stages were made under a
# count no other process reads, which becomes the chain's (a re-send after a
# lost reply finds it done).
_PUBLISH = Script("""
local n = redis.call('GET', KEYS[1])
if not n then
  if redis.call('GET', KEYS[2]) == ARGV[1] then return tonumber(ARGV[1]) end
  return redis.error_reply('MISSING ' .. KEYS[1])
end
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('LEFTOVER ' .. KEYS[2]) end
if n ~= ARGV[1] then return redis.error_reply('STALE ' .. n) end
redis.call('RENAME', KEYS[1], KEYS[2])
return tonumber(n)
""")


# KEYS: stages, then every key a failed restore made    Deletes them unless
# the chain is whole at its key by now (another restore, replace=True).
_ABANDON = Script("""
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
return redis.call('DEL', unpack(KEYS, 2))
""")


class RedisStages(Expiring):
    """A scalable chain's stages in Redis, for
    ``ScalableBloomFilter(..., store=RedisStages(redis, key))``: the same
    stage maths and compound error bound as a local chain, shared by every
    process attached to the key, which is new to exactly one of them.

    Keys (one hash tag): ``{key}:stages`` (how many), stage i a filter at
    ``{key}:s{i}`` (its meta and shards), its count of new keys at
    ``{key}:s{i}:count:<ident>`` (named by the stage's making, as a fixed
    filter's counts are: a writer attached to a chain since reset and made
    again is refused). Backend 'bf' grows by itself and keeps no stages.
    The chain's backend is recorded with its first stage and binds every
    later one (as a RedisBloomFilter's). ``wait_replicas`` and
    ``wait_timeout_ms``: WAIT after each stage add, as RedisBloomFilter's
    (NotDurable when too few replicas acknowledged).
    """

    shared = True
    """True: other processes may add stages, so a chain re-reads the count before it grows (the store protocol)."""

    def __init__(self, redis: Any, key: str, *, backend: str = "auto", retries: int = DEFAULT_RETRIES,
                 answer_ttl_ms: Optional[int] = None, wait_replicas: int = 0,
                 wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        check_name(backend)
        if backend != "auto" and "stage" not in BACKENDS[backend].kinds:
            raise ValueError(f"backend {backend!r} cannot keep a scalable chain's stages: {BACKENDS[backend].no_stages}")
        self._r = client_of(redis)
        self._key = key
        self._what = f"the chain at {key!r}"
        self._base = tag_of_chain(key)
        self._backend = backend
        self._sender = Sender(self._r, retries=retries, answer_ttl_ms=answer_ttl_ms, wait_replicas=wait_replicas,
                              wait_timeout_ms=wait_timeout_ms)
        self._policy: Optional[str] = None
        self._handles: list[Handle] = []  # the stages attached so far (a chain only grows)
        self._stages: list[RedisBloomFilter] = []  # the same, as the chain's stages
        self._chain: dict[str, Any] = {}  # its parameters (attach_chain)
        self._count_key = self.stages_key  # the restore's own count while it uploads (restoring)

    @property
    def retry_window_s(self) -> Optional[float]:
        """The longest a batch's tries may take (RedisBloomFilter.retry_window_s)."""
        return self._sender.window_s

    def _stage_key(self, i: int) -> str:
        return f"{self._base}:s{i}"

    @property
    def stages_key(self) -> str:
        """The Redis key holding the chain's stage count."""
        return f"{self._base}:stages"

    def count_key(self, i: int) -> str:
        """Stage i's count of new keys (the stage attached)."""
        return self._handles[i].keys.counts[0]

    @property
    def restoring_key(self) -> str:
        """The stage count of a restore under way (restoring): the chain's once it is whole."""
        return f"{self._base}:restoring"

    def restoring(self) -> None:
        """Make the stages of a restore (new_stage, upload) under a count of
        their own, read by no other process: a crawler that attaches while
        they upload is refused (MissingKeyError), rather than taking keys
        into an empty stage that the upload then overwrites (new twice).
        publish() makes the chain whole, in one step."""
        self._count_key = self.restoring_key

    def abandon(self) -> None:
        """Delete what a failed restore made (restoring), in one step, unless
        a chain is whole at the key by now: another restore, with
        replace=True, that finished meanwhile (a reset would delete it, and
        its caller was told it is there)."""
        self._sender.script(_ABANDON, [self.stages_key, self.restoring_key, self.chain_key,
                                       *(k for h in self._handles for k in h.all_keys())])
        self._handles, self._stages = [], []

    def publish(self) -> None:
        """The restored stages become the chain, in one step (restoring)."""
        self._sender.script(_PUBLISH, [self.restoring_key, self.stages_key], [len(self._handles)])
        self._count_key = self.stages_key

    @property
    def chain_key(self) -> str:
        """The chain's own parameters (a hash, written with its first stage)."""
        return f"{self._base}:chain"

    @property
    def import_key(self) -> str:
        """Where an import from a scrapy-redis set keeps its progress."""
        return f"{self._base}:import"

    def info(self) -> Optional[dict[str, str]]:
        """The chain's parameters as Redis holds them (initial_capacity,
        error_rate, growth, tightening, layout, seed; for an imported chain
        the fingerprint rule), or None if there is no chain."""
        info = as_dict(self._sender.call(self.chain_key, b"HGETALL", self.chain_key))
        return read_layout(info, _CHAIN_VERSION, f"the chain at {self._key!r}") if info else None

    def set_info(self, **fields: Any) -> None:
        """Add fields to the chain's parameters (an import's fingerprint rule)."""
        self._sender.call(self.chain_key, b"HSET", self.chain_key, *(x for kv in fields.items() for x in kv))

    def attach_chain(self, rule: Any, layout: Layout, seed: int) -> None:
        """Keep the chain's parameters (written with its first stage) and
        check them against those Redis holds: ChainMismatch names a field
        that differs (a stage's own parameters are checked by the chain;
        "standard" takes a chain of the first index, whose stage 0 then says
        which it is)."""
        self._chain = {"initial_capacity": rule.initial_capacity, "error_rate": repr(rule.error_rate),
                       "growth": rule.growth, "tightening": repr(rule.tightening), "layout": layout, "seed": seed}
        stored = self.info()
        for field, wanted in self._chain.items():
            if stored is not None and field in stored:
                have = stored[field]
                same = (float(have) == float(wanted) if field in ("error_rate", "tightening") else
                        layout_matches(have, str(wanted)) if field == "layout" else have == str(wanted))
                if not same:
                    raise ChainMismatch(0, field, have, wanted, None, chain=stored)
        if stored is not None and "layout" in stored:
            self._chain["layout"] = stored["layout"]

    def stage_count(self) -> int:
        """How many stages the chain has in Redis now."""
        have = self._sender.call(self._count_key, b"GET", self._count_key)
        if have is None and self._stages:
            raise gone(self._count_key, self._what, self._policy or "")
        return int(have or 0)

    def _attach(self, n: int) -> None:
        if self._policy is None:
            self._policy = eviction_policy(self._r)
        # A stage the count says exists must have its meta: one that vanished
        # is a lost key of the chain, not a filter still to be made.
        policy = self._policy

        def lost(meta_key: str) -> Exception:
            return gone(meta_key, self._what, policy)

        for i in range(len(self._handles), n):
            h = Handle.open(self._sender, self._stage_key(i), None, {}, self._backend, policy, self._what, lost)
            self._handles.append(h)
            self._stages.append(RedisBloomFilter._of(h))

    def stages(self) -> list[tuple[Any, int]]:
        """The stages, oldest first, with their counts of new keys."""
        have, first, restoring = self._sender.script(_COUNT, [self._count_key, f"{self._stage_key(0)}:meta",
                                                              self.restoring_key])
        n = int(have or 0)
        if not have and restoring and self._count_key != self.restoring_key:
            raise MissingKeyError(
                f"the chain at {self._key!r} is being restored (its stages upload, and it is whole once "
                f"{self.stages_key!r} is made): attach once restore() has finished. A restore that was "
                "interrupted left it so: restore again with replace=True, or RedisStages(redis, key).reset()",
                key=self.stages_key)
        if not have and (first or self._stages):
            raise gone(self._count_key, self._what, self._policy or "", "is gone while its stages remain"
                       if first else "is gone")
        self._attach(n)
        counts = self._sender.each([Job(self.count_key(i).encode(), b"GET", (self.count_key(i),)) for i in range(n)])
        for i, c in enumerate(counts):
            if c is None:
                raise gone(self.count_key(i), self._what, self._policy or "")
        return [(s, int(c)) for s, c in zip(self._stages[:n], counts)]

    def snapshot(self, index: int) -> tuple[Any, int]:
        """Stage `index` as a local BloomFilter, and its count read after its
        bits in the same round (never lower than what they hold: a dump
        taken while writers add gives a count that may run ahead of the
        bits, never behind them)."""
        h = self._handles[index]
        bits, (count,) = h.download(h.keys.counts)
        return h.local(bits, count), count

    def upload(self, index: int, stage: Any, count: int) -> None:
        """A local stage's bits and count written into stage `index` (made,
        empty): restore()."""
        h = self._handles[index]
        try:  # (each write checks the stage is still this restore's making: another restore may replace it)
            h.backend.upload(h.sender, h.keys, stage, ident=str(h.meta["ident"]))
        except _redis.ResponseError as e:
            if _error_code(e) != "REPLACED":
                raise
            raise gone(h.keys.meta, self._what, "", "was made again (another restore, replace=True) while this "
                       "restore uploaded it") from None
        h.sender.call(h.keys.counts[0], b"SET", h.keys.counts[0], count)

    def new_stage(self, index: int, capacity: int, error_rate: float, layout: Layout, seed: int) -> Any:
        """Make stage `index` unless it is made (idempotent), and attach it."""
        name = self._stage_key(index)
        if index == 0:
            refuse_other_kinds(self._r, self._key, "chain")
        meta = plan(capacity, error_rate, layout, seed, 1 if capacity * 64 < 2**31 else None, 2**31, "stage")
        # A new stage takes the chain's backend (its first stage's): a chain never switches.
        meta["backend"] = self._handles[0].backend.name if self._handles else new_backend(self._backend, self._r).name
        keys = keys_of(name, meta)
        stage_layout, stage_version = stored_layout(meta["layout"], META_VERSION)
        fields = [x for kv in dict(meta, layout=stage_layout, version=stage_version, state="ready").items() for x in kv]
        chain_layout, chain_version = stored_layout(self._chain["layout"], _CHAIN_VERSION)
        chain = [x for kv in dict(self._chain, layout=chain_layout, version=chain_version,
                                  backend=meta["backend"]).items() for x in kv]
        try:
            self._sender.script(_GROW, [self._count_key, self.chain_key, keys.meta, keys.counts[0], *keys.shards],
                                [index, len(keys.shards), *keys.nbytes, len(fields), *fields, *chain])
        except _redis.ResponseError as e:
            code = _error_code(e)
            if code == "STALE":
                raise ValueError(f"stage {index} of the chain at {self._key!r} cannot be made: the chain has "
                                 f"{str(e).split()[1]} stages") from None
            if code == "LEFTOVER":
                raise ValueError(f"{str(e).split()[1]!r} exists though the chain at {self._key!r} has {index} "
                                 "stages (an interrupted reset()?): reset() the chain to start over") from None
            if code == "MISSING":
                self.stages()  # (a restore under way says so)
                raise gone(self._count_key, self._what, self._policy or "", "is gone while its stages remain") from None
            raise
        self._attach(index + 1)
        return self._stages[index]

    def contains_any(self, first: int, last: int, keys: Any) -> npt.NDArray[np.bool_]:
        """Hashed keys looked up in stages first..last-1 at once (one round
        trip: they share a node); True where any may hold the key."""
        batch = Prepared(len(keys), np.ones(len(keys), dtype=bool), hashes=keys)
        parts = (p for h in self._handles[first:last] for p in h.has_parts(batch))
        return run_lookups(self._sender, parts, batch.n, self._what, self._policy or "")

    def add_to_last(self, index: int, stage: Any, keys: Any) -> StageAdd:
        """Add hashed keys to stage `index`, the last. The server takes keys
        while the stage has room (taken False for the others: the stage is
        full, or the chain grew: `stale` when nothing was taken because of
        that). A failure is the outcome's error, with its facts."""
        h = self._handles[index]
        guard = StageGuard(self.stages_key, index + 1, h.capacity, h.keys.counts[0], f"{h.name}:ans:")
        batch = Prepared(len(keys), np.ones(len(keys), dtype=bool), hashes=keys)
        parts = h.backend.stage_parts(h.keys, guard, batch, batch_ids.next(), self._sender.answer_ttl_ms)
        out = run_adds(self._sender, parts, batch.n, self._what, self._policy or "", tolerate=("STALE",))
        taken = out.codes != NOT_TAKEN
        replicated(self._sender, [self.stages_key.encode()], self._what, out, bool(taken.any()))
        error = out.error
        stale = int(str(out.skipped[0]).split()[1]) if out.skipped and not taken.any() and error is None else None
        doubted = out.resent & ~taken if out.resent is not None else None
        doubt = None
        if doubted is not None and doubted.any():
            doubt = UnknownOutcome(
                f"keys of a batch to {self._what} were re-sent after a lost reply to a stage that was full or no "
                "longer the last, and were then found in that stage: the lost send may have added them")
        return StageAdd(out.new, taken, out.counts.get(guard.count), stale=stale, error=error,
                        unknown=out.unknown if error is not None else None, doubted=doubted, doubt=doubt)

    def keys(self) -> list[str]:
        """Every Redis key the chain has now (its stages', counts and meta)."""
        self._attach(self.stage_count())
        return self._all_keys()

    def _all_keys(self) -> list[str]:
        return [self.stages_key, self.chain_key, *(k for h in self._handles for k in h.all_keys())]

    def _each(self, command: bytes, *args: Any) -> list[Any]:
        """command on every key of the chain, in one atomic step (Expiring)."""
        while True:
            self._attach(self.stage_count())
            keys = self._all_keys()
            try:
                return list(self._sender.script(_EACH, keys, [command, args[0] if args else "", len(self._handles)]))
            except _redis.ResponseError as e:
                if _error_code(e) != "STALE":
                    raise
                if int(str(e).split()[1]) < len(self._handles):  # (no count: none, or a restore under way)
                    self.stages()  # (it says which)
                    raise gone(self.stages_key, self._what, self._policy or "") from None
                # the chain grew meanwhile: its new stage's keys too

    def reset(self) -> None:
        """Delete the chain: its count, its parameters and every stage's keys
        (a windowed filter at the same key, whose keys share the hash tag, is left alone)."""
        glob = "".join("\\" + c if c in "*?[]\\" else c for c in self._base)
        delete_matching(self._r, [f"{glob}:stages", f"{glob}:restoring", f"{glob}:chain", f"{glob}:import",
                                  f"{glob}:s[0-9]*"])
        self._handles, self._stages = [], []

    def close(self) -> None:
        """Nothing to release: the Redis connection is the caller's (the store protocol asks for close)."""
        pass
