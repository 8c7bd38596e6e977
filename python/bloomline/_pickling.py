"""Any filter from its bytes (``from_bytes``: every kind, the kind read from
the header), and what a pickle of any filter names: ``restore``, a
module-level function of this package, and nothing else
(docs/design/api.md, "Pickling").

Every kind's ``__reduce_ex__`` is ``_reduce_ex``, given by ``picklable``,
the one place that names ``restore``: to the C++ kinds here (the compiled
module imports nothing of the package), and by scalable.py and windowed.py
to theirs as they are defined, since those load at their first use
(_lazy.py). A restricted unpickler that resolves only ``bloomline.*`` names
reads every kind at every protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, SupportsIndex, Union

from . import _core, _lazy
from ._core import BloomFilter, CountingBloomFilter

if TYPE_CHECKING:
    from .scalable import ScalableBloomFilter
    from .windowed import WindowedBloomFilter
else:
    # What from_bytes' annotation names at run time (typing.get_type_hints):
    # Any until the kind loads, then the kind itself (picklable puts it here).
    ScalableBloomFilter = WindowedBloomFilter = Any

__all__ = ["from_bytes", "picklable", "restore"]


def from_bytes(data: Any) -> Union[BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter]:
    """Read any filter written by to_bytes (or a saved file's bytes); the kind
    comes from the header, and ValueError says what is wrong with bad data.
    A WindowedBloomFilter reads the system clock (WindowedBloomFilter.from_bytes
    takes another)."""
    kind = _core.read_header(data)["kind"]
    if kind == "ScalableBloomFilter":
        return _lazy.scalable_kind().from_bytes(data)
    if kind == "WindowedBloomFilter":
        return _lazy.windowed_kind().from_bytes(data)
    filt: Union[BloomFilter, CountingBloomFilter] = _core.from_bytes(data)
    return filt


def restore(data: Union[bytes, str]) -> Any:
    """The filter a pickle holds: its to_bytes() output, read by from_bytes
    (every kind, every check). Protocols 0-2 carry the bytes as latin-1 text
    (_reduce_ex says why)."""
    if isinstance(data, str):
        try:
            data = data.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("data is text with characters past U+00FF: not a filter's bytes as a pickle of "
                             "protocol 0-2 carries them (one latin-1 character a byte)") from None
    return from_bytes(data)


_KINDS: set[type] = set()


def _exact_kind(self: Any, what: str) -> None:
    """A subclass of a kind is refused where its class and attributes would be lost: a pickle or a copy holds
    the kind's bytes, and gives back the kind itself."""
    cls = type(self)
    if cls not in _KINDS:
        kind = next(k for k in cls.__mro__ if k in _KINDS)
        raise TypeError(f"{what} a {cls.__name__} would give back a plain {kind.__name__}, without its class "
                        f"or attributes (a subclass that defines __reduce_ex__, __copy__ and __deepcopy__ pickles and "
                        "copies its own way)")


def _reduce_ex(self: Any, protocol: SupportsIndex) -> tuple[Any, tuple[Union[bytes, str]]]:
    """What a pickle of a filter holds: restore and the filter's checked
    bytes (a pybind11 function such as _core.from_bytes would pickle as a
    call to builtins.eval). Protocols 0-2 have no bytes type (pickle would
    write bytes as a call to _codecs.encode, a name outside bloomline), so
    they carry the bytes as latin-1 text, one character per byte."""
    _exact_kind(self, "a pickle of")
    data: bytes = self.to_bytes()
    return restore, ((data if int(protocol) >= 3 else data.decode("latin-1")),)


def _reduce(self: Any) -> tuple[Any, tuple[Union[bytes, str]]]:
    return _reduce_ex(self, 4)


def picklable(kind: type) -> None:
    """Give a filter kind its pickling: its checked bytes, read back by
    restore; and its copy.copy and copy.deepcopy, refused for a subclass
    (they give back the kind) as its pickling is."""
    _KINDS.add(kind)
    setattr(kind, "__reduce_ex__", _reduce_ex)
    setattr(kind, "__reduce__", _reduce)
    copy_one, copy_deep = getattr(kind, "__copy__"), getattr(kind, "__deepcopy__")

    def __copy__(self: Any) -> Any:
        _exact_kind(self, "copy.copy of")
        return copy_one(self)

    def __deepcopy__(self: Any, memo: dict[int, Any]) -> Any:
        _exact_kind(self, "copy.deepcopy of")
        return copy_deep(self, memo)

    setattr(kind, "__copy__", __copy__)
    setattr(kind, "__deepcopy__", __deepcopy__)
    globals()[kind.__name__] = kind


picklable(BloomFilter)
picklable(CountingBloomFilter)
