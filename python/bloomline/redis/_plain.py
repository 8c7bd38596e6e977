"""The "plain" backend: any Redis, no module. Adds are a Lua script whose
operands are the batch's ``BITFIELD SET u1`` operations (encoded by the
core), run so that the answer is kept under the batch's id; lookups are a
``BITFIELD_RO`` followed by a ``STRLEN`` of the shard (a missing shard
reads as zeros; nothing makes a vanished shard anew, so a shard present
after the read was present during it). The scripts' KEYS and ARGV are written once, beside the
function that builds their command."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ._backend import BitsBackend, FilterKeys, StageGuard, check_size
from ._wire import MODE, Job, Script

# Shared by both adds. A missing key is an error, never made anew (BITFIELD
# would make it); `apply` runs BITFIELD over whole keys' operations, a
# few thousand arguments a call (Lua's stack), and appends each key's
# answer: '1' if one of its bits was 0, else '0', or '?' on a re-send whose
# kept answer was gone (its lost first send may have set the bits).
_PRELUDE = """
local function missing(key) return redis.error_reply('MISSING ' .. key) end
local function shard_error(key, size)
  local len = redis.call('STRLEN', key)
  if len == size then return nil end
  if len == 0 and redis.call('EXISTS', key) == 0 then return missing(key) end
  return redis.error_reply('WRONGSIZE ' .. key .. ' holds ' .. len .. ' bytes, not ' .. size)
end
local function apply(key, first, keys, k, unsure, out)
  local per = 4 * k
  local step = math.max(1, math.floor(7000 / per))
  local news, done = 0, 0
  while done < keys do
    local take = math.min(step, keys - done)
    local a = first + done * per
    local old = redis.call('BITFIELD', key, unpack(ARGV, a, a + take * per - 1))
    for i = 0, take - 1 do
      local new = false
      for j = i * k + 1, i * k + k do
        if old[j] == 0 then new = true break end
      end
      if new then news = news + 1; out[#out + 1] = '1'
      elseif unsure then out[#out + 1] = '?'
      else out[#out + 1] = '0' end
    end
    done = done + take
  end
  return news
end
"""

# KEYS: shard, count, answer    ARGV: ttl_ms, mode, k, shard bytes, then the operands
_ADD = Script(_PRELUDE + """
local count = redis.call('GET', KEYS[2])
if not count then return missing(KEYS[2]) end
local kept = redis.call('GET', KEYS[3])
if kept then return {kept, tonumber(count)} end
local e = shard_error(KEYS[1], tonumber(ARGV[4]))
if e then return e end
local k = tonumber(ARGV[3])
local out = {}
local news = apply(KEYS[1], 5, (#ARGV - 4) / (4 * k), k, ARGV[2] == 'R', out)
local answer = table.concat(out)
count = redis.call('INCRBY', KEYS[2], news)
redis.call('SET', KEYS[3], answer, 'PX', ARGV[1])
return {answer, count}
""")

# KEYS: stages, count, answer, shard_1 .. shard_n
# ARGV: expected, capacity, ttl_ms, mode, k, n, then (bytes, keys) of each
#       shard, then the operands, shard 1's first
_STAGE_ADD = Script(_PRELUDE + """
local count = redis.call('GET', KEYS[2])
if not count then return missing(KEYS[2]) end
count = tonumber(count)
local kept = redis.call('GET', KEYS[3])
if kept then return {kept, count} end
local stages = redis.call('GET', KEYS[1])
if not stages then return missing(KEYS[1]) end
if stages ~= ARGV[1] then return redis.error_reply('STALE ' .. stages) end
local k, n = tonumber(ARGV[5]), tonumber(ARGV[6])
for s = 1, n do
  local e = shard_error(KEYS[3 + s], tonumber(ARGV[5 + 2 * s]))
  if e then return e end
end
local room = math.max(0, tonumber(ARGV[2]) - count)
local out, news, first = {}, 0, 7 + 2 * n
for s = 1, n do
  local keys, done = tonumber(ARGV[6 + 2 * s]), 0
  while done < keys and room > 0 do
    local take = math.min(keys - done, room)
    local new = apply(KEYS[3 + s], first + done * 4 * k, take, k, ARGV[4] == 'R', out)
    room, news, done = room - new, news + new, done + take
  end
  if done < keys then break end
  first = first + keys * 4 * k
end
if #out == 0 then return {'', count} end
local answer = table.concat(out)
count = redis.call('INCRBY', KEYS[2], news)
redis.call('SET', KEYS[3], answer, 'PX', ARGV[3])
return {answer, count}
""")


class PlainBackend(BitsBackend):
    name = "plain"
    max_keys = 10_000
    max_bits = 60_000  # bits per command: one command holds the server briefly (benchmarks/NOTES.md, "Redis")
    form_add, form_has = "set", "get"

    def chunk_keys(self, f: FilterKeys) -> int:
        return max(1, min(self.max_keys, self.max_bits // f.num_hashes))

    def add_job(self, f: FilterKeys, shard: int, answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        name = f.shards[shard]
        return Job(name.encode(), _ADD, (name, f.counts[shard], answer),
                   (ttl_ms, MODE, f.num_hashes, f.nbytes[shard]), body, count, writes=True)

    def stage_job(self, f: FilterKeys, guard: StageGuard, shards: list[int], keys_per_shard: list[int],
                  answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        sizes = [v for s, keys in zip(shards, keys_per_shard) for v in (f.nbytes[s], keys)]
        return Job(guard.stages.encode(), _STAGE_ADD,
                   (guard.stages, guard.count, answer, *(f.shards[s] for s in shards)),
                   (guard.expected, guard.capacity, ttl_ms, MODE, f.num_hashes, len(shards), *sizes),
                   body, count, writes=True)

    def has_jobs(self, f: FilterKeys, shard: int, body: bytes,
                 count: int) -> tuple[list[Job], Callable[[list[Any]], npt.NDArray[np.bool_]]]:
        name, k = f.shards[shard], f.num_hashes

        def decode(replies: list[Any]) -> npt.NDArray[np.bool_]:
            check_size(name, f.nbytes[shard], replies[1])
            return np.asarray(np.asarray(replies[0], dtype=np.uint8).reshape(-1, k).all(axis=1))

        return [Job(name.encode(), b"BITFIELD_RO", (name,), (), body, count), Job(name.encode(), b"STRLEN", (name,))], \
            decode
