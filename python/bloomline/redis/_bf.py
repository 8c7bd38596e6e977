"""The "bf" backend: the server's own Bloom commands (RedisBloom, Redis 8,
valkey-bloom). The keys themselves are sent (their bytes by bloomline's key
rules, from the core), and the server's filter grows by itself
(``BF.RESERVE ... EXPANSION 2``), so it has no capacity to pass and keeps
no stages of ours."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from ._backend import Backend, FilterKeys, Part, Prepared, check_size
from ._wire import MODE, Job, Script

if TYPE_CHECKING:
    from .._core import Nulls

# KEYS: the BF key, answer    ARGV: ttl_ms, mode, then the keys
# BF.MADD would make a missing filter anew (with the server's defaults).
_ADD = Script("""
local kept = redis.call('GET', KEYS[2])
if kept then return {kept, -1} end
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('MISSING ' .. KEYS[1]) end
local unsure = ARGV[2] == 'R'
local out = {}
for first = 3, #ARGV, 5000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(ARGV, first, math.min(first + 4999, #ARGV)))
  for i = 1, #added do
    if added[i] == 1 then out[#out + 1] = '1' elseif unsure then out[#out + 1] = '?' else out[#out + 1] = '0' end
  end
end
local answer = table.concat(out)
redis.call('SET', KEYS[2], answer, 'PX', ARGV[1])
return {answer, -1}
""")

# KEYS: the BF key    ARGV: error rate, capacity (made only where missing)
CREATE = Script("""
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('BF.RESERVE', KEYS[1], ARGV[1], ARGV[2], 'EXPANSION', 2)
end
return 1
""")


class BfBackend(Backend):
    name = "bf"
    max_keys = 20_000  # about 25 ms of the server's time for an add

    def prepare(self, keys: Any, nulls: Nulls, seed: int) -> Prepared:
        bodies, counts, valid = _core.redis_items(keys, nulls=nulls, chunk=self.max_keys)
        return Prepared(sum(counts), valid, bodies=bodies, counts=counts)

    def _parts(self, batch: Prepared, job: Any) -> list[Part]:
        parts, lo = [], 0
        for c, (body, count) in enumerate(zip(batch.bodies, batch.counts)):
            parts.append(job(c, body, count, np.arange(lo, lo + count)))
            lo += count
        return parts

    def add_parts(self, f: FilterKeys, batch: Prepared, batch_id: str, ttl_ms: int) -> list[Part]:
        assert f.bf is not None
        bf, answers = f.bf, f.answers[0]
        return self._parts(batch, lambda c, body, count, idx: Part(
            [Job(bf.encode(), _ADD, (bf, f"{answers}{batch_id}.{c}"), (ttl_ms, MODE), body, count, writes=True)],
            idx))

    def _one(self, key: Any) -> Prepared:
        if key is None:  # (one key, not a batch: nulls=skip does not apply)
            raise TypeError("key must be str, bytes-like or int, got NoneType")
        return self.prepare([key], "raise", 0)

    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        return self.add_parts(f, self._one(key), batch_id, ttl_ms)[0]

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        return self.has_parts(f, self._one(key))[0]

    def has_parts(self, f: FilterKeys, batch: Prepared) -> list[Part]:
        assert f.bf is not None
        bf = f.bf

        def decode(replies: list[Any]) -> Any:
            check_size(bf, 1, replies[1])  # EXISTS after the read: a filter gone reads as absent
            return np.asarray(replies[0], dtype=np.int64) == 1

        return self._parts(batch, lambda c, body, count, idx: Part(
            [Job(bf.encode(), b"BF.MEXISTS", (bf,), (), body, count), Job(bf.encode(), b"EXISTS", (bf,))], idx,
            decode=decode))
