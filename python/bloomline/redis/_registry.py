"""Which backend serves a filter: the backends by name, and the choice for
a server (the module where it is loaded, else plain Redis)."""

from __future__ import annotations

from typing import Any

import redis as _redis

from ._backend import Backend
from ._bf import BfBackend
from ._module import ModuleBackend
from ._plain import PlainBackend

BACKENDS: dict[str, Backend] = {b.name: b for b in (ModuleBackend(), PlainBackend(), BfBackend())}


def server_has_module(client: Any) -> bool:
    node = client.get_nodes()[0].redis_connection if hasattr(client, "get_nodes") else client
    try:
        mods = node.execute_command("MODULE", "LIST")
    except _redis.ResponseError:  # MODULE LIST refused (ACLs): assume plain Redis
        return False
    for m in mods or []:
        name = m.get(b"name") if isinstance(m, dict) else (m[1] if len(m) > 1 else None)
        if name in (b"bloomline", "bloomline"):
            return True
    return False


def choose_backend(kind: str, backend: str, client: Any, key: str) -> Backend:
    """The backend for a filter of this kind, as asked for ('auto': the
    module if the server has it, else plain)."""
    if kind == "bf":
        if backend not in ("auto", "bf"):
            raise ValueError(f"the filter at key {key!r} is a server Bloom filter (BF.*): backend must be 'bf' or "
                             f"'auto', got {backend!r}")
        return BACKENDS["bf"]
    if backend == "bf":
        raise ValueError(f"the filter at key {key!r} keeps bloomline's bits: backend 'bf' cannot read it (use "
                         "'module', 'plain' or 'auto')")
    has_module = server_has_module(client)
    if backend == "module" and not has_module:
        from . import module_path

        raise ValueError(f"backend 'module' needs bloomline's module on the server: redis-server --loadmodule "
                         f"{module_path()}")
    return BACKENDS[backend if backend != "auto" else ("module" if has_module else "plain")]
