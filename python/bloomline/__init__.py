"""bloomline: fast Bloom filters with a C++ core.

Quick tour::

    >>> import bloomline
    >>> bf = bloomline.BloomFilter(capacity=1_000_000, error_rate=0.01)
    >>> bf.add("https://example.com/")        # True: the key was new
    True
    >>> "https://example.com/" in bf
    True

See README.md for batches (NumPy), set algebra, pickling and the file format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from typing import Any, Union

from . import _core
from ._core import (
    BloomFilter,
    CountingBloomFilter,
    __version__,
    estimate_count,
    false_positive_rate,
    hash_lines,
    hash_many,
    key_positions,
    murmur3_128,
    optimal_num_hashes,
    read_header,
    select_lines,
    simd_level,
)
from ._protocol import Filter
from .display import filter_html as _filter_html
from .frontier import DedupQueue
from .scalable import ScalableBloomFilter

if TYPE_CHECKING:
    from ._core import Layout

# Jupyter shows filters as a small table with a fill bar (display.py).
BloomFilter._repr_html_ = _filter_html  # type: ignore[method-assign, assignment]
CountingBloomFilter._repr_html_ = _filter_html  # type: ignore[method-assign, assignment]

__all__ = [
    "BloomFilter",
    "CountingBloomFilter",
    "DedupQueue",
    "Filter",
    "ScalableBloomFilter",
    "Params",
    "__version__",
    "estimate_count",
    "false_positive_rate",
    "from_bytes",
    "hash_lines",
    "hash_many",
    "key_positions",
    "murmur3_128",
    "optimal_num_hashes",
    "optimal_params",
    "read_header",
    "select_lines",
    "simd_level",
]


class Params(NamedTuple):
    """Geometry that meets an error rate at a capacity (see optimal_params)."""

    num_bits: int
    num_hashes: int
    bits_per_key: float
    expected_fp_rate: float


def optimal_params(capacity: int, error_rate: float, layout: Layout = "blocked") -> Params:
    """The smallest num_bits (and the best num_hashes for it) whose
    false-positive rate at ``capacity`` keys, by ``layout``'s own formula, is
    at most ``error_rate``.

    >>> optimal_params(1_000_000, 0.01, layout="standard").num_hashes
    7
    """
    return Params(*_core.optimal_params(capacity, error_rate, layout))


def from_bytes(data: Any) -> Union[BloomFilter, CountingBloomFilter, ScalableBloomFilter]:
    """Read any filter written by to_bytes (or a saved file's bytes); the kind
    comes from the header, and ValueError says what is wrong with bad data."""
    if read_header(data)["kind"] == "ScalableBloomFilter":
        return ScalableBloomFilter.from_bytes(data)
    filt: Union[BloomFilter, CountingBloomFilter] = _core.from_bytes(data)
    return filt
