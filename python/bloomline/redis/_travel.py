"""Filters that travel: a local BloomFilter uploaded to a new Redis filter,
and any Redis filter or chain dumped to a bloomline file and restored, on
the same server or another (a cluster included). The file format is the
local one (docs/FORMAT.md): a fixed filter is kind 1, a chain kind 3, so a
dump also loads locally (BloomFilter.load or ScalableBloomFilter.load, bloomline.from_bytes). The bits travel as
they are, byte for byte the shards' contents; a filter kept by the server's
own BF commands (backend 'bf') holds RedisBloom's data, not bloomline's
bits, and does not travel this way (RedisBloom has BF.SCANDUMP for it)."""

from __future__ import annotations

import math
import os
import warnings
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, Union


from .. import _core, from_bytes
from .._core import BloomFilter, CapacityWarning
from ..scalable import ScalableBloomFilter
from ._filter import RedisBloomFilter
from ._names import client_of, tag_of_chain
from ._stages import RedisStages

if TYPE_CHECKING:
    from .._core import StrPath

_WINDOWED = ("key {key!r} holds a RedisWindowedFilter: dump and restore carry BloomFilters and chains, and a "
             "windowed filter's generations do not travel")
_NOISE = 0.03  # the bits' estimate of a stage's keys: within 3% of its capacity (tests/test_redis_faults.py)


def _honest_count(stage: BloomFilter, count: int, index: int, key: str) -> int:
    """A stage's count as restored: never below what its bits hold. A file
    whose count lags its bits (a dump taken while writers added, by an
    earlier bloomline) would let the stage take keys past its capacity; the
    bits' estimate, past the count by more than its noise, becomes the count,
    at most the capacity (the stage is then full and the chain grows). Bits
    that hold more than the capacity warn: that stage's false-positive rate
    is above its share."""
    capacity = stage.capacity or 0
    estimate = stage.approx_count
    if estimate <= count + _NOISE * capacity:
        return count
    if estimate > (1 + _NOISE) * capacity:
        warnings.warn(f"stage {index} of the chain restored at {key!r} holds about {estimate:,.0f} keys by its bits, "
                      f"past its capacity of {capacity:,} (the file's count said {count:,}): its false-positive rate "
                      "is above its share of the chain's; it takes no more keys", CapacityWarning, stacklevel=3)
    return max(count, min(capacity, math.ceil(estimate)))


def _what_is_at(client: Any, key: str) -> Optional[str]:
    """'filter', 'chain', 'windowed filter' or None: what a name holds in Redis."""
    store = RedisStages(client, key)
    if client.exists(f"{key}:meta"):
        return "filter"
    if client.hget(f"{tag_of_chain(key)}:meta", "kind") in (b"windowed", "windowed"):
        return "windowed filter"
    if client.exists(store.stages_key) or client.exists(store.chain_key):
        return "chain"
    return None


def attached_chain(store: Any, info: dict[str, str]) -> ScalableBloomFilter:
    """The chain kept in `store`, made with the parameters Redis holds for
    it (`info`, from store.info(): the hash at {key}:chain)."""
    return ScalableBloomFilter(int(info["initial_capacity"]), float(info["error_rate"]), growth=int(info["growth"]),
                               tightening=float(info["tightening"]), layout=info["layout"],  # type: ignore[arg-type]
                               seed=int(info["seed"]), store=store)


def dump(redis: Any, key: str, file: Union[StrPath, BinaryIO]) -> Union[BloomFilter, ScalableBloomFilter]:
    """Write the Redis filter or chain at `key` to a bloomline file (a path,
    written atomically, or a binary file object); returns the local copy
    that was written."""
    client = client_of(redis)
    found = _what_is_at(client, key)
    if found is None:
        raise ValueError(f"no filter or chain at key {key!r}")
    if found == "windowed filter":
        raise ValueError(_WINDOWED.format(key=key))
    local: Union[BloomFilter, ScalableBloomFilter]
    if found == "filter":
        local = RedisBloomFilter(client, key).to_filter()  # (a backend without bloomline's bits refuses)
        data = local.to_bytes()
    else:
        store = RedisStages(client, key)
        info = store.info()
        if info is None:
            raise ValueError(f"the chain at key {key!r} has no parameters in Redis ({store.chain_key!r}): it was "
                             "made by an earlier bloomline; copy its stages one by one (RedisBloomFilter.to_filter)")
        chain = attached_chain(store, info)
        taken = [store.snapshot(i) for i in range(chain.num_stages)]
        data = _core.encode_chain(chain.rule, chain.layout, chain.seed, [s for s, _ in taken], [c for _, c in taken])
        local = ScalableBloomFilter.from_bytes(data)
    if isinstance(file, (str, bytes, os.PathLike)):
        with _core.AtomicWriter(os.fspath(file)) as out:
            out.write(data)
            out.commit()
    else:
        file.write(data)
    return local


def restore(file: Union[StrPath, BinaryIO, bytes], redis: Any, key: str, *, replace: bool = False,
            backend: str = "auto") -> Union[RedisBloomFilter, ScalableBloomFilter]:
    """Put a bloomline file (a BloomFilter, or a ScalableBloomFilter: what
    dump writes) into Redis at `key`, as a filter or a chain answering
    exactly as the file does. A key that holds a filter or chain is refused
    unless replace=True (it is then dropped first)."""
    client = client_of(redis)
    if isinstance(file, (bytes, bytearray, memoryview)):
        data = bytes(file)
    elif isinstance(file, (str, os.PathLike)):
        data = _core.read_file(file)
    else:
        data = file.read()
    local = from_bytes(data)
    if not isinstance(local, (BloomFilter, ScalableBloomFilter)):
        raise ValueError(f"the file holds a {type(local).__name__}: Redis keeps BloomFilters and "
                         "ScalableBloomFilters")
    found = _what_is_at(client, key)
    if found == "windowed filter":
        raise ValueError(_WINDOWED.format(key=key) + " (RedisWindowedFilter.delete() drops it)")
    if found is not None and not replace:
        raise ValueError(f"a {found} already exists at key {key!r}: pass replace=True (--replace) to drop it first")
    if found == "filter":
        RedisBloomFilter.drop(client, key)
    elif found == "chain":
        RedisStages(client, key).reset()
    if isinstance(local, BloomFilter):
        return RedisBloomFilter.from_filter(local, client, key, backend=backend)
    store = RedisStages(client, key, backend=backend)
    chain = ScalableBloomFilter(local.initial_capacity, local.error_rate, growth=local.growth,
                                tightening=local.tightening, layout=local.layout, seed=local.seed, store=store)
    for i, (stage, count) in enumerate(zip(local.stages, local._stage_counts)):
        if i:
            assert stage.capacity is not None and stage.error_rate is not None  # (a chain's stages have both)
            store.new_stage(i, stage.capacity, stage.error_rate, stage.layout, stage.seed)
        store.upload(i, stage, _honest_count(stage, count, i, key))
    chain._reload()
    return chain
