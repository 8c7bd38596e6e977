"""The "bf" backend: the server's own Bloom commands (RedisBloom, Redis 8,
valkey-bloom). The keys themselves are sent (their bytes by bloomline's key
rules, from the core), and the server's filter grows by itself
(``BF.RESERVE ... EXPANSION 2``), so it has no capacity to pass and keeps
no stages of ours. Beside it, in its slot, bloomline keeps its count of new
keys, named by the filter's ident, as the other backends do."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import numpy as np

from .. import _core
from ._backend import Backend, Part, Prepared, check_size
from ._names import FilterKeys, routable, sibling
from ._wire import MODE, Job, Script, Sender

if TYPE_CHECKING:
    from .._core import BloomFilter, Layout, Nulls
    from ._handle import Handle

# KEYS: the BF key, answer, its count (where the filter has one)
# ARGV: ttl_ms, mode, then the keys
# The count is named by the filter's ident and read first: a handle of an
# earlier making of the filter names a count that is gone (MISSING).
# BF.MADD would make a missing filter anew (with the server's defaults).
_ADD = Script("""
local count = -1
if KEYS[3] then
  count = redis.call('GET', KEYS[3])
  if not count then return redis.error_reply('MISSING ' .. KEYS[3]) end
  count = tonumber(count)
