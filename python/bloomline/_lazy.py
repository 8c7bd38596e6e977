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

Every import made on first use here (these modules, NumPy through _numpy.py,
html for display.py) goes through ``import_module``, which a fork waits for:
a child forked while another thread was part way through one would inherit
that module's import lock held by a thread it does not have, and hang at its
first use of the name. The wait holds no lock and is bounded, so a fork can
be delayed by it but never deadlocked; imports that start while a fork waits,
and imports made elsewhere (NumPy as the compiled core imports it for its
first array), are not covered.
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

# First-use imports in progress: thread ident -> how many (nested). Each
# thread writes only its own entry, under the GIL; nothing is locked.
_importing: dict[int, int] = {}
_FORK_WAIT_S = 10.0


def import_module(name: str) -> ModuleType:
    """importlib.import_module, which a fork on another thread waits for
    (loaded once: the import system's locks make threads that ask together
    wait for the one load)."""
    me = _thread.get_ident()
    _importing[me] = _importing.get(me, 0) + 1
    try:
        return importlib.import_module(name)
    finally:
        if _importing[me] > 1:
            _importing[me] -= 1
        else:
            del _importing[me]


def _before_fork() -> None:
    """Wait, at most _FORK_WAIT_S, until no other thread is in import_module
    (the forking thread's own import goes on in the child)."""
    me = _thread.get_ident()
    deadline = time.monotonic() + _FORK_WAIT_S
    while any(t != me for t in list(_importing)) and time.monotonic() < deadline:
        time.sleep(0.001)


def _after_fork_in_child() -> None:
    me = _thread.get_ident()
    for t in list(_importing):  # (the other threads are not in the child)
        if t != me:
            _importing.pop(t, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


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
