"""The "module" backend: bloomline's own Redis module (cpp/redis/module.cpp),
which tests and sets a batch's positions in the string's memory. Each
command's arguments, in the order the module reads them, are written here
and only here (the module's file has the same order in its comments)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ._backend import NEW, BitsBackend
from ._names import FilterKeys, StageGuard, WindowKeys
from ._plain import RingScripts
from ._wire import MODE, Job


class ModuleBackend(RingScripts, BitsBackend):
    name = "module"
    max_keys = 100_000  # one command holds the server briefly (benchmarks/NOTES.md, "Redis")
    form_add = form_has = "positions"
    no_windows = ""
    window_form_add = window_form_has = "positions"

    def add_job(self, f: FilterKeys, shard: int, answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        # BLOOMLINE.ADD shard count answer ttl_ms mode;bytes=<size> positions
        name = f.shards[shard]
        return Job(name.encode(), b"BLOOMLINE.ADD", (name, f.counts[shard], answer),
                   (ttl_ms, MODE.sized([f.nbytes[shard]])), body, count, writes=True)

    def stage_job(self, f: FilterKeys, guard: StageGuard, shards: list[int], keys_per_shard: list[int],
                  answer: str, ttl_ms: int, body: bytes, count: int) -> Job:
        # BLOOMLINE.CADD stages count answer shard_1 .. shard_n expected capacity ttl_ms mode;bytes=<sizes> positions
        return Job(guard.stages.encode(), b"BLOOMLINE.CADD",
                   (guard.stages, guard.count, answer, *(f.shards[s] for s in shards)),
                   (guard.expected, guard.capacity, ttl_ms, MODE.sized([f.nbytes[s] for s in shards])), body, count,
                   writes=True)

    def has_jobs(self, f: FilterKeys, shard: int, body: bytes,
                 count: int) -> tuple[list[Job], Callable[[list[Any]], npt.NDArray[np.bool_]]]:
        # BLOOMLINE.HAS shard bytes=<size> positions
        name = f.shards[shard]
        job = Job(name.encode(), b"BLOOMLINE.HAS", (name,), (f"bytes={f.nbytes[shard]}",), body, count)
        return [job], lambda replies: np.asarray(np.frombuffer(replies[0], dtype=np.uint8) == NEW)

    # -- a windowed filter: BLOOMLINE.WADD and WHAS a chunk (its whole-ring reads: RingScripts) --

    def window_chunk_keys(self, w: WindowKeys) -> int:
        return max(1, self.max_keys * 2 // len(w.bits))  # each key tests every generation

    def window_add_job(self, w: WindowKeys, answer: str, ttl_ms: int, refresh: bool, body: bytes,
                       count: int, newest: int = -1, epoch: str = "") -> Job:
        # BLOOMLINE.WADD meta answer bits_0 .. bits_G gen_0 .. gen_G ttl_ms mode bytes span refresh margin_ms sig
        #                newest epoch fields at made positions   (at, made: "-", the primary's own)
        fields = "".join(f"\0{v}" for v in w.meta_fields)[1:]
        return Job(w.meta.encode(), b"BLOOMLINE.WADD", (w.meta, answer, *w.bits, *w.gens),
                   (ttl_ms, MODE, w.nbytes, repr(w.span), int(refresh), w.margin_ms, w.sig, newest, epoch, fields,
                    "-", "-"), body, count, writes=True)

    def window_has_job(self, w: WindowKeys, body: bytes, count: int, newest: int = -1, epoch: str = "") -> Job:
        # BLOOMLINE.WHAS meta bits_0 .. bits_G gen_0 .. gen_G bytes span sig newest epoch positions
        return Job(w.meta.encode(), b"BLOOMLINE.WHAS", (w.meta, *w.bits, *w.gens),
                   (w.nbytes, repr(w.span), w.sig, newest, epoch), body, count)
