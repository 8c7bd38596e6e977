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

Every import made on first use (these modules, and NumPy for _numpy.py) goes
through ``import_module``, which a fork waits for: a child forked while
another thread was part way through one would inherit that module's import
lock held by a thread it does not have, and its first lookup of the name
would wait forever.
"""

from __future__ import annotations

import _thread
import importlib
import os
import sys
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

    from .scalable import ScalableBloomFilter
    from .windowed import WindowedBloomFilter

__all__ = ["HOMES", "import_module", "is_scalable", "is_windowed", "load", "module", "scalable_kind",
           "windowed_kind"]

# Each name loaded at its first use, and the module of the package that defines it.
HOMES = {"ScalableBloomFilter": "scalable", "WindowedBloomFilter": "windowed", "DedupQueue": "frontier"}

# Held while a first-use import runs, and by a fork from just before it to just
# after (in the parent and in the child), so that no fork splits an import.
_importing = _thread.RLock()
_NUMPY_WAIT_S = 60.0


def _before_fork() -> None:
    _importing.acquire()
    # The compiled core imports NumPy itself when it first makes an array, not
    # through import_module: wait for such an import to end too (bounded: a
    # NumPy import that never ends leaves the child no worse off than before).
    deadline = time.monotonic() + _NUMPY_WAIT_S
    while (getattr(getattr(sys.modules.get("numpy"), "__spec__", None), "_initializing", False)
           and time.monotonic() < deadline):
        time.sleep(0.001)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_importing.release, after_in_child=_importing.release)


def import_module(name: str) -> ModuleType:
    """importlib.import_module, never split by a fork (loaded once: the import
    system's locks make threads that ask together wait for the one load)."""
    with _importing:
        return importlib.import_module(name)


def module(name: str) -> ModuleType:
    """The package's module of that name, loaded."""
    return import_module(f"{__package__}.{name}")


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
