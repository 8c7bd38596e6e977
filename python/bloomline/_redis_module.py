"""Where bloomline's Redis module is installed (needs no redis-py: the CLI's
``bloomline redis-module`` prints it for ``redis-server --loadmodule``)."""

from __future__ import annotations

import os

from . import _core


def module_path() -> str:
    """The path of bloomline's Redis module, for ``redis-server --loadmodule``."""
    # Installed beside the extension (in an editable install, in its build tree).
    path = os.path.join(os.path.dirname(os.path.abspath(_core.__file__)), "redis_module.so")
    if not os.path.exists(path):  # pragma: no cover - a broken install
        raise FileNotFoundError(f"bloomline's Redis module is not installed at {path}")
    if not os.access(path, os.X_OK):  # pragma: no cover - a broken install
        # redis-server 7 refuses to load a module file it may not execute.
        raise PermissionError(f"bloomline's Redis module at {path} is not executable; run: chmod a+x {path}")
    return path
