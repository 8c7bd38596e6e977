"""The package's Python kinds, loaded at their first use.

``import bloomline`` loads the compiled kinds, the sizing math, pickling and
display. The scalable chain, the windowed filter and the crawl frontier, with
what they import (dataclasses, pathlib, datetime...), load when one of their
names is first looked up: ``bloomline.ScalableBloomFilter``, ``from bloomline
import WindowedBloomFilter``, or a file or pickle that holds one. They were
most of the package's own import time, which a short command (``bloomline
dedup`` into a BloomFilter) or a process that uses only the C++ kinds paid
for nothing.

Code of the package that asks whether an object is one of these kinds asks
here (``is_scalable``, ``is_windowed``): an object of a kind whose module was
never loaded is none of its instances, so the question loads nothing.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

    from .scalable import ScalableBloomFilter
    from .windowed import WindowedBloomFilter

__all__ = ["HOMES", "is_scalable", "is_windowed", "load", "module", "scalable_kind", "windowed_kind"]

# Each name loaded at its first use, and the module of the package that defines it.
HOMES = {"ScalableBloomFilter": "scalable", "WindowedBloomFilter": "windowed", "DedupQueue": "frontier"}


def module(name: str) -> ModuleType:
    """The package's module of that name, loaded (once: the import system's
    lock makes threads that ask together wait for the one load)."""
    return importlib.import_module(f"{__package__}.{name}")


def load(name: str) -> Any:
    """The object named, its module loaded."""
    return getattr(module(HOMES[name]), name)


def scalable_kind() -> type[ScalableBloomFilter]:
    kind: type[ScalableBloomFilter] = load("ScalableBloomFilter")
    return kind


def windowed_kind() -> type[WindowedBloomFilter]:
    kind: type[WindowedBloomFilter] = load("WindowedBloomFilter")
    return kind


def _loaded(name: str) -> Any:
    """The class named if its module is loaded (and has defined it), else None."""
    return getattr(sys.modules.get(f"{__package__}.{HOMES[name]}"), name, None)


def is_scalable(obj: object) -> TypeGuard[ScalableBloomFilter]:
    kind = _loaded("ScalableBloomFilter")
    return kind is not None and isinstance(obj, kind)


def is_windowed(obj: object) -> TypeGuard[WindowedBloomFilter]:
    kind = _loaded("WindowedBloomFilter")
    return kind is not None and isinstance(obj, kind)
