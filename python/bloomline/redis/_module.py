"""The "module" backend: bloomline's own Redis module (cpp/redis/module.cpp),
which tests and sets a batch's positions in the string's memory. Each
command's arguments, in the order the module reads them, are written here
and only here (the module's file has the same order in its comments)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ._backend import NEW, ONE, BitsBackend, FilterKeys, Part, StageGuard
from ._wire import MODE, Job


class ModuleBackend(BitsBackend):
    name = "module"
    max_keys = 100_000  # about 12 ms of the server's time for an add
    form_add = form_has = "positions"

    # A single key's positions blob (redis_key) is the command's last
    # argument as it is, framed with the others in one go.
    def add_one(self, f: FilterKeys, key: Any, batch_id: str, ttl_ms: int) -> Part:
        s, blob, _ = self._key(f, key, "positions")
        return Part([self.add_job(f, s, f"{f.answers[s]}{batch_id}.0", ttl_ms, blob, -1)], ONE, count_key=f.counts[s])

    def has_one(self, f: FilterKeys, key: Any) -> Part:
        s, blob, _ = self._key(f, key, "positions")
        jobs, decode = self.has_jobs(f, s, blob, -1)
        return Part(jobs, ONE, decode=decode)

    def add_job(self, f: FilterKeys, shard: int, answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        # BLOOMLINE.ADD shard count answer ttl_ms mode positions
        # (count -1: body is the positions blob itself, the last argument)
        name = f.shards[shard]
        if count < 0:
            return Job(name.encode(), b"BLOOMLINE.ADD", (name, f.counts[shard], answer), (ttl_ms, MODE, body),
                       writes=True)
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
        # BLOOMLINE.HAS shard positions (count -1: body is the blob itself)
        name = f.shards[shard]
        job = (Job(name.encode(), b"BLOOMLINE.HAS", (name,), (body,)) if count < 0
               else Job(name.encode(), b"BLOOMLINE.HAS", (name,), (), body, count))
        return [job], lambda replies: np.asarray(np.frombuffer(replies[0], dtype=np.uint8) == NEW)
