"""bloomline: fast Bloom filters with a C++ core.

Quick tour::

    >>> import bloomline
    >>> bf = bloomline.BloomFilter(capacity=1_000_000, error_rate=0.01)
    >>> bf.add("https://example.com/")        # True: the key was new
    True
    >>> "https://example.com/" in bf
    True

See docs/quickstart.md and the guides in docs/guides/ for batches (NumPy,
Arrow), set algebra, pickling and files; docs/FORMAT.md for the file format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _lazy, display
from ._core import (
    BloomFilter,
    CapacityWarning,
    CountingBloomFilter,
    __version__,
    estimate_count,
    file_locks,
    hash_lines,
    hash_many,
    key_positions,
    murmur3_128,
    read_header,
    select_lines,
    simd_level,
)
from ._pickling import from_bytes
from ._protocol import Filter
from .sizing import Params, ParamsArrays, bits_per_key, false_positive_rate, optimal_num_hashes, optimal_params

if TYPE_CHECKING:
    from ._core import Layout
    from .frontier import DedupQueue
    from .scalable import ScalableBloomFilter
    from .windowed import WindowedBloomFilter

__all__ = [
    "BloomFilter",
    "CapacityWarning",
    "CountingBloomFilter",
    "DedupQueue",
    "Filter",
    "ScalableBloomFilter",
    "WindowedBloomFilter",
    "Params",
    "ParamsArrays",
    "__version__",
    "bits_per_key",
    "estimate_count",
    "false_positive_rate",
    "file_locks",
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

if not TYPE_CHECKING:  # (the type checker reads the imports above)

    def __getattr__(name: str) -> object:
        """The Python kinds and their modules, loaded at their first lookup
        (_lazy.py says why); each is kept here once loaded."""
        if name in _lazy.HOMES:
            value = _lazy.load(name)
        elif name in _lazy.HOMES.values():
            value = _lazy.module(name)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__) | set(_lazy.HOMES.values()))
