"""A filter in Redis as one process holds it: its keys, the backend that
keeps them, and the sender that talks to the server. RedisBloomFilter is a
handle with a public face; RedisStages keeps one per stage of a chain. Both
run adds, lookups and the rest through it, so neither reaches into the
other. ``Expiring`` is the one home of expire/persist/ttl, for a filter and
a chain alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import numpy.typing as npt

from .._core import BloomFilter
from ._backend import AddOutcome, Backend, Part, Prepared, gone, run_adds, run_lookups
from ._durable import replicated
from ._meta import keys_of, open_filter
from ._names import FilterKeys, batch_ids
from ._registry import choose_backend
from ._wire import Job, Sender

if TYPE_CHECKING:
    from .._core import Keys, Nulls


@dataclass
class Handle:
    """One filter's keys, backend and sender (see the module doc). what:
    how errors name it ("the filter at 'k'", or its chain)."""

    sender: Sender
    name: str
    meta: dict[str, str]
    keys: FilterKeys
    backend: Backend
    policy: str
    what: str
    capacity: int = 0  # (from the meta: read on every add that finds a key new)
    error_rate: float = 0.0

    def __post_init__(self) -> None:
        self.capacity, self.error_rate = int(self.meta["capacity"]), float(self.meta["error_rate"])

    @classmethod
    def open(cls, sender: Sender, name: str, new: Optional[dict[str, Any]], wanted: dict[str, Any], backend: str,
             policy: str, what: str, missing: Optional[Callable[[str], Exception]] = None) -> Handle:
        """The filter at `name`, made from `new` where there is none
        (_meta.open_filter), with the backend it binds to."""
        meta = open_filter(sender, name, new, wanted, missing)
        return cls(sender, name, meta, keys_of(name, meta), choose_backend(meta["kind"], backend, sender.client, name,
                                                                          meta.get("backend")), policy, what)

    # ---- batches --------------------------------------------------------------------

    def prepare(self, keys: Keys, nulls: Nulls) -> Prepared:
        return self.backend.prepare(keys, nulls, self.keys.seed)

    def add(self, batch: Prepared) -> AddOutcome:
        """A batch added to the filter, as an outcome (the caller raises)."""
        parts = self.backend.add_parts(self.keys, batch, batch_ids.next(), self.sender.answer_ttl_ms)
        return run_adds(self.sender, parts, batch.n, self.what, self.policy)

    def has_parts(self, batch: Prepared) -> list[Part]:
        return list(self.backend.has_parts(self.keys, batch))

    def lookup(self, batch: Prepared) -> npt.NDArray[np.bool_]:
        return run_lookups(self.sender, self.backend.has_parts(self.keys, batch), batch.n, self.what, self.policy)

    def replicated(self, out: AddOutcome) -> None:
        """With wait_replicas: WAIT on each node of the filter after an add
        that found keys new, failed or not (_durable.replicated)."""
        replicated(self.sender, [s.encode() for s in self.keys.shards], self.what, out, bool(out.new.any()))

    # ---- every key ------------------------------------------------------------------

    def all_keys(self) -> list[str]:
        return [self.keys.meta, *self.keys.data]

    def each(self, command: bytes, *args: Any) -> list[Any]:
        """command on every key of the filter (with EXISTS beside it: a key
        that is gone raises MissingKeyError)."""
        names = self.all_keys()
        jobs = [j for k in names for j in (Job(k.encode(), b"EXISTS", (k,)), Job(k.encode(), command, (k,), args))]
        replies = self.sender.each(jobs)
        for k, there in zip(names, replies[::2]):
            if not int(there):
                raise gone(k, self.what, self.policy)
        return replies[1::2]

    # ---- the bits -------------------------------------------------------------------

    def download(self, counts: tuple[str, ...]) -> tuple[bytes, list[int]]:
        """The bits, and `counts` read after them in the same round."""
        return self.backend.download(self, counts)

    def local(self, bits: bytes, count: int) -> BloomFilter:
        """The bits as a local BloomFilter with identical answers."""
        k = self.keys
        return BloomFilter.from_buffer(bits, k.num_bits, k.num_hashes, layout=k.layout, seed=k.seed,
                                       capacity=self.capacity, error_rate=self.error_rate, insert_count=count)


class Expiring:
    """expire, persist and ttl over every key of a filter or chain, written
    once: a class gives `_each(command, *args)`, the command run on each of
    its keys (a key that is gone raising MissingKeyError)."""

    def _each(self, command: bytes, *args: Any) -> list[Any]:
        raise NotImplementedError

    def expire(self, seconds: float) -> None:
        """Give every key the same time to live: after it, the filter (or
        chain) is gone; until then it answers as before. A chain's stages
        added later take the time left."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < 2**40:
            raise ValueError(f"seconds must be a positive number, got {seconds!r}")
        self._each(b"PEXPIRE", max(1, round(seconds * 1000)))

    def persist(self) -> None:
        """Remove the time to live of every key."""
        self._each(b"PERSIST")

    def ttl(self) -> Optional[float]:
        """Seconds until the first key expires, or None if none will."""
        timed = [int(t) for t in self._each(b"PTTL") if int(t) >= 0]
        return min(timed) / 1000 if timed else None