end
local kept = redis.call('GET', KEYS[2])
if kept then return {kept, count} end
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('MISSING ' .. KEYS[1]) end
local unsure = ARGV[2] == 'R'
local out, news = {}, 0
for first = 3, #ARGV, 5000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(ARGV, first, math.min(first + 4999, #ARGV)))
  for i = 1, #added do
    if added[i] == 1 then out[#out + 1] = '1'; news = news + 1
    elseif unsure then out[#out + 1] = '?' else out[#out + 1] = '0' end
  end
end
local answer = table.concat(out)
if KEYS[3] then count = redis.call('INCRBY', KEYS[3], news) end
redis.call('SET', KEYS[2], answer, 'PX', ARGV[1])
return {answer, count}
""")

# KEYS: the BF key, its count (where the filter has one)    ARGV: error rate, capacity
# Each made only where missing.
_CREATE = Script("""
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('BF.RESERVE', KEYS[1], ARGV[1], ARGV[2], 'EXPANSION', 2)
end
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], '0') end
return 1
""")


class BfBackend(Backend):
    name = "bf"
    kinds = ("bf",)
    max_keys = 20_000  # one command holds the server briefly (benchmarks/NOTES.md, "Redis")
    no_stages = "it grows by itself (BF.RESERVE ... EXPANSION): use a RedisBloomFilter, not a chain's stages"
    our_index = False  # (the server sets its bits: the meta's layout names no index of ours)
    no_windows = ("the server's own Bloom filters have no generations to expire: pass backend 'plain' (or 'auto'), "
                  "whose scripts run on any Redis")

    # -- making a filter -------------------------------------------------------------------

    def geometry(self, num_bits: int, layout: Layout, shards: Optional[int], shard_bits: int) -> dict[str, int]:
        return dict(shards=1, shard_bits=0)  # the server sizes its own filter

    def keys_of(self, name: str, meta: dict[str, Any]) -> FilterKeys:
        # Its count of new keys is named by the filter's ident, as a bits
        # filter's are, and read first by every add: a handle attached to a
        # filter since dropped and made again is refused (filters made
        # before idents keep no count).
        bf = routable(f"{name}:bf")
        counts = (sibling(bf, f":count:{meta['ident']}"),) if meta.get("ident") else ()
        return FilterKeys(name, str(meta["layout"]), int(meta["num_bits"]), int(meta["num_hashes"]),  # type: ignore[arg-type]
                          int(meta["seed"]), 0, shards=(bf,), counts=counts, answers=(sibling(bf, ":ans:"),))

    def key_patterns(self, name: str, star: str) -> list[str]:
        bf = routable(f"{name}:bf")
        return [bf, sibling(bf, f":count:{star}"), sibling(bf, f":ans:{star}")]

    def finish(self, sender: Sender, meta: dict[str, str], keys: FilterKeys) -> None:
        sender.script(_CREATE, [*keys.shards, *keys.counts], [meta["error_rate"], meta["capacity"]])

    # -- batches ---------------------------------------------------------------------------

    def prepare(self, keys: Any, nulls: Nulls, seed: int) -> Prepared:
        bodies, counts, valid = _core.redis_items(keys, nulls=nulls, chunk=self.max_keys)
        return Prepared(sum(counts), valid, bodies=bodies, counts=counts)

    def lines(self, data: Any, seed: int) -> Any:
        return [bytes(line) for line in bytes(data).splitlines()]  # the server needs the lines themselves

    def _parts(self, batch: Prepared, job: Any) -> list[Part]:
        parts, lo = [], 0
        for c, (body, count) in enumerate(zip(batch.bodies, batch.counts)):
            parts.append(job(c, body, count, np.arange(lo, lo + count)))
            lo += count
        return parts

    def add_parts(self, f: FilterKeys, batch: Prepared, batch_id: str, ttl_ms: int) -> list[Part]:
        bf, answers = f.shards[0], f.answers[0]
        count_key = f.counts[0] if f.counts else None
        return self._parts(batch, lambda c, body, count, idx: Part(
            [Job(bf.encode(), _ADD, (bf, f"{answers}{batch_id}.{c}", *f.counts), (ttl_ms, MODE), body, count,
                 writes=True)], idx, count_key=count_key))

    def _one(self, key: Any) -> Prepared:
        # One key, not a batch: its bytes by the key rules, with a single
        # key's errors (None and NaN are refused, not nulls).
        return self.prepare([_core.key_bytes(key)], "raise", 0)

    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        return self.add_parts(f, self._one(key), batch_id, ttl_ms)[0]

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        return self.has_parts(f, self._one(key))[0]

    def has_parts(self, f: FilterKeys, batch: Prepared) -> list[Part]:
        bf = f.shards[0]

        def decode(replies: list[Any]) -> Any:
            check_size(bf, 1, replies[1])  # EXISTS after the read: a filter gone reads as absent
            return np.asarray(replies[0], dtype=np.int64) == 1

        return self._parts(batch, lambda c, body, count, idx: Part(
            [Job(bf.encode(), b"BF.MEXISTS", (bf,), (), body, count), Job(bf.encode(), b"EXISTS", (bf,))], idx,
            decode=decode))

    # -- the rest of a filter's life: RedisBloom's own data ----------------------------------

    def clear(self, h: Handle) -> None:
        h.sender.each([Job(k.encode(), b"DEL", (k,)) for k in h.keys.data])
        self.finish(h.sender, h.meta, h.keys)

    def approx_count(self, h: Handle) -> float:
        return float(h.sender.call(h.keys.shards[0], b"BF.CARD", h.keys.shards[0]))

    def fill_ratio(self, h: Handle) -> float:  # from BF.CARD: the server shows no bits
        return 1.0 - math.exp(-self.approx_count(h) * h.keys.num_hashes / h.keys.num_bits)

    def nbytes(self, h: Handle) -> int:  # the filter's own bytes, as a bits filter's are its bits
        size = h.sender.call(h.keys.shards[0], b"BF.INFO", h.keys.shards[0], b"SIZE")
        if isinstance(size, dict):  # ({b'Size': n}, as redis-py's parser gives it; a list, or n, elsewhere)
            size = next(iter(size.values()))
        return int(size[-1] if isinstance(size, list) else size)

    def _no_bits(self, what: str) -> NoReturn:
        raise ValueError(f"backend 'bf' keeps RedisBloom's own data, not bloomline's bits: {what} (RedisBloom has "
                         "BF.SCANDUMP and BF.LOADCHUNK to move it)")

    def bits_set(self, h: Handle) -> int:
        self._no_bits("bits_set is not known")

    def download(self, h: Handle, counts: Sequence[str]) -> tuple[bytes, list[int]]:
        self._no_bits(f"the filter at {h.name!r} has no bits to download")

    def upload(self, sender: Sender, keys: FilterKeys, bf: BloomFilter, ident: Optional[str] = None) -> list[int]:
        self.check_travel()
        return []

    def check_travel(self) -> None:
        self._no_bits("it does not travel to or from a local filter")
