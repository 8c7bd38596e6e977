"""Filters that travel between this process and Redis: a local BloomFilter
uploaded to a new Redis filter (its bits copied unchanged, byte for byte
the shards' contents)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .._core import BloomFilter
from ._wire import Job

if TYPE_CHECKING:
    from ._filter import RedisBloomFilter

_PIECE = 64 * 2**20  # SETRANGE in 64 MB pieces: no single huge request


def upload(cls: type[RedisBloomFilter], bf: BloomFilter, client: Any, key: str, *, shard_bits: int, backend: str,
           retries: int, answer_ttl_ms: Optional[int]) -> RedisBloomFilter:
    """A new Redis filter at key holding bf's bits (RedisBloomFilter.from_filter)."""
    if bf.capacity is None or bf.error_rate is None:
        raise ValueError("from_filter needs a filter built with a capacity and error_rate (not from_params)")
    if backend == "bf":
        raise ValueError("from_filter copies bits: backend 'bf' keeps RedisBloom's own data")
    if client.exists(f"{key}:meta"):
        raise ValueError(f"a filter already exists at key {key!r}; delete() it first")
    rf = cls(client, key, bf.capacity, bf.error_rate, layout=bf.layout, seed=bf.seed, shard_bits=shard_bits,
             backend=backend, retries=retries, answer_ttl_ms=answer_ttl_ms)
    if (rf.num_bits, rf.num_hashes) != (bf.num_bits, bf.num_hashes):  # pragma: no cover - same sizing math
        raise ValueError("the Redis filter's geometry differs from the local one")
    keys = rf._keys
    data = memoryview(bf).cast("B")
    per = keys.shard_bits // 8
    jobs, ones = [], []
    for i, shard in enumerate(keys.shards):
        part = data[i * per : i * per + keys.nbytes[i]]
        for start in range(0, len(part), _PIECE):
            piece = bytes(part[start : start + _PIECE])
            if piece.strip(b"\x00"):
                jobs.append(Job(shard.encode(), b"SETRANGE", (shard,), (start, piece)))
        ones.append(int(np.unpackbits(np.frombuffer(part, dtype=np.uint8)).sum()))
    # Each shard's count: its share of the filter's count, by its bits.
    total = sum(ones) or 1
    jobs += [Job(c.encode(), b"SET", (c,), (round(bf.insert_count * n / total),)) for c, n in zip(keys.counts, ones)]
    rf._sender.each(jobs)
    return rf
