"""The "plain" backend: any Redis, no module. Adds are a Lua script whose
operands are the batch's ``BITFIELD SET u1`` operations (encoded by the
core), run so that the answer is kept under the batch's id; lookups are a
``BITFIELD_RO`` followed by a ``STRLEN`` of the shard (a missing shard
reads as zeros; nothing makes a vanished shard anew, so a shard present
after the read was present during it). The scripts' KEYS and ARGV are written once, beside the
function that builds their command."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ._backend import BitsBackend, check_size
from ._names import FilterKeys, StageGuard, WindowKeys
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


class RingScripts:
    """A windowed filter's reads of its whole ring (its live generations'
    counts, a dump's bits) and a restore's upload, as scripts (below): they
    run once a call, not once a batch, so they serve the module backend too,
    over the same keys, and the module has no commands of its own for them."""

    def window_live_job(self, w: WindowKeys, newest: int = -1, epoch: str = "") -> Job:
        return Job(w.meta.encode(), _WINDOW_LIVE, (w.meta, *w.bits, *w.gens),
                   (w.nbytes, repr(w.span), len(w.bits), w.sig, newest, epoch))

    def window_dump_job(self, w: WindowKeys, newest: int = -1, epoch: str = "") -> Job:
        return Job(w.meta.encode(), _WINDOW_LIVE, (w.meta, *w.bits, *w.gens),
                   (w.nbytes, repr(w.span), len(w.bits), w.sig, newest, epoch, 1))

    def window_upload_job(self, w: WindowKeys, generations: Sequence[tuple[int, int, bytes]]) -> Job:
        flat = [x for number, count, bits in generations for x in (number, count, bits)]
        # (a token of its own, as the clear's: the upload, re-sent after a lost reply, answers as it did)
        return Job(w.meta.encode(), _WINDOW_UPLOAD, (w.meta, *w.bits, *w.gens),
                   (w.nbytes, repr(w.span), len(w.bits), w.sig, w.margin_ms, os.urandom(8).hex(), *flat))

    def window_clear_job(self, w: WindowKeys) -> Job:
        # (a token of its own: the script, re-sent after a lost reply, runs once)
        return Job(w.meta.encode(), _WINDOW_CLEAR, (w.meta, *w.bits, *w.gens),
                   (len(w.bits), w.sig, os.urandom(8).hex()))


class PlainBackend(RingScripts, BitsBackend):
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

    # -- a windowed filter: one script a chunk, over every slot of its ring (one hash tag) --

    no_windows = ""
    max_window_bits = 60_000  # bits tested or set per command, over all generations (as max_bits)

    def window_chunk_keys(self, w: WindowKeys) -> int:
        return max(1, min(self.max_keys, self.max_window_bits // (w.num_hashes * len(w.bits))))

    def window_add_job(self, w: WindowKeys, answer: str, ttl_ms: int, refresh: bool, body: bytes,
                       count: int, newest: int = -1, epoch: str = "") -> Job:
        return Job(w.meta.encode(), _WINDOW_ADD, (w.meta, answer, *w.bits, *w.gens),
                   (ttl_ms, MODE, w.num_hashes, w.nbytes, repr(w.span), len(w.bits), int(refresh), w.margin_ms, w.sig,
                    len(w.meta_fields), newest, epoch, *w.meta_fields), body, count, writes=True)

    def window_has_job(self, w: WindowKeys, body: bytes, count: int, newest: int = -1, epoch: str = "") -> Job:
        return Job(w.meta.encode(), _WINDOW_HAS, (w.meta, *w.bits, *w.gens),
                   (w.num_hashes, w.nbytes, repr(w.span), len(w.bits), w.sig, newest, epoch), body, count)


    def has_jobs(self, f: FilterKeys, shard: int, body: bytes,
                 count: int) -> tuple[list[Job], Callable[[list[Any]], npt.NDArray[np.bool_]]]:
        name, k = f.shards[shard], f.num_hashes

        def decode(replies: list[Any]) -> npt.NDArray[np.bool_]:
            check_size(name, f.nbytes[shard], replies[1])
            return np.asarray(np.asarray(replies[0], dtype=np.uint8).reshape(-1, k).all(axis=1))

        return [Job(name.encode(), b"BITFIELD_RO", (name,), (), body, count), Job(name.encode(), b"STRLEN", (name,))], \
            decode


# ---- a windowed filter (_windowed.py) -------------------------------------------------
# Every script reads the server's TIME itself: the server's clock, never a
# client's, decides the current generation, in the same step as the add.
# A slot's generation number is a hash field; a slot whose number is past
# the window (or that expired by its TTL) is not live. `ring` = G + 1.
_WINDOW_PRELUDE = r"""
local function fmt(n) return string.format('%.0f', n) end
-- sig is the parameters, '|', and the ident of the making the caller
-- attached to: the same parameters under another ident is a filter dropped
-- and made again since (REPLACED), never written to by an old handle.
local function meta_error(sig)
  local have = redis.call('HGET', KEYS[1], 'sig')
  if have and have ~= sig then
    local hp, sp = string.match(have, '^(.*)|[^|]*$'), string.match(sig, '^(.*)|[^|]*$')
    if hp and hp == sp then return redis.error_reply('REPLACED ' .. KEYS[1]) end
    return redis.error_reply('MISMATCH ' .. KEYS[1])
  end
  return nil
