"""Any filter from its bytes (``from_bytes``: every kind, the kind read from
the header), and what a pickle of any filter names: ``restore``, a
module-level function of this package, and nothing else (issue 26;
docs/DECISIONS.md).

Every kind's ``__reduce_ex__`` answers ``_core.reduction(data, protocol)``
(cpp/bindings/persistence_py.cpp), the one place that names ``restore``: it
is looked up there when a pickle is made, never at import, so the compiled
module and scalable.py import nothing above them, and this module sits
above every kind it reads. A restricted unpickler that resolves only
``bloomline.*`` names reads every kind at every protocol.
"""

from __future__ import annotations

from typing import Any, Union

from . import _core
from ._core import BloomFilter, CountingBloomFilter
from .scalable import ScalableBloomFilter

__all__ = ["from_bytes", "restore"]


def from_bytes(data: Any) -> Union[BloomFilter, CountingBloomFilter, ScalableBloomFilter]:
    """Read any filter written by to_bytes (or a saved file's bytes); the kind
    comes from the header, and ValueError says what is wrong with bad data."""
    if _core.read_header(data)["kind"] == "ScalableBloomFilter":
        return ScalableBloomFilter.from_bytes(data)
    filt: Union[BloomFilter, CountingBloomFilter] = _core.from_bytes(data)
    return filt


def restore(data: Union[bytes, str]) -> Any:
    """The filter a pickle holds: its to_bytes() output, read by from_bytes
    (every kind, every check). Protocols 0-2 carry the bytes as latin-1 text
    (_core.reduction says why)."""
    if isinstance(data, str):
        data = data.encode("latin-1")
    return from_bytes(data)
