"""What a pickle of any bloomline filter names: ``restore``, a module-level
function of this package, and nothing else (issue 26; docs/DECISIONS.md).

The C++ kinds' ``__reduce_ex__`` (cpp/bindings/filter_py.hpp) looks
``reduction`` up here when a pickle is made, not when ``bloomline._core`` is
imported, so the compiled module never depends on the package above it at
import time; ScalableBloomFilter uses the same function. A restricted
unpickler that resolves only ``bloomline.*`` names reads every kind at every
protocol.
"""

from __future__ import annotations

from typing import Any, Union

__all__ = ["reduction", "restore"]


def restore(data: Union[bytes, str]) -> Any:
    """The filter a pickle holds: its to_bytes() output, read by
    bloomline.from_bytes (every kind, every check)."""
    if isinstance(data, str):  # protocols 0-2 (see reduction)
        data = data.encode("latin-1")
    from . import from_bytes

    return from_bytes(data)


def reduction(data: bytes, protocol: int) -> tuple[Any, tuple[Union[bytes, str]]]:
    """``__reduce_ex__``'s answer for a filter whose bytes are `data`.
    Protocols 0-2 have no bytes type: pickle would write bytes as a call to
    ``_codecs.encode``, a name outside bloomline, so they carry the bytes as
    latin-1 text (one character per byte) instead."""
    return (restore, (data if protocol >= 3 else data.decode("latin-1"),))
