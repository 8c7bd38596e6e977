"""Names in Redis: the client a filter talks through, key names that share
a cluster slot, the ids that name a batch across processes and its
re-sends (docs/FORMAT.md, "Keys"), and the names of a filter's keys with
its geometry (a fixed filter or a chain's stage, a stage's guard, a
windowed filter's ring)."""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import redis as _redis

from .._forks import renew_locks_after_fork

if TYPE_CHECKING:
    from .._core import Layout


def client_of(redis: Any) -> Any:
    """A redis-py client, or one made from a URL. Replies are read as bytes
    (bits, answers, counts): a client made with decode_responses=True is
    given a sibling on the same server that does not decode (a Sentinel's
    client too: its sibling asks the same Sentinels for the same service)."""
    if isinstance(redis, str):
        return _redis.Redis.from_url(redis)
    if not redis.get_encoder().decode_responses:
        return redis
    pool = getattr(redis, "connection_pool", None)
    if pool is None:  # a cluster client: its nodes' settings are its own
        raise ValueError("redis: pass a client made with decode_responses=False (bloomline reads bytes), or a URL")
    # (a Sentinel pool names its own pool among its connections' settings: the sibling makes its own)
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kwargs.update(decode_responses=False, connection_class=pool.connection_class)
    if hasattr(pool, "service_name") and hasattr(pool, "sentinel_manager"):  # master_for / slave_for
        sibling = type(pool)(pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
                             check_connection=pool.check_connection, **kwargs)
    else:
        sibling = type(pool)(**kwargs)
    return _redis.Redis(connection_pool=sibling)


# ---- key names ------------------------------------------------------------------


def hash_tag(name: str) -> Optional[str]:
    """The part of a key name Redis Cluster hashes, if not the whole name:
    from the first '{' to the next '}', when not empty."""
    start = name.find("{")
    if start < 0:
        return None
    end = name.find("}", start + 1)
    return name[start + 1 : end] if end > start + 1 else None


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def routable(name: str) -> str:
    """name, unless its braces make it a key no other key can share a slot
    with ('a}b', 'x{}y'): then the name inside an escaped hash tag."""
    if hash_tag(name) is not None or ("{" not in name and "}" not in name):
        return name
    return "{" + _escape(name) + "}"


def sibling(route: str, suffix: str) -> str:
    """A key in the slot of `route` (a routable() name)."""
    return route + suffix if hash_tag(route) is not None else "{" + route + "}" + suffix


def tag_of_chain(key: str) -> str:
    """The hash tag every key of a chain in Redis starts with (one slot)."""
    return "{" + (key if "{" not in key and "}" not in key else _escape(key)) + "}"


def kinds_at(client: Any, key: str) -> list[str]:
    """What the name `key` holds in Redis: any of 'filter' (a
    RedisBloomFilter), 'windowed filter' and 'chain' (a RedisStages chain),
    in that order. A fixed filter's keys start with the name, a chain's and a
    windowed filter's with its hash tag (tag_of_chain), so all three could
    live side by side; the makers refuse that (refuse_other_kinds)."""
    tag = tag_of_chain(key)
    pipe = client.pipeline(transaction=False)
    pipe.exists(f"{key}:meta")
    pipe.hget(f"{tag}:meta", "kind")
    pipe.exists(f"{tag}:stages", f"{tag}:chain")
    fixed, windowed, chain = pipe.execute()
    found = ["filter"] if int(fixed) else []
    return found + (["windowed filter"] if windowed in (b"windowed", "windowed") else []) + (["chain"] if int(chain) else [])


def refuse_other_kinds(client: Any, key: str, kind: str) -> None:
    """ValueError if a `kind` would be made at `key` where another kind of
    filter is: a name holds one (dump, restore and `bloomline redis` find a
    filter by its name, and each kind's delete leaves the others' keys). One
    of `kind` already there is attached, whatever else an earlier bloomline
    made beside it."""
    found = kinds_at(client, key)
    others = [k for k in found if k != kind]
    if others and kind not in found:
        raise ValueError(f"a {others[0]} already exists at key {key!r}, so a {kind} cannot be made there: a name "
                         f"holds one kind of filter. Use another key, or delete the {others[0]} first")


