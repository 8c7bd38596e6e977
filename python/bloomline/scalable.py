"""ScalableBloomFilter: a Bloom filter that grows instead of degrading.

A chain of ``BloomFilter`` stages (Almeida, Baquero, Preguica and Hutchison,
"Scalable Bloom Filters", 2007). Stage i holds ``initial_capacity * growth**i``
keys at error rate ``error_rate * (1 - tightening) * tightening**i``; when a
stage has taken its capacity of new keys, the next one starts. A lookup is a
hit if any stage hits, so the compound false-positive rate is at most the
sum of the stages' rates, which stays under ``error_rate`` however many keys
arrive. That rule, and how many stages it allows (a stage needs at most 64
hashes and 2**48 bits), is the core's ``ChainRule``; the chain checks its parameters once, at
construction, and knows from then on how many keys it can take (``max_capacity``).

This is the one scalable chain of bloomline. Where its stages live is pluggable (a ``StageStore``): in memory
(the default), as mapped files in a directory (``DirectoryStages``, the Scrapy dupefilter's JOBDIR), or
elsewhere. Serialised as a kind-3 bloomline container (docs/FORMAT.md), written and read by the core.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, cast

from . import _core, _forks
from ._core import BloomFilter, ChainRule
from ._facts import batch_shaped
from ._interrupts import interrupts_held
from ._layouts import LAYOUTS, layout_matches
from ._numpy import np
from ._pickling import picklable
from ._shared_chain import add_shared
from ._stores import ChainMismatch, DirectoryStages, MemoryStages, SharedStageStore, StageAdd, StagesInUse, StageStore
from .display import filter_html, remote_filter_html

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._core import BinaryReader, BinaryWriter, Keys, Layout, Nulls, StrPath

__all__ = ["ChainMismatch", "DirectoryStages", "MemoryStages", "ScalableBloomFilter", "SharedStageStore", "StageAdd",
           "StageStore", "StagesInUse"]


class _ChainFacts:
    """What a chain is, read from its rule and stages: its parameters, its
    stages and counts, and the estimates over them (the chain's behaviour,
    adding and growing, is ScalableBloomFilter's)."""

    _rule: ChainRule
    _layout: Layout
    _seed: int
    _stages: list[BloomFilter]
    _counts: list[int]
    _closed = False

    def union(self, other: ScalableBloomFilter) -> ScalableBloomFilter:
        """A new chain of the keys of both: self | other, stage by stage, for
        chains of the same rule (ValueError names what differs). (Here, with
        the facts, for want of room in ScalableBloomFilter.) A chain has no
        intersection() nor issubset(): a key sits in the stage that was
        current when it came, so the same key may sit in stage 1 of one
        chain and stage 3 of the other, and a stage-by-stage AND or
        containment test would lose it or call it missing."""
        if not isinstance(other, ScalableBloomFilter):
            raise TypeError(f"union() takes a ScalableBloomFilter, got {type(other).__name__}")
        return cast(ScalableBloomFilter, self) | other

    def _sync(self) -> None:
        """Read the stages again where another process may have grown them."""

    @property
    def rule(self) -> ChainRule:
        """Stage sizes and limits (the core's ChainRule)."""
        return self._rule

    @property
    def initial_capacity(self) -> int:
        """Keys the first stage holds; each later stage holds growth times more."""
        return self._rule.initial_capacity

    @property
    def error_rate(self) -> float:
        """The compound false-positive rate the chain stays under."""
        return self._rule.error_rate

    @property
    def growth(self) -> int:
        """Each stage's capacity over the previous stage's."""
        return self._rule.growth

    @property
    def tightening(self) -> float:
        """Each stage's error rate over the previous stage's (below 1, so the sum stays under error_rate)."""
        return self._rule.tightening

    @property
    def layout(self) -> Layout:
        """"blocked" or "standard" ("standard-v1": the standard layout's first index): the bit layout of every stage."""
        return self._layout

    @property
    def seed(self) -> int:
        """The hash seed of every stage (filters compare and merge only with equal seeds)."""
        return self._seed

    @property
    def num_stages(self) -> int:
        """Stages made so far (1 until the first fills)."""
        return len(self._stages)

    @property
    def max_capacity(self) -> int:
        """Keys the chain can take with every stage it may have (see ChainRule)."""
        return self._rule.max_capacity

    @property
    def stages(self) -> tuple[BloomFilter, ...]:
        """The stages, oldest first (shared, not copies)."""
        return tuple(self._stages)

    @property
    def _stage_counts(self) -> list[int]:
        return list(self._counts)

    @property
    def capacity(self) -> int:
        """Keys the current stages can hold before the next one starts."""
        return sum(s.capacity or 0 for s in self._stages)

    @property
    def insert_count(self) -> int:
        """Adds that found their key new, over all stages."""
        return sum(self._counts)

    @property
    def nbytes(self) -> int:
        """Bytes of all the stages' bits."""
        return sum(s.nbytes for s in self._stages)

    @property
    def fill_ratio(self) -> float:
        """The fraction of all stages' bits that are 1."""
        return sum(s.bits_set for s in self._stages) / sum(s.num_bits for s in self._stages)

    @property
    def approx_count(self) -> float:
        """Estimated distinct keys: the sum of the stages' estimates."""
        return float(sum(s.approx_count for s in self._stages))

    @property
    def expected_fp_rate(self) -> float:
        """The compound rate at the current fill: 1 - prod(1 - stage rate)."""
        miss = 1.0
        for s in self._stages:
            miss *= 1.0 - s.expected_fp_rate
        return 1.0 - miss

    def __iter__(self) -> Iterator[BloomFilter]:
        return iter(self._stages)

    def __repr__(self) -> str:
        if self._closed:
            return f"<ScalableBloomFilter initial_capacity={self.initial_capacity} closed>"
        return (
            f"<ScalableBloomFilter initial_capacity={self.initial_capacity} error_rate={self.error_rate} "
            f"growth={self.growth} tightening={self.tightening} layout='{self._layout}' seed={self._seed} "
            f"stages={len(self._stages)} approx_count={self.approx_count:.0f}>"
        )


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _locked(method: _Method) -> _Method:
    """The method under the chain's lock: threads change its stages and counts one at a time, and
    an export reads them whole (a stage made twice, or a count past capacity, would not load)."""

    @functools.wraps(method)
    def locked(self: ScalableBloomFilter, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._check_open()
            return method(self, *args, **kwargs)

    return cast(_Method, locked)


class ScalableBloomFilter(_ChainFacts):
    """A Bloom filter that grows: ``add`` never degrades past ``error_rate``.

    ``store`` says where the stages live (default: in memory). A store that
    already holds stages (a ``DirectoryStages`` of an earlier run) is
    resumed; its stages must be what these parameters make, or ValueError
    says which differs.

    >>> sbf = ScalableBloomFilter(1000, 0.01)
    >>> sbf.add_many(range(100_000)).all()    # grows as needed
    True
    >>> sbf.num_stages > 1
    True
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        initial_capacity: int,
        error_rate: float = 0.01,
        *,
        growth: int = 2,
        tightening: float = 0.9,
        layout: Layout = "blocked",
        seed: int = 0,
        store: StageStore | None = None,
        on_grow: Callable[[ScalableBloomFilter], None] | None = None,
    ) -> None:
        self._rule = ChainRule(initial_capacity, error_rate, growth, tightening)  # checks all four
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be 'blocked' or 'standard', got {layout!r}")
        self._layout: Layout = layout
        _core.hash_many((), seed)  # checks seed: an int in [0, 2**64)
        self._seed = int(seed)
        self._store: StageStore = store if store is not None else MemoryStages()
        # One process or many: the paths that differ are chosen once, here.
        self._shared: Optional[SharedStageStore] = cast(SharedStageStore, self._store) if self._store.shared else None
        self._on_grow = on_grow
        # (a store whose stages have one writer process says so before each write: DirectoryStages)
        self._check_writer: Optional[Callable[[], None]] = getattr(self._store, "check_writer", None)
        self._lock = threading.RLock()  # (_locked: every change, and every export; renewed in a forked child)
        _forks.renew_locks_after_fork(self, lambda chain: setattr(chain, "_lock", threading.RLock()))
        self._stages: list[BloomFilter] = []
        self._counts: list[int] = []  # new keys taken by each stage
        self._store.attach_chain(self._rule, self._layout, self._seed)  # (a shared store checks it, keeps it)
        self._reload()  # the store's stages (checked), or a first one

    # ---- stages ---------------------------------------------------------------

    def _stage_params(self, i: int) -> tuple[int, float]:
        return self._rule.stage_capacity(i), self._rule.stage_error_rate(i)

    def _check_stage(self, i: int, stage: BloomFilter) -> None:
        capacity, rate = self._stage_params(i)
        if i == 0 and layout_matches(stage.layout, self._layout):
            self._layout = stage.layout  # (a chain made with the standard layout's first index keeps it, in any store)
        for field, have, want in (("capacity", stage.capacity, capacity), ("error_rate", stage.error_rate, rate),
                                  ("layout", stage.layout, self._layout), ("seed", stage.seed, self._seed)):
            if have != want:
                self._store.close()
                raise ChainMismatch(i, field, have, want, stage)

    def _new_stage(self) -> BloomFilter:
        """The next stage: made in the store (a shared store makes it once,
        whoever asks first), then read as the store has it."""
        i = len(self._stages)
        if self._shared is not None and i < self._store.stage_count():
            self._reload()  # another process grew the chain first
            return self._stages[-1]
        if i >= self._rule.max_stages:
            raise ValueError(
                f"the chain is full: its {i} stages hold {self._rule.max_capacity:,} keys, and a stage past them "
                f"would need an error rate of {self._rule.stage_error_rate(i):.3g} (over 64 hashes) or over 2**48 "
                "bits; use a larger initial_capacity, growth=4 or a tightening nearer 1"
            )
        capacity, rate = self._stage_params(i)
        stage = self._store.new_stage(i, capacity, rate, self._layout, self._seed)
        if self._shared is not None:
            self._reload()  # the stage as the store has it
            return self._stages[-1]
        self._stages.append(stage)
        self._counts.append(0)
        if i and self._on_grow is not None:
            self._on_grow(self)
        return stage

    def _check_open(self) -> None:
        if self._closed:  # (a closed chain's store may be gone: a DirectoryStages' clear would delete its files)
            raise ValueError("I/O operation on a closed filter")

    def _sync(self) -> None:
        """A shared store's chain may have grown in another process: read its
        stages again when their number changed (one small read)."""
        self._check_open()
        if self._shared is not None and self._store.stage_count() != len(self._stages):
            self._reload()

    def _reload(self) -> None:
        """The store's stages, checked, or a first one; on_grow once when the
        chain is longer than it was."""
        before = len(self._stages)
        stages: list[BloomFilter] = []
        counts: list[int] = []
        for i, (stage, count) in enumerate(self._store.stages()):
            self._check_stage(i, stage)
            stages.append(stage)
            counts.append(min(count, stage.capacity or count))  # (a repaired file's count may pass it: full)
        # Only a complete read replaces the chain: a store's error (a missing
        # key, a cut) leaves the stages this object had, so a caller that
        # catches it can go on calling.
        self._stages, self._counts = stages, counts
        if not self._stages:
            self._new_stage()
        elif len(self._stages) > before > 0 and self._on_grow is not None:
            self._on_grow(self)

    def _room(self) -> int:
        """New keys the current stage may still take."""
        return self._rule.stage_capacity(len(self._stages) - 1) - self._counts[-1]

    def _room_left(self) -> int:
        """New keys the whole chain may still take, its future stages included."""
        return self._room() + sum(self._rule.stage_capacity(i) for i in range(len(self._stages), self._rule.max_stages))

    # ---- single keys --------------------------------------------------------------

    @_locked
    def add(self, key: Any) -> bool:
        """Add a key; True if it was new across the whole chain."""
        if self._shared is not None:
            return bool(self.add_many([key])[0])
        if self._check_writer is not None:
            self._check_writer()
        for stage in self._stages[:-1]:
            if key in stage:
                return False
        if self._room() <= 0:
            if key in self._stages[-1]:
                return False
            self._new_stage()
        if self._stages[-1].add(key):
            self._counts[-1] += 1
            return True
        return False

    def __contains__(self, key: object) -> bool:
        self._sync()
        if self._shared is not None:
            return bool(self.contains_many([key])[0])  # type: ignore[list-item]
        return any(key in stage for stage in reversed(self._stages))

    # ---- batches ----------------------------------------------------------------------

    @_locked
    def add_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch; True where the key was new (first place in the batch
        only). All or nothing: a batch that could pass the chain's last
        stage is refused before any key is added. nulls='skip' leaves nulls
        out (False), as BloomFilter.add_many."""
        hashed, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        with interrupts_held():  # (each stage's count follows its add, before a Ctrl-C: _interrupts)
            return batch_shaped(valid, self._add_local(hashed)) if self._shared is None else \
                add_shared(self, self._shared, hashed, valid)

    def _full_error(self, left: int) -> ValueError:
        return ValueError(f"the chain is full: its {len(self._stages)} stages hold {self._rule.max_capacity:,} keys; "
                          f"{left:,} keys of this batch were not added")

    def _add_local(self, hashed: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """One process: the chain knows every stage's count, so it gives the
        last stage at most the keys it has room for, and starts the next."""
        seen = np.zeros(len(hashed), dtype=bool)
        for stage in self._stages[:-1]:
            seen |= stage.contains_many(hashed)
        candidates = int(np.count_nonzero(~seen))
        if candidates > self._room_left():
            raise ValueError(
                f"the chain can take {self._room_left():,} more keys (max_capacity {self._rule.max_capacity:,}), "
                f"and this batch may hold {candidates:,} new ones; nothing was added"
            )
        out = np.zeros(len(hashed), dtype=bool)
        start = 0
        while start < len(hashed):
            if self._room() <= 0:
                if len(self._stages) == self._rule.max_stages:
                    # By the check above every key left is known.
                    seen[start:] |= self._stages[-1].contains_many(hashed[start:])
                    if not seen[start:].all():  # pragma: no cover - excluded by the check above
                        raise self._full_error(int(np.count_nonzero(~seen[start:])))
                    break
                self._new_stage()
                seen[start:] |= self._stages[-2].contains_many(hashed[start:])  # the stage that filled
                continue
            # At most as many keys as the stage has room for new ones: it never
            # passes its capacity by more than the duplicates it could not know.
            stop = min(len(hashed), start + self._room())
            fresh = ~seen[start:stop]
            if fresh.any():
                new = self._store.add_to_last(len(self._stages) - 1, self._stages[-1], hashed[start:stop][fresh]).new
                out[start:stop][fresh] = new
                self._counts[-1] += int(np.count_nonzero(new))
            start = stop
        return out

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where the key may be present (in any stage); False for nulls
        with nulls='skip'."""
        hashed, valid = _core.hash_valid(keys, self._seed, nulls=nulls)
        self._sync()
        if self._shared is not None:
            return batch_shaped(valid, self._shared.contains_any(0, len(self._stages), hashed))
        hit = np.zeros(len(hashed), dtype=bool)
        for stage in self._stages:
            hit |= stage.contains_many(hashed)
        return batch_shaped(valid, hit)

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text, as BloomFilter.add_lines reads it;
        True where the line was new."""
        return self.add_many(_core.hash_lines(data, self._seed))

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text; True where it may be present."""
        return self.contains_many(_core.hash_lines(data, self._seed))

    def update(self, *others: Keys | ScalableBloomFilter, nulls: Nulls = "raise") -> None:
        """Add every key of each argument, in order (like set.update): an
        iterable's keys, or a chain made by the same rule (its keys, as |=
        adds them)."""
        for other in others:
            if isinstance(other, ScalableBloomFilter):
                self._union_with(other)
            elif hasattr(other, "contains_many"):  # a filter of another kind: its keys are not listed
                raise TypeError("update() takes ScalableBloomFilters of the same rule or iterables of keys, "
                                f"got {type(other).__name__}")
            else:
                self.add_many(other, nulls=nulls)

    # ---- set algebra ---------------------------------------------------------------

    def _check_same_rule(self, other: ScalableBloomFilter) -> None:
        """Chains combine stage by stage only when the same rule made their
        stages: ValueError naming the first parameter that differs."""
        for field in ("initial_capacity", "error_rate", "growth", "tightening", "layout", "seed"):
            mine, theirs = getattr(self, field), getattr(other, field)
            if mine != theirs:
                raise ValueError(f"chains differ in {field} ({mine!r} != {theirs!r})")

    @_locked
    def _union_with(self, other: ScalableBloomFilter) -> None:
        """Stage i becomes the union of both chains' stage i; stages only the
        other chain has are added as copies (chains grown to different
        lengths unite, as pybloom-live's do). A stage's count becomes what
        its bits say (insert_count after |=), at most its capacity, so the
        next add starts a new stage when a united last stage is full."""
        self._check_same_rule(other)
        if self._shared is not None:
            raise ValueError("a chain whose store is shared by several processes (RedisStages) is not united in "
                             "place; unite a local copy instead: chain.copy() | other")
        other._sync()
        if self._check_writer is not None:
            self._check_writer()
        theirs = list(other._stages)
        for i, stage in enumerate(theirs):
            mine = self._stages[i] if i < len(self._stages) else self._new_stage()
            mine |= stage
            self._counts[i] = min(mine.insert_count, mine.capacity or mine.insert_count)  # (as _reload caps it)

    def __or__(self, other: object) -> ScalableBloomFilter:
        """The union, stage by stage (see __ior__), in memory whatever the
        stores of the two."""
        if not isinstance(other, ScalableBloomFilter):
            return NotImplemented
        result = self.copy()
        result._union_with(other)
        return result

    def __ior__(self, other: object) -> ScalableBloomFilter:
        """Unite another chain made by the same rule into this one, stage by
        stage (in its store: a DirectoryStages chain's files take the bits);
        ValueError names the parameter that differs. The compound rate can
        then pass error_rate (a stage may hold the keys of two), as a
        BloomFilter's union can pass its capacity: expected_fp_rate says."""
        if not isinstance(other, ScalableBloomFilter):
            return NotImplemented
        self._union_with(other)
        return self

    # ---- facts ---------------------------------------------------------------------

    def copy(self) -> ScalableBloomFilter:
        """An independent copy, in memory."""
        return ScalableBloomFilter.from_bytes(self.to_bytes())

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, Any]) -> ScalableBloomFilter:
        return self.copy()

    @_locked
    def clear(self) -> None:
        """Forget every key: back to one empty stage."""
        self._store.reset()
        self._stages.clear()
        self._counts.clear()
        self._new_stage()

    def close(self) -> None:
        """Release the stages' store (mapped files are flushed and closed) and
        refuse further use, as a closed BloomFilter does. Under the chain's
        lock: an add in flight ends first, and none grows the chain after."""
        with self._lock:
            self._closed = True
            self._store.close()

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed

    def __enter__(self) -> ScalableBloomFilter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _repr_html_(self) -> str:
        if type(self._store).__module__.startswith("bloomline.redis"):  # (its counts are the server's to give)
            return remote_filter_html(self, [("store", type(self._store).__name__), ("layout", self.layout),
                                             ("initial capacity", f"{self.initial_capacity:,}"),
                                             ("error rate", f"{self.error_rate:g}")])
        return filter_html(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScalableBloomFilter):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    def __bool__(self) -> bool:
        """False while no key was added (or after clear()), as an empty set is."""
        return any(stage for stage in self.stages)

    # ---- bytes and pickle ---------------------------------------------------------------

    @_locked
    def to_bytes(self) -> bytes:
        """A kind-3 bloomline container (docs/FORMAT.md): header, then each
        stage's own encoding with its length and count."""
        return _core.encode_chain(self._rule, self._layout, self._seed, self._stages, self._counts)

    @classmethod
    def from_bytes(cls, data: Any) -> ScalableBloomFilter:
        """Read what to_bytes wrote; ValueError says what is wrong."""
        rule, layout, seed, stages = _core.decode_chain(data)
        return cls(rule.initial_capacity, rule.error_rate, growth=rule.growth, tightening=rule.tightening,
                   layout=layout, seed=seed, store=MemoryStages(stages))

    def save(self, path: StrPath | BinaryWriter) -> None:
        """Write to path atomically (temporary file, fsync, rename, fsync of
        the directory) through the one atomic writer, as BloomFilter.save
        does: a path that a handle maps for writing, or a read-only file, is
        refused; a replaced file keeps its mode. path may be a binary file
        object (open(..., 'wb'), io.BytesIO): to_bytes() is written at its
        position."""
        _core.save_bytes(path, self.to_bytes())

    @classmethod
    def load(cls, path: StrPath | BinaryReader) -> ScalableBloomFilter:
        """Read a file written by save (always verified; no mmap: the stages are
        small next to one fixed filter of the same total size). path may be a
        binary file object: one filter is read at its position, nothing past it."""
        return cls.from_bytes(_core.load_bytes(path))


picklable(ScalableBloomFilter)  # (its __reduce_ex__: _pickling, the one place that names what a pickle restores with)
