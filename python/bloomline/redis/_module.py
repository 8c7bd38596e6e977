"""The "module" backend: bloomline's own Redis module (cpp/redis/module.cpp),
which tests and sets a batch's positions in the string's memory. Each
command's arguments, in the order the module reads them, are written here
and only here (the module's file has the same order in its comments)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ._backend import NEW, BitsBackend
from ._names import FilterKeys, StageGuard
from ._wire import MODE, Job


class ModuleBackend(BitsBackend):
    name = "module"
    max_keys = 100_000  # one command holds the server briefly (benchmarks/NOTES.md, "Redis")
    form_add = form_has = "positions"
    no_windows = ("bloomline's module has no windowed command yet: pass backend 'plain' (or 'auto'), whose scripts "
                  "run on any Redis, this one included")

    def add_job(self, f: FilterKeys, shard: int, answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        # BLOOMLINE.ADD shard count answer ttl_ms mode positions
        name = f.shards[shard]
        return Job(name.encode(), b"BLOOMLINE.ADD", (name, f.counts[shard], answer), (ttl_ms, MODE), body, count,
                   writes=True)

    def stage_job(self, f: FilterKeys, guard: StageGuard, shards: list[int], keys_per_shard: list[int],
                  answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        # BLOOMLINE.CADD stages count answer shard_1 .. shard_n expected capacity ttl_ms mode positions
        return Job(guard.stages.encode(), b"BLOOMLINE.CADD",
                   (guard.stages, guard.count, answer, *(f.shards[s] for s in shards)),
                   (guard.expected, guard.capacity, ttl_ms, MODE), body, count, writes=True)

    def has_jobs(self, f: FilterKeys, shard: int, body: bytes,
                 count: int) -> tuple[list[Job], Callable[[list[Any]], npt.NDArray[np.bool_]]]:
        # BLOOMLINE.HAS shard positions
        name = f.shards[shard]
        job = Job(name.encode(), b"BLOOMLINE.HAS", (name,), (), body, count)
        return [job], lambda replies: np.asarray(np.frombuffer(replies[0], dtype=np.uint8) == NEW)