class _BatchIds:
    """Batch ids unique across processes and time: a random prefix per
    process (made anew after a fork) and a counter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # (renewed in a forked child: a parent thread may hold it at the fork)
        renew_locks_after_fork(self, lambda ids: setattr(ids, "_lock", threading.Lock()))
        self._pid = -1
        self._prefix = ""
        self._count: Iterator[int] = iter(())

    def next(self) -> str:
        if self._pid != os.getpid():  # (a new process: a fork starts with one thread)
            with self._lock:
                if self._pid != os.getpid():
                    self._prefix, self._count = os.urandom(8).hex(), itertools.count()
                    self._pid = os.getpid()
        return f"{self._prefix}{next(self._count):x}"  # next() of a count is atomic under the GIL


batch_ids = _BatchIds()


@dataclass(frozen=True)
class FilterKeys:
    """A filter in Redis: its geometry and the names of its keys. shards[i]
    is a key of the filter's data (a bits backend's shard of nbytes[i]
    bytes; the server's own Bloom key for "bf"); counts[i] its count of new
    keys (a fixed filter keeps one per shard, so that each add updates its
    own in one step; a chain's stage one for the stage; "bf" none)."""

    name: str
    layout: Layout
    num_bits: int
    num_hashes: int
    seed: int
    shard_bits: int
    shards: tuple[str, ...] = ()
    nbytes: tuple[int, ...] = ()
    counts: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()  # each shard's answer-name prefix (a batch's id follows)

    @property
    def meta(self) -> str:
        return f"{self.name}:meta"

    @property
    def data(self) -> list[str]:
        """Every key of the filter but its meta (and its kept answers)."""
        return [*self.shards, *self.counts]


@dataclass(frozen=True)
class StageGuard:
    """What a stage add checks in the same step (a chain in Redis): the
    chain's stage count is `expected`, and the stage's count of new keys,
    at `count`, stays within `capacity`."""

    stages: str
    expected: int
    capacity: int
    count: str
    answers: str  # the prefix of the stage's answer keys


@dataclass(frozen=True)
class WindowKeys:
    """A windowed filter in Redis (_windowed.py): its geometry (every
    generation's, one string each), its ring's keys under one hash tag
    (bits[i] and gens[i], a hash of the generation number slot i holds and
    its count of new keys), the slice span in seconds, and the meta a
    writer makes again where it expired (sig: its parameters in one
    string, compared by every command)."""

    name: str
    meta: str
    bits: tuple[str, ...]
    gens: tuple[str, ...]
    num_bits: int
    num_hashes: int
    layout: Layout
    seed: int
    nbytes: int
    span: float
    margin_ms: int
    sig: str
    meta_fields: tuple[str, ...]

    @property
    def generations(self) -> int:
        return len(self.bits) - 1


def check_geometry(name: str, meta: dict[str, Any]) -> None:
    """A stored meta's geometry, as geometry() makes it: its fields whole
    numbers in range, and its shards exactly those num_bits needs. A meta
    changed by hand (HSET) is a ValueError naming the field, not an
    IndexError of a shard that is not there, nor shards read at sizes their
    filter never had."""
    def field(key: str, low: int, high: int) -> int:
        text = str(meta.get(key, ""))
        value = int(text) if text.isdigit() else -1
        if not low <= value <= high:
            raise ValueError(f"the filter at key {name!r} has a damaged meta: {key} must be a whole number in "
                             f"[{low}, {high}], got {text!r}")
        return value

    num_bits, shard_bits = field("num_bits", 1, 2**48), field("shard_bits", 512, 2**32)
    field("num_hashes", 1, 64)
    shards = field("shards", 1, 2**48)
    blocks = math.ceil(num_bits / 512)
    if shard_bits % 512 or shards != math.ceil(blocks * 512 / shard_bits):
        raise ValueError(f"the filter at key {name!r} has a damaged meta: {shards} shards of {shard_bits} bits do "
                         f"not hold num_bits {num_bits} as its filter was made")