end
-- The current generation, floor(t / span), and each slot's number; never
-- before the newest in the ring (a server clock stepped back, or a replica
-- promoted with a slower one, leaves adds in the newest generation). A
-- slot whose bits are there without its number (evicted, deleted) is lost,
-- never read as empty: its generation may be live (third result: its key).
-- The meta (KEYS[1]) records the generation each slot started ('slot<i>'),
-- so a live generation whose bits and record were both lost (evicted) is
-- known lost, not read as never started.
-- A generation number or a slot record: a decimal integer in [0, 2**53), as
-- the scripts write them, or the script stops with an error (read before any
-- write; a number past 2**53 would make every generation read as expired).
local function whole(key, field)
  local v = redis.call('HGET', key, field)
  if v and not (string.match(v, '^%d+$') and (v == '0' or string.sub(v, 1, 1) ~= '0')
                and (#v < 16 or (#v == 16 and v < '9007199254740992'))) then
    error(redis.error_reply('WRONGTYPE bloomline: ' .. key .. ' ' .. field .. ' is no integer in [0, 2**53)'))
  end
  return v and tonumber(v)
end
local function now_and_ring(off, ring, span)
  local t = redis.call('TIME')
  local c = math.floor((tonumber(t[1]) + tonumber(t[2]) / 1000000) / span)
  local numbers, started = {}, {}
  for i = 0, ring - 1 do
    local n = whole(KEYS[off + ring + i], 'number')
    if n then
      numbers[i] = n
      if numbers[i] > c then c = numbers[i] end
    elseif redis.call('EXISTS', KEYS[off + i]) == 1 then
      return c, numbers, KEYS[off + ring + i]
    end
    local s = whole(KEYS[1], 'slot' .. i)
    if s then
      started[i] = s
      if started[i] > c then c = started[i] end
    end
  end
  for i = 0, ring - 1 do
    if started[i] and started[i] > c - ring and numbers[i] ~= started[i] then
      return c, numbers, KEYS[off + ring + i]
    end
  end
  return c, numbers, nil
end
-- A live slot's bits must be there at their size: evicted or deleted is an
-- error, never read as an empty generation.
local function bits_error(key, size)
  local len = redis.call('STRLEN', key)
  if len == size then return nil end
  return redis.error_reply((len == 0 and 'MISSING ' or 'WRONGSIZE ') .. key)
end
-- A meta's epoch: its making (the server's TIME when it was made), then
-- after a clear '/' and the clear's mark (seconds.microseconds; nil: none).
-- An add's reply (and its kept answer) names the epoch, then '#' and the
-- start of the generation it added to (its gen's 'start': the id of the add
-- that started it), which a handle sends back as it sent the epoch.
local function bare(e) return string.match(e, '^[^#]*') end
local function start_of(e) return string.match(e, '#(.*)$') end
local function making(e) return string.match(bare(e), '^[^/]*') end
local function clear_mark(e)
  local s, u = string.match(bare(e), '^[^/]*/(%d+)%.(%d+)$')
  if s then return tonumber(s), tonumber(u) end
  return nil
end
local function cleared(e)
  local s, u = clear_mark(e)
  if s then return s * 1000000 + u end
  return -1
end
-- While the generation the caller added to (mine, under the meta's epoch
-- sent) lives, an add or a lookup that would not see its keys is refused:
-- a meta gone or of another making is the filter lost whole (meta and ring:
-- evicted, deleted) and perhaps made again by another writer; the same
-- epoch with that generation gone from its slot is the ring lost under a
-- kept meta (a restart from an older snapshot, a promoted replica that
-- lacks it), and so is that generation there with another start (lost,
-- then started again by another writer). Either way its keys would read new again. The same making
-- cleared since: forgotten on purpose; an older clear mark (or none) than
-- the caller's: the server went back past a clear (an older snapshot, a
-- replica), and with it the caller's generation. off: KEYS[off] is bits_0.
-- (MISSING: the meta is gone; REMADE: it is there, of another making or
-- older than the caller's clear.)
local function mine_lost(c, numbers, ring, mine, sent, off)
  if mine < 0 or mine <= c - ring then return nil end
  local epoch = redis.call('HGET', KEYS[1], 'epoch')
  if not epoch then return redis.error_reply('MISSING ' .. KEYS[1]) end
  if making(sent) ~= making(epoch) or cleared(epoch) < cleared(sent) then
    return redis.error_reply('REMADE ' .. KEYS[1])
  end
  if bare(sent) == epoch then
    local gen = KEYS[off + ring + mine % ring]
    if numbers[mine % ring] ~= mine then return redis.error_reply('MISSING ' .. gen) end
    local began = start_of(sent)
    if began and redis.call('HGET', gen, 'start') ~= began then return redis.error_reply('MISSING ' .. gen) end
  end
  return nil
end
-- The meta expires with the newest generation: gone with the ring when the
-- fleet was idle, an add makes it again; gone while a generation lives (one
-- whose keys remain), lost, for a lookup as for an add (its slot records
-- went with it, so the ring alone tells).
local function meta_lost(c, numbers, ring)
  if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
  for i = 0, ring - 1 do
    if numbers[i] and numbers[i] > c - ring then return redis.error_reply('MISSING ' .. KEYS[1]) end
  end
  return nil
end
"""

# KEYS: meta, answer, bits_0 .. bits_G, gen_0 .. gen_G
# ARGV: ttl_ms, mode, k, bytes, span, ring, refresh, margin_ms, sig, m, the
#       newest generation the caller has seen added to (-1: none), the
#       epoch of the meta it added under, the meta's m arguments (field,
#       value, ...), then the operands (SET u1)
_WINDOW_ADD = Script(_WINDOW_PRELUDE + r"""
local e = meta_error(ARGV[9])
if e then return e end
local kept = redis.call('GET', KEYS[2])
if kept then
  -- kept as answer|generation|epoch: the re-sender learns what the lost reply
  -- said. One kept under another making of the meta (the filter lost, or
  -- deleted, and made again since) is no answer of this filter: the add runs.
  local a, g, ep = string.match(kept, '^([^|]*)|(-?%d+)|(.*)$')
  if not a then return {kept, -1, '-1', ''} end
  local now = redis.call('HGET', KEYS[1], 'epoch')
  if now and making(now) == making(ep) then return {a, -1, g, ep} end
end
local size, span, ring = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local c, numbers, lost = now_and_ring(3, ring, span)
if lost then return redis.error_reply('MISSING ' .. lost) end
local finish = math.ceil((c + ring) * span * 1000) + tonumber(ARGV[8])
local m = tonumber(ARGV[10])
local mine = tonumber(ARGV[11])  -- the newest generation this caller added to
e = mine_lost(c, numbers, ring, mine, ARGV[12], 3) or meta_lost(c, numbers, ring)
if e then return e end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 13, 12 + m))
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'epoch', t[1] .. '.' .. t[2])
end
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch or epoch == '' then  -- (every making writes one: a meta without it is damaged)
  return redis.error_reply('WRONGTYPE bloomline: ' .. KEYS[1] .. ' has no epoch')
end
redis.call('PEXPIREAT', KEYS[1], finish)
local cur = c % ring
local ck, cg = KEYS[3 + cur], KEYS[3 + ring + cur]
if numbers[cur] ~= c then
  -- Generation c starts in the slot of c - ring, expired: its life is its
  -- ring slices and the margin, after which the server deletes it.
  redis.call('DEL', ck, cg)
  redis.call('SETRANGE', ck, size - 1, '\0')
  -- start: the id of this add's batch and chunk (its answer's name) and the
  -- server's clock, unique to this run of the script: one re-sent after the
  -- generation it started was lost starts it under another (the handles
  -- that added to the lost one are refused). Replicas and the AOF get the
  -- HSET as written (a script replicates its effects).
  local t = redis.call('TIME')
  redis.call('HSET', cg, 'number', fmt(c), 'count', '0', 'start', string.match(KEYS[2], '[^:]*$') .. '@' .. t[1] .. '.' .. t[2])
  redis.call('HSET', KEYS[1], 'slot' .. cur, fmt(c))
  redis.call('PEXPIREAT', ck, finish)
  redis.call('PEXPIREAT', cg, finish)
else
  e = bits_error(ck, size)
  if e then return e end
end
local older = {}
for i = 0, ring - 1 do
  if i ~= cur and numbers[i] and numbers[i] > c - ring and numbers[i] < c then
    e = bits_error(KEYS[3 + i], size)
    if e then return e end
    older[#older + 1] = KEYS[3 + i]
  end
end
local k = tonumber(ARGV[3])
local per, first = 4 * k, 13 + m
local keys = (#ARGV - first + 1) / per
local refresh, unsure = ARGV[7] == '1', ARGV[2] == 'R'
local step = math.max(1, math.floor(7000 / per))
local out, added, done = {}, 0, 0
while done < keys do
  local take = math.min(step, keys - done)
  local a = first + done * per
  local seen = {}
  if #older > 0 then
    local gets = {}
    for j = 0, take * k - 1 do
      gets[3 * j + 1], gets[3 * j + 2], gets[3 * j + 3] = 'GET', 'u1', ARGV[a + 4 * j + 2]
    end
    for _, g in ipairs(older) do
      local bits = redis.call('BITFIELD_RO', g, unpack(gets))
      for i = 0, take - 1 do
        if not seen[i] then
          local all = true
          for j = i * k + 1, i * k + k do
            if bits[j] == 0 then all = false break end
          end
          seen[i] = all
        end
      end
    end
  end
  local which, old = {}, {}
  if refresh then
    for i = 0, take - 1 do which[i + 1] = i end
    old = redis.call('BITFIELD', ck, unpack(ARGV, a, a + take * per - 1))
  else
    local sets = {}
    for i = 0, take - 1 do
      if not seen[i] then
        which[#which + 1] = i
        for j = a + i * per, a + i * per + per - 1 do sets[#sets + 1] = ARGV[j] end
      end
    end
    if #sets > 0 then old = redis.call('BITFIELD', ck, unpack(sets)) end
  end
  local fresh = {}
  for w, i in ipairs(which) do
    for j = (w - 1) * k + 1, w * k do
      if old[j] == 0 then fresh[i] = true break end
    end
  end
  for i = 0, take - 1 do
    if fresh[i] then added = added + 1 end
    if fresh[i] and not seen[i] then out[#out + 1] = '1'
    elseif unsure then out[#out + 1] = '?'
    else out[#out + 1] = '0' end
  end
  done = done + take
end
local answer = table.concat(out)
local count = redis.call('HINCRBY', cg, 'count', added)
local began = redis.call('HGET', cg, 'start')  -- (none in a generation an earlier version started)
if began then epoch = epoch .. '#' .. began end
redis.call('SET', KEYS[2], answer .. '|' .. fmt(c) .. '|' .. epoch, 'PX', ARGV[1])
return {answer, count, fmt(c), epoch}
""")

# KEYS: meta, bits_0 .. bits_G, gen_0 .. gen_G
# ARGV: k, bytes, span, ring, sig, the newest generation the caller added
#       to (-1: none) and the meta's epoch then (as the add's), then the
#       operands (GET u1)
_WINDOW_HAS = Script(_WINDOW_PRELUDE + r"""
local e = meta_error(ARGV[5])
if e then return e end
local k, size, span, ring = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local c, numbers, lost = now_and_ring(2, ring, span)
if lost then return redis.error_reply('MISSING ' .. lost) end
e = mine_lost(c, numbers, ring, tonumber(ARGV[6]), ARGV[7], 2) or meta_lost(c, numbers, ring)
if e then return e end
local live = {}
for i = 0, ring - 1 do
  if numbers[i] and numbers[i] > c - ring then
    e = bits_error(KEYS[2 + i], size)
    if e then return e end
    live[#live + 1] = KEYS[2 + i]
  end
end
local per, first = 3 * k, 8
local keys = (#ARGV - first + 1) / per
local step = math.max(1, math.floor(7000 / per))
local out, done = {}, 0
while done < keys do
  local take = math.min(step, keys - done)
  local a = first + done * per
  local hit = {}
  for _, g in ipairs(live) do
    local bits = redis.call('BITFIELD_RO', g, unpack(ARGV, a, a + take * per - 1))
    for i = 0, take - 1 do
      if not hit[i] then
        local all = true
        for j = i * k + 1, i * k + k do
          if bits[j] == 0 then all = false break end
        end
        hit[i] = all
      end
    end
  end
  for i = 0, take - 1 do out[#out + 1] = hit[i] and '1' or '0' end
  done = done + take
end
return {table.concat(out), fmt(c)}
""")

# KEYS: meta, bits_0 .. bits_G, gen_0 .. gen_G
# ARGV: bytes, span, ring, sig, newest, epoch (as a lookup's)[, '1']
# Each live generation's [slot, number, count, bits set]; with '1', its
# bits themselves in place of their count (a dump: one moment of the ring).
_WINDOW_LIVE = Script(_WINDOW_PRELUDE + r"""
local e = meta_error(ARGV[4])
if e then return e end
local size, span, ring = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local c, numbers, lost = now_and_ring(2, ring, span)
if lost then return redis.error_reply('MISSING ' .. lost) end
e = mine_lost(c, numbers, ring, tonumber(ARGV[5]), ARGV[6], 2) or meta_lost(c, numbers, ring)
if e then return e end
local out = {fmt(c)}
for i = 0, ring - 1 do
  if numbers[i] and numbers[i] > c - ring then
    e = bits_error(KEYS[2 + i], size)
    if e then return e end
    out[#out + 1] = {i, fmt(numbers[i]), redis.call('HGET', KEYS[2 + ring + i], 'count') or '0',
                     redis.call(ARGV[7] == '1' and 'GET' or 'BITCOUNT', KEYS[2 + i])}
  end
end
return out
""")

# KEYS: meta, bits_0 .. bits_G, gen_0 .. gen_G
# ARGV: bytes, span, ring, sig, margin_ms, token, then per generation: number, count, bits
_WINDOW_UPLOAD = Script(_WINDOW_PRELUDE + r"""
local e = meta_error(ARGV[4])
if e then return e end
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('MISSING ' .. KEYS[1]) end
local size, span, ring, margin = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
local c, numbers, lost = now_and_ring(2, ring, span)
if lost then return redis.error_reply('MISSING ' .. lost) end
-- ARGV[6]: this upload's token. A re-send after a lost reply finds it in the
-- meta when the first send ran: that upload is this one, not another writer's.
local done = redis.call('HGET', KEYS[1], 'restored_by')
if done and string.match(done, '^[^:]*') == ARGV[6] then
  return {fmt(c), tonumber(string.match(done, ':(%d+)$'))}
end
for i = 0, ring - 1 do
  if numbers[i] or redis.call('EXISTS', KEYS[2 + i]) == 1 or redis.call('HEXISTS', KEYS[1], 'slot' .. i) == 1 then
    return redis.error_reply('TAKEN ' .. KEYS[1])
  end
end
for j = 7, #ARGV, 3 do
  if tonumber(ARGV[j]) > c + 1 then return redis.error_reply('AHEAD ' .. ARGV[j] .. ' ' .. fmt(c)) end
end
local written, newest = 0, c
for j = 7, #ARGV, 3 do
  local n = tonumber(ARGV[j])
  if n > c - ring then
    local s = n % ring
    local finish = math.ceil((n + ring) * span * 1000) + margin
    redis.call('SET', KEYS[2 + s], ARGV[j + 2])
    redis.call('HSET', KEYS[2 + ring + s], 'number', fmt(n), 'count', ARGV[j + 1], 'start', 'restore.' .. ARGV[6])
    redis.call('HSET', KEYS[1], 'slot' .. s, fmt(n))
    redis.call('PEXPIREAT', KEYS[2 + s], finish)
    redis.call('PEXPIREAT', KEYS[2 + ring + s], finish)
    if n > newest then newest = n end
    written = written + 1
  end
end
redis.call('HSET', KEYS[1], 'restored_by', ARGV[6] .. ':' .. written)
redis.call('PEXPIREAT', KEYS[1], math.ceil((newest + ring) * span * 1000) + margin)
return {fmt(c), written}
""")


# KEYS: meta, bits_0 .. bits_G, gen_0 .. gen_G    ARGV: ring, sig
# One step, so that no add starts a generation between its parts (and has
# it deleted under a meta that records it: every add refused until the meta
# expires). The meta's epoch gains a mark of this clear: a handle whose
# newest generation was deleted here goes on (the keys are forgotten on
# purpose), where one whose generation vanished otherwise is refused.
_WINDOW_CLEAR = Script(_WINDOW_PRELUDE + r"""
local e = meta_error(ARGV[2])
if e then return e end
-- ARGV[3]: this clear's token. A re-send after a lost reply finds it in the
-- meta when the first send ran, and wipes nothing again (adds since are kept).
if redis.call('HGET', KEYS[1], 'cleared_by') == ARGV[3] then return 1 end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch then
  for i = 0, tonumber(ARGV[1]) - 1 do redis.call('HDEL', KEYS[1], 'slot' .. i) end
  local t = redis.call('TIME')
  local s, u = tonumber(t[1]), tonumber(t[2])
  -- The mark only moves on: a clear on a server whose clock is behind the
  -- last clear's (a promoted replica) marks just after it, never before.
  local ps, pu = clear_mark(epoch)
  if ps and (ps > s or (ps == s and pu >= u)) then
    s, u = ps, pu + 1
    if u >= 1000000 then s, u = s + 1, 0 end
  end
  redis.call('HSET', KEYS[1], 'epoch', string.match(epoch, '^[^/]*') .. '/' .. s .. '.' .. u,
             'cleared_by', ARGV[3])
end
return 1
""")
