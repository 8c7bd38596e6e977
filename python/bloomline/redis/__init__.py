"""Bloom filters shared by many processes through Redis.

``RedisBloomFilter`` is one filter of fixed size; ``RedisStages`` keeps a
growing chain's stages (``ScalableBloomFilter(..., store=RedisStages(...))``).
Three backends, the same answers:

``"module"``
    bloomline's own Redis module (``redis-server --loadmodule $(bloomline
    redis-module)``): each batch is one command per shard whose one bytes
    argument holds the positions the client computed (docs/FORMAT.md,
    "Positions"), tested and set in the string's memory.
``"plain"``
    Any Redis, no module: adds are one script call per shard, its arguments
    the batch's ``BITFIELD SET u1`` operations encoded by the core; lookups
    one ``BITFIELD_RO`` per shard.
``"bf"``
    The server's own Bloom commands (RedisBloom, Redis 8, valkey-bloom):
    ``BF.RESERVE`` with ``EXPANSION`` (it grows), ``BF.MADD``, ``BF.MEXISTS``.

``backend="auto"`` (the default) picks the module when the server has it,
else plain. The "module" and "plain" backends keep the bits in plain Redis
strings, byte for byte a local filter's payload, and either reads what the
other wrote.

**The promise, through faults.** A key is reported new to exactly one
caller, or the call raises; never "seen" for a key nobody added, never a
silent fresh start:

- a batch has one id for its life; its every re-send (a dropped reply, a
  timeout, NOSCRIPT, MOVED, ASK) is the same command, and the server keeps
  each shard's answer under that id for ``answer_ttl_ms``, longer than the
  client's retry window;
- a re-send whose kept answer is gone cannot be told from a first send:
  keys it finds present are answered "unknown", and the call raises
  ``UnknownOutcome`` (its ``unknown`` array says which keys to treat as new);
- every error an add raises, whatever its cause (OOM, READONLY, a lost
  connection...), carries ``new`` and ``unknown`` for the caller's batch,
  its class unchanged;
- a key that should exist and does not (evicted, expired, deleted) raises
  ``MissingKeyError``, on every backend; attaching warns
  (``EvictionWarning``) when the server's ``maxmemory-policy`` may evict;
- creating a filter and growing a chain are idempotent: a re-sent step
  finishes the job;
- a chain's stage is declared full by the server, in the same step as the
  add, so N processes keep the false-positive bound one process keeps;
- a fixed filter past its capacity warns once (``bloomline.CapacityWarning``).

docs/design/redis.md has the protocol; each
module here is one part of it, each importing only those before it:
``_wire`` (framing, routing, re-sends), ``_backend`` (the interface, the
outcome of an add) and one module per backend, ``_registry`` (which
backend), ``_meta`` (parameters, creation), ``_handle`` (a filter's keys,
backend and sender, as both users hold them), ``_filter``
(RedisBloomFilter), ``_stages`` (RedisStages), ``_windowed`` (RedisWindowedFilter: "seen
within the last window", the server's clock deciding the generation),
``_travel`` (dump, restore).

**Cluster.** Shards are whole runs of 512-bit blocks under Redis's 512 MB
string limit, so filters of more than ``2**32`` bits work; shard names hash
to different slots, so a cluster spreads them over its masters. A chain's
keys share one hash tag (one node). The standard layout spreads a key's
bits over the whole array and so is kept in one shard (at most ``2**32``
bits).
"""

from __future__ import annotations

from .._optional import require

require("redis", "bloomline.redis")  # before the modules that import it: the message names the extra

from .._redis_module import module_path
from ._errors import EvictionWarning, MissingKeyError, ModuleMissing, NotDurable, UnknownOutcome
from ._filter import RedisBloomFilter
from ._meta import DEFAULT_SHARD_BITS
from ._stages import RedisStages
from ._travel import dump, restore
from ._windowed import RedisWindowedFilter, delete_windowed

__all__ = ["DEFAULT_SHARD_BITS", "EvictionWarning", "MissingKeyError", "ModuleMissing", "NotDurable",
           "RedisBloomFilter", "RedisStages", "RedisWindowedFilter", "UnknownOutcome", "delete_windowed", "dump",
           "module_path", "restore"]
