"""What every bloomline filter offers, as a typed Protocol.

BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter
and RedisBloomFilter all satisfy it. Jupyter's display (display.py) relies on it and on nothing
else; the command line takes any filter through it where one is given
(dedup's --state, its reports). The analysis tools build their own
BloomFilters and do not use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol, runtime_checkable

from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._core import Keys, Layout, Nulls

__all__ = ["Filter"]


@runtime_checkable
class Filter(Protocol):
    """A set that may say "present" for a key it never saw, never "absent"
    for one it saw."""

    def add(self, key: Any, /) -> bool:
        """Add a key; True when it was new."""
        ...

    def __contains__(self, key: object, /) -> bool: ...

    def add_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch (NumPy array, Arrow column, iterable); True where the
        key was new."""
        ...

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where the key may be present."""
        ...

    def update(self, *iterables: Keys, nulls: Nulls = "raise") -> None:
        """Add every key of each batch or iterable (set.update's form)."""
        ...

    def add_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Add each line of a block of text (bytes-like); True where new."""
        ...

    def contains_lines(self, data: Any) -> npt.NDArray[np.bool_]:
        """Test each line of a block of text."""
        ...

    @property
    def capacity(self) -> Optional[int]:
        """Keys it was sized for (None when built from explicit m and k)."""
        ...

    @property
    def error_rate(self) -> Optional[float]:
        """The false-positive rate it was sized for (None likewise)."""
        ...

    @property
    def layout(self) -> Layout:
        """"blocked" (a key's bits in one 512-bit block) or "standard" (spread over the whole array)."""
        ...

    @property
    def nbytes(self) -> int:
        """Bytes of storage."""
        ...

    @property
    def fill_ratio(self) -> float:
        """The fraction of its slots (bits or counters) that are set."""
        ...

    @property
    def approx_count(self) -> float:
        """Estimated distinct keys, from the fill (inf when full)."""
        ...

    @property
    def expected_fp_rate(self) -> float:
        """The false-positive rate at the current fill."""
        ...
