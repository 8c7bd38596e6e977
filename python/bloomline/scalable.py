"""ScalableBloomFilter: a Bloom filter that grows instead of degrading.

A chain of ``BloomFilter`` stages (Almeida, Baquero, Preguica and Hutchison,
"Scalable Bloom Filters", 2007). Stage i holds ``initial_capacity * growth**i``
keys at error rate ``p0 * tightening**i``; when a stage has taken its
capacity of new keys, the next one starts. A lookup is a hit if any stage
hits, so the compound false-positive rate is at most
``sum(p0 * tightening**i) < p0 / (1 - tightening)``; choosing
``p0 = error_rate * (1 - tightening)`` keeps it under ``error_rate`` however
many keys arrive. Each stage is sized by the layout's own formula, so each
really meets its share.

Serialised as a kind-3 bloomline container (docs/FORMAT.md): a checked
header and the stages' own checked encodings.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from . import _core
from ._core import BloomFilter

if TYPE_CHECKING:
    from ._core import Layout

__all__ = ["ScalableBloomFilter"]

Keys = Union[npt.NDArray[Any], Iterable[Any]]

_KIND_SCALABLE = 3
_MAX_STAGES = 64


def stage_params(initial_capacity: int, error_rate: float, growth: int, tightening: float, i: int) -> tuple[int, float]:
    """Capacity and error rate of stage i of a scalable chain whose compound
    rate stays under error_rate: p_i = error_rate * (1 - t) * t**i."""
    return initial_capacity * growth**i, error_rate * (1.0 - tightening) * tightening**i


class ScalableBloomFilter:
    """A Bloom filter that grows: ``add`` never degrades past ``error_rate``.

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
    ) -> None:
        if isinstance(initial_capacity, bool) or not isinstance(initial_capacity, (int, np.integer)):
            raise TypeError(f"initial_capacity must be an int, got {type(initial_capacity).__name__}")
        if initial_capacity < 1:
            raise ValueError(f"initial_capacity must be >= 1, got {initial_capacity}")
        if isinstance(error_rate, bool) or not isinstance(error_rate, (int, float, np.floating)):
            raise TypeError(f"error_rate must be a number, got {type(error_rate).__name__}")
        if not 0.0 < float(error_rate) < 1.0:
            raise ValueError(f"error_rate must be in (0, 1), got {error_rate}")
        if growth not in (2, 4):
            raise ValueError(f"growth must be 2 or 4, got {growth!r}")
        if isinstance(tightening, bool) or not isinstance(tightening, (int, float)) or not 0.0 < tightening < 1.0:
            raise ValueError(f"tightening must be in (0, 1), got {tightening!r}")
        if layout not in ("blocked", "standard"):
            raise ValueError(f"layout must be 'blocked' or 'standard', got {layout!r}")
        self._initial_capacity = int(initial_capacity)
        self._error_rate = float(error_rate)
        self._growth = int(growth)
        self._tightening = float(tightening)
        self._layout = layout
        self._seed = int(seed)
        self._stages: list[BloomFilter] = []
        self._stage_counts: list[int] = []  # new keys taken by each stage
        self._new_stage()  # also checks seed through BloomFilter

    # ---- stages ---------------------------------------------------------------

    def _stage_params(self, i: int) -> tuple[int, float]:
        return stage_params(self._initial_capacity, self._error_rate, self._growth, self._tightening, i)

    def _new_stage(self) -> BloomFilter:
        i = len(self._stages)
        if i >= _MAX_STAGES:
            raise OverflowError(f"a ScalableBloomFilter holds at most {_MAX_STAGES} stages")
        capacity, rate = self._stage_params(i)
        stage = BloomFilter(capacity, rate, layout=self._layout, seed=self._seed)
        self._stages.append(stage)
        self._stage_counts.append(0)
        return stage

    def _room(self) -> int:
        """New keys the current stage may still take."""
        stage = self._stages[-1]
        assert stage.capacity is not None
        return stage.capacity - self._stage_counts[-1]

    # ---- single keys --------------------------------------------------------------

    def add(self, key: Any) -> bool:
        """Add a key; True if it was new across the whole chain."""
        for stage in self._stages[:-1]:
            if key in stage:
                return False
        if self._room() <= 0:
            if key in self._stages[-1]:
                return False
            self._new_stage()
        if self._stages[-1].add(key):
            self._stage_counts[-1] += 1
            return True
        return False

    def __contains__(self, key: object) -> bool:
        return any(key in stage for stage in reversed(self._stages))

    # ---- batches ----------------------------------------------------------------------

    def add_many(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """Add a batch; True where the key was new (first place in the batch only)."""
        arr = _as_batch(keys)
        out = np.zeros(len(arr), dtype=bool)
        start = 0
        while start < len(arr):
            if self._room() <= 0:
                self._new_stage()
            # Take at most as many keys as the stage has room for new ones:
            # the stage never passes its capacity by more than the duplicates
            # it could not know about.
            stop = min(len(arr), start + self._room())
            chunk = arr[start:stop]
            seen = np.zeros(len(chunk), dtype=bool)
            for stage in self._stages[:-1]:
                seen |= stage.contains_many(chunk)
            fresh = ~seen
            new = np.zeros(len(chunk), dtype=bool)
            if fresh.any():
                new[fresh] = self._stages[-1].add_many(chunk[fresh])
            self._stage_counts[-1] += int(new.sum())
            out[start:stop] = new
            start = stop
        return out

    def contains_many(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """True where the key may be present (in any stage)."""
        arr = _as_batch(keys)
        hit = np.zeros(len(arr), dtype=bool)
        for stage in self._stages:
            hit |= stage.contains_many(arr)
        return hit

    def update(self, *iterables: Keys) -> None:
        """Add every key of each iterable."""
        for keys in iterables:
            self.add_many(keys)

    # ---- facts ---------------------------------------------------------------------

    @property
    def initial_capacity(self) -> int:
        return self._initial_capacity

    @property
    def error_rate(self) -> float:
        """The compound false-positive rate the chain stays under."""
        return self._error_rate

    @property
    def growth(self) -> int:
        return self._growth

    @property
    def tightening(self) -> float:
        return self._tightening

    @property
    def layout(self) -> Layout:
        return self._layout

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def num_stages(self) -> int:
        return len(self._stages)

    @property
    def stages(self) -> tuple[BloomFilter, ...]:
        """The stages, oldest first (shared, not copies)."""
        return tuple(self._stages)

    @property
    def capacity(self) -> int:
        """Keys the current stages can hold before the next one starts."""
        return sum(s.capacity or 0 for s in self._stages)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self._stages)

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

    def copy(self) -> ScalableBloomFilter:
        return ScalableBloomFilter.from_bytes(self.to_bytes())

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, Any]) -> ScalableBloomFilter:
        return self.copy()

    def clear(self) -> None:
        """Forget every key: back to one empty stage."""
        self._stages.clear()
        self._stage_counts.clear()
        self._new_stage()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScalableBloomFilter):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    def _repr_html_(self) -> str:
        from .display import filter_html

        return filter_html(self)

    def __repr__(self) -> str:
        return (
            f"<ScalableBloomFilter initial_capacity={self._initial_capacity} error_rate={self._error_rate} "
            f"growth={self._growth} tightening={self._tightening} layout='{self._layout}' seed={self._seed} "
            f"stages={len(self._stages)} approx_count={round(self.approx_count)}>"
        )

    # ---- bytes and pickle ---------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """A kind-3 bloomline container: header, then each stage's own
        encoding preceded by its length (u64, little-endian)."""
        parts = []
        for stage, count in zip(self._stages, self._stage_counts):
            data = stage.to_bytes()
            parts.append(struct.pack("<QQ", len(data), count))
            parts.append(data)
        return _core._write_container(
            _KIND_SCALABLE,
            len(self._stages),
            self._growth,
            self._layout,
            self._seed,
            self._initial_capacity,
            self._error_rate,
            sum(self._stage_counts),
            self._tightening,
            b"".join(parts),
        )

    @classmethod
    def from_bytes(cls, data: Any) -> ScalableBloomFilter:
        """Read what to_bytes wrote; ValueError says what is wrong."""
        header = _core.read_header(data)  # checks both checksums
        if header["kind"] != "ScalableBloomFilter":
            raise ValueError(f"invalid bloomline data: this holds a {header['kind']}, not a ScalableBloomFilter")
        view = memoryview(data).cast("B")
        payload = view[header["payload_offset"] : header["payload_offset"] + header["payload_len"]]
        self = cls.__new__(cls)
        self._initial_capacity = header["capacity"]
        self._error_rate = header["error_rate"]
        self._growth = header["num_hashes"]
        self._tightening = header["tightening"]
        self._layout = header["layout"]
        self._seed = header["seed"]
        self._stages, self._stage_counts = [], []
        pos = 0
        for i in range(header["num_slots"]):
            if pos + 16 > len(payload):
                raise ValueError(f"invalid bloomline data: stage {i} is truncated")
            length, count = struct.unpack_from("<QQ", payload, pos)
            pos += 16
            if length > len(payload) - pos:
                raise ValueError(f"invalid bloomline data: stage {i} claims {length} bytes, {len(payload) - pos} left")
            stage = BloomFilter.from_bytes(payload[pos : pos + length])
            pos += length
            capacity, rate = self._stage_params(i)
            if (stage.capacity, stage.error_rate, stage.layout, stage.seed) != (capacity, rate, self._layout, self._seed):
                raise ValueError(f"invalid bloomline data: stage {i} does not match the chain's parameters")
            if count > capacity:
                raise ValueError(f"invalid bloomline data: stage {i} count {count} exceeds its capacity {capacity}")
            self._stages.append(stage)
            self._stage_counts.append(count)
        if pos != len(payload):
            raise ValueError("invalid bloomline data: bytes left over after the last stage")
        return self

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write to path atomically (temporary file, fsync, rename, fsync of
        the directory), like BloomFilter.save."""
        _atomic_write(os.fspath(path), self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScalableBloomFilter:
        """Read a file written by save (always verified; no mmap: the stages are
        small next to one fixed filter of the same total size)."""
        with open(path, "rb") as f:
            return cls.from_bytes(f.read())

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return (_core.from_bytes, (self.to_bytes(),))


def _atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        os.fchmod(fd, 0o644)  # as the C++ save does (mkstemp makes 0600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    except OSError:  # some file systems refuse directory fsync
        pass
    finally:
        os.close(dfd)


def _as_batch(keys: Keys) -> npt.NDArray[Any]:
    """A 1-D array to slice and mask; lists of mixed keys become object arrays."""
    if isinstance(keys, np.ndarray):
        return keys.reshape(-1)
    if isinstance(keys, (str, bytes, bytearray, int)):
        raise TypeError(
            f"keys must be an iterable of keys or a NumPy array, got {type(keys).__name__} (use add()/in for a single key)"
        )
    items = list(keys)
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr
