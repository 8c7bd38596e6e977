"""Filters that travel: a local BloomFilter uploaded to a new Redis filter,
and any Redis filter, chain or windowed filter dumped to a bloomline file
and restored, on the same server or another (a cluster included). The file
format is the local one (docs/FORMAT.md): a fixed filter is kind 1, a chain
kind 3, a windowed filter kind 4 (_window_travel.py), so a dump also loads
locally (BloomFilter.load, ScalableBloomFilter.load, WindowedBloomFilter.load,
bloomline.from_bytes). The bits travel as
they are, byte for byte the shards' contents; a filter kept by the server's
own BF commands (backend 'bf') holds RedisBloom's data, not bloomline's
bits, and does not travel this way (RedisBloom has BF.SCANDUMP for it)."""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, Union


from .. import _core, from_bytes
from .._core import BloomFilter, CapacityWarning
from ..scalable import ScalableBloomFilter
from ..windowed import WindowedBloomFilter, read_as_saved
from ._filter import RedisBloomFilter
from ._names import client_of, kinds_at, tag_of_chain
from ._stages import RedisStages
from ._windowed import RedisWindowedFilter

if TYPE_CHECKING:
    from .._core import StrPath

_NOISE = 0.03  # the bits' estimate of a stage's keys: within 3% of its capacity (tests/test_redis_faults.py)


def _honest_count(stage: BloomFilter, count: int, index: int, key: str) -> tuple[int, Optional[str]]:
    """A stage's count as restored, and the capacity warning it calls for
    (None if none): never below what its bits hold. A file whose count lags
    its bits (a dump taken while writers added, by an earlier bloomline)
    would let the stage take keys past its capacity; the bits' estimate, past
    the count by more than its noise, becomes the count, at most the capacity
    (the stage is then full and the chain grows). Bits that hold more than
    the capacity call for a warning: that stage's false-positive rate is
    above its share. The caller warns once the chain is whole, so a warning
    made an error never leaves it half restored."""
    capacity = stage.capacity or 0
    estimate = stage.approx_count
    if estimate <= count + _NOISE * capacity:
        return count, None
    note = None
    if estimate > (1 + _NOISE) * capacity:
        note = (f"stage {index} of the chain restored at {key!r} holds about {estimate:,.0f} keys by its bits, "
                f"past its capacity of {capacity:,} (the file's count said {count:,}): its false-positive rate "
                "is above its share of the chain's; it takes no more keys")
    return max(count, min(capacity, math.ceil(estimate))), note


def _what_is_at(client: Any, key: str) -> Optional[str]:
    """'filter', 'windowed filter', 'chain' or None: what a name holds in Redis."""
    found = kinds_at(client, key)
    return found[0] if found else None


def attached_chain(store: Any, info: dict[str, str]) -> ScalableBloomFilter:
    """The chain kept in `store`, made with the parameters Redis holds for
    it (`info`, from store.info(): the hash at {key}:chain)."""
    return ScalableBloomFilter(int(info["initial_capacity"]), float(info["error_rate"]), growth=int(info["growth"]),
                               tightening=float(info["tightening"]), layout=info["layout"],  # type: ignore[arg-type]
                               seed=int(info["seed"]), store=store)


def attached_window(client: Any, key: str) -> RedisWindowedFilter:
    """A handle of the windowed filter at key, made with the parameters its meta holds."""
    meta = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
            for k, v in client.hgetall(f"{tag_of_chain(key)}:meta").items()}
    if meta.get("kind") != "windowed":
        raise ValueError(f"no windowed filter at key {key!r}")
    return RedisWindowedFilter(client, key, int(meta["capacity"]), float(meta["error_rate"]),
                               window=float(meta["window"]), generations=int(meta["generations"]),
                               layout=meta["layout"], seed=int(meta["seed"]))  # type: ignore[arg-type]


def _restore_window(data: bytes, client: Any, key: str, backend: str) -> RedisWindowedFilter:
    """A kind-4 file into a windowed filter made at key: the generations
    live by the server's clock; the filter is deleted again where the
    upload is refused (nothing is left half restored)."""
    capacity, error_rate, generations, window, layout, seed, live = _core.decode_window(data)
    h = RedisWindowedFilter(client, key, capacity, error_rate, window=window, generations=generations,
                            layout=layout, seed=seed, backend=backend)
    try:
        h._upload_generations([(number, f, count) for number, f, count in live])
    except BaseException:
        with contextlib.suppress(Exception):  # (the upload's error is the one that says what happened)
            h.delete()
        raise
    return h


