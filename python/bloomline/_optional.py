"""The optional dependencies: imported where needed, and when one is
missing an ImportError that names what needs it and the pip extra that
installs it (``pip install 'bloomline[redis]'``), not Python's bare "No
module named 'redis'"."""

from __future__ import annotations

import importlib
from types import ModuleType

# top-level module -> (what pip installs, the extra of pyproject.toml that brings it; None: no extra)
EXTRAS: dict[str, tuple[str, str | None]] = {
    "redis": ("redis-py", "redis"),
    "scrapy": ("Scrapy", "scrapy"),
    "scrapy_redis": ("scrapy-redis", None),
    "matplotlib": ("matplotlib", "plot"),
    "pandas": ("pandas", None),
}


def install_hint(module: str) -> str:
    """`pip install 'bloomline[redis]'` (or the package itself where no extra has it)."""
    package, extra = EXTRAS[module.partition(".")[0]]
    return f"pip install 'bloomline[{extra}]'" if extra else f"pip install {package}"


def require(module: str, needed_by: str) -> ModuleType:
    """import module, or ModuleNotFoundError("bloomline.redis needs redis-py:
    pip install 'bloomline[redis]'"). Only the module's own absence is
    translated: an error inside an installed one (a broken dependency of
    it) propagates as it is, naming what is really missing."""
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name not in (top, module):
            raise
        package = EXTRAS[top][0]
        raise ModuleNotFoundError(f"{needed_by} needs {package}: {install_hint(top)}", name=exc.name) from None
