"""NumPy, imported when first used.

Importing NumPy is most of what `import bloomline` costs (a third of a
second on some servers, where it starts a thread pool), and `bloomline
dedup` into a BloomFilter never needs it: its blocks go from bytes to bytes
in the core. So the modules `import bloomline` loads take `np` from here
(bloomline.redis and bloomline.analysis, loaded when used, import NumPy): the first attribute
looked up imports NumPy (Python's import lock makes that safe from any
thread, and _lazy.import_module makes a fork wait for it) and keeps the attribute, so
later lookups are plain reads. The type checker sees NumPy itself.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ._lazy import import_module

__all__ = ["np"]


class _NumPy(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        value = getattr(import_module("numpy"), name)
        setattr(self, name, value)
        return value


if TYPE_CHECKING:
    import numpy as np
else:
    np = _NumPy("numpy")