def dump(redis: Any, key: str,
         file: Union[StrPath, BinaryIO]) -> Union[BloomFilter, ScalableBloomFilter, WindowedBloomFilter]:
    """Write the Redis filter, chain or windowed filter at `key` to a
    bloomline file (a path, written atomically, or a binary file object);
    returns the local copy that was written. A windowed filter's file holds
    the generations live by the server's clock, read in one step; loaded
    locally, it runs on the local clock."""
    client = client_of(redis)
    found = _what_is_at(client, key)
    if found is None:
        raise ValueError(f"no filter or chain at key {key!r}")
    local: Union[BloomFilter, ScalableBloomFilter, WindowedBloomFilter]
    if found == "windowed filter":
        # Its generations live by the server's clock, read in one step.
        data = attached_window(client, key)._to_filter_bytes()
        local = read_as_saved(WindowedBloomFilter, data, None)  # (numbered by the server's clock: read as it is)
    elif found == "filter":
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
            backend: str = "auto") -> Union[RedisBloomFilter, ScalableBloomFilter, RedisWindowedFilter]:
    """Put a bloomline file (a BloomFilter, a ScalableBloomFilter or a
    WindowedBloomFilter: what dump writes) into Redis at `key`, as a filter,
    a chain or a windowed filter answering exactly as the file does (a
    windowed file: its generations still live by the server's clock). A key
    that holds any of them is refused unless replace=True (it is then
    dropped first)."""
    client = client_of(redis)
    if isinstance(file, (bytes, bytearray, memoryview)):
        data = bytes(file)
    elif isinstance(file, (str, os.PathLike)):
        data = _core.read_file(file)
    else:
        data = file.read()
    # (a windowed file read as saved: the server's clock, not this one, decides what of it lives)
    windowed = _core.read_header(data)["kind"] == "WindowedBloomFilter"
    local = read_as_saved(WindowedBloomFilter, data, None) if windowed else from_bytes(data)
    if not isinstance(local, (BloomFilter, ScalableBloomFilter, WindowedBloomFilter)):
        raise ValueError(f"the file holds a {type(local).__name__}: Redis keeps BloomFilters, "
                         "ScalableBloomFilters and WindowedBloomFilters")
    found = _what_is_at(client, key)
    if found is not None and not replace:
        raise ValueError(f"a {found} already exists at key {key!r}: pass replace=True (--replace) to drop it first")
    if found == "filter":
        RedisBloomFilter.drop(client, key)
    elif found == "chain":
        RedisStages(client, key).reset()
    elif found == "windowed filter":
        attached_window(client, key).delete()
    if isinstance(local, WindowedBloomFilter):
        return _restore_window(data, client, key, backend)
    if isinstance(local, BloomFilter):
        return RedisBloomFilter.from_filter(local, client, key, backend=backend)
    return _restore_chain(local, client, key, backend)


def _restore_chain(local: ScalableBloomFilter, client: Any, key: str, backend: str) -> ScalableBloomFilter:
    """A chain made at key from a local one, stage by stage, whole at once
    (RedisStages.restoring); deleted again where a stage's upload fails
    (nothing is left half restored), unless another restore's chain is
    whole there by then. A stage past its capacity warns once the chain is
    whole."""
    honest = [_honest_count(stage, count, i, key) for i, (stage, count) in enumerate(zip(local.stages,
                                                                                           local._stage_counts))]
    store = RedisStages(client, key, backend=backend)
    store.restoring()  # (the chain appears whole: no crawler takes keys into a stage the upload overwrites)
    try:
        chain = ScalableBloomFilter(local.initial_capacity, local.error_rate, growth=local.growth,
                                    tightening=local.tightening, layout=local.layout, seed=local.seed, store=store)
        for i, (stage, (count, _)) in enumerate(zip(local.stages, honest)):
            if i:
                assert stage.capacity is not None and stage.error_rate is not None  # (a chain's stages have both)
                store.new_stage(i, stage.capacity, stage.error_rate, stage.layout, stage.seed)
            store.upload(i, stage, count)
        store.publish()
        chain._reload()
    except BaseException:
        with contextlib.suppress(Exception):  # (the upload's error is the one that says what happened)
            store.abandon()
        raise
    for _, note in honest:
        if note is not None:
            warnings.warn(note, CapacityWarning, stacklevel=3)
    return chain
