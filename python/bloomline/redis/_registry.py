"""Which backend serves a filter: the backends by name, and the choice for
a server (the module where it is loaded, else plain Redis)."""

from __future__ import annotations

import weakref
from typing import Any, Optional

import redis as _redis

from .._redis_module import module_path
from ._backend import Backend
from ._bf import BfBackend
from ._errors import ModuleMissing
from ._module import ModuleBackend
from ._plain import PlainBackend

BACKENDS: dict[str, Backend] = {b.name: b for b in (ModuleBackend(), PlainBackend(), BfBackend())}


# The module's version this package speaks (its SetModuleAttribs): 4 sends
# each shard's size with ADD, CADD and HAS, which 3 does not take. A later
# module still takes the forms of earlier ones (an AOF of theirs replays).
MODULE_VERSION = 4


def _has_module(node: Any) -> bool:
    """Whether the server has bloomline's module; ModuleMissing where it has
    an older one (its commands take fewer arguments)."""
    mods = node.execute_command("MODULE", "LIST")
    for m in mods or []:
        fields = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
        name = fields.get(b"name", fields.get("name"))
        if name in (b"bloomline", "bloomline"):
            ver = fields.get(b"ver", fields.get("ver"))
            if ver is not None and int(ver) < MODULE_VERSION:
                raise ModuleMissing(f"the server's bloomline module is version {int(ver)}, older than the version "
                                    f"{MODULE_VERSION} this bloomline speaks: load the module this package ships on every node "
                                    f"(redis-server --loadmodule {module_path()})")
            return True
    return False


def server_has_module(client: Any) -> bool:
    node = client.get_nodes()[0].redis_connection if hasattr(client, "get_nodes") else client
    try:
        return _has_module(node)
    except ModuleMissing:  # an older module: said, never taken for plain Redis
        raise
    except _redis.ResponseError:  # MODULE LIST refused (ACLs): assume plain Redis
        return False


_replica_checks: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def replicas_without_module(client: Any) -> list[str]:
    """The replicas (host:port) of the server's primaries that answer
    MODULE LIST without bloomline's module (read once per client). A
    replica ROLE lists but this process cannot reach, or that refuses
    MODULE LIST, is not known and not listed; nor is one that joins later."""
    if client in _replica_checks:
        return _replica_checks[client]
    lacking: list[str] = []
    primaries = [n.redis_connection for n in client.get_primaries()] if hasattr(client, "get_primaries") else [client]
    for primary in primaries:
        try:
            role = primary.execute_command("ROLE")
        except _redis.RedisError:  # ROLE refused (ACLs): its replicas are not known
            continue
        if not role or role[0] not in (b"master", "master"):
            continue
        pool = primary.connection_pool
        kwargs = dict(pool.connection_kwargs)
        for entry in role[2] or []:
            host = entry[0].decode() if isinstance(entry[0], bytes) else str(entry[0])
            port = int(entry[1])
            # Briefly: a replica behind NAT, or elsewhere, cannot hold up an attach.
            replica = _redis.Redis(connection_pool=type(pool)(
                connection_class=pool.connection_class,
                **dict(kwargs, host=host, port=port, socket_timeout=1.0, socket_connect_timeout=1.0)))
            try:
                if not _has_module(replica):
                    lacking.append(f"{host}:{port}")
            except ModuleMissing:  # an older module drops the adds it is sent, as none does
                lacking.append(f"{host}:{port} (an older module)")
            except _redis.RedisError:  # unreachable, or MODULE LIST refused: not known
                pass
            finally:
                replica.connection_pool.disconnect()
    _replica_checks[client] = lacking
    return lacking


def _lacking_error(key: str, lacking: list[str], made: bool) -> ModuleMissing:
    what = (f"the filter at key {key!r} was made with backend 'module'" if made
            else "backend 'module' was asked for")
    return ModuleMissing(
        f"{what}, and the replica{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} of this server "
        f"{'have' if len(lacking) > 1 else 'has'} no bloomline module: a replica without it drops every add, and "
        f"once promoted reports every key new again. Load the module on every node, replicas too "
        f"(redis-server --loadmodule {module_path()})")


def storage_for(kind: str, key: str = "") -> Backend:
    """The backend that keeps a filter of this meta kind (the first one, for
    bloomline's bits: the module and plain keep the same keys)."""
    for b in BACKENDS.values():
        if kind in b.kinds:
            return b
    raise ValueError(f"the filter at key {key!r} is of kind {kind!r}, which this bloomline does not know (made by a "
                     "newer one?)")


def check_name(backend: str) -> None:
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, ('auto', *BACKENDS)))}, got {backend!r}")


def new_backend(backend: str, client: Any) -> Backend:
    """The backend a new filter (or chain) is made with, recorded in its
    meta: 'auto' is the module where the server and every replica it can
    reach have it, else plain; a backend named is checked against the
    server where it needs more than plain Redis (the module)."""
    check_name(backend)
    if backend not in ("auto", "module"):
        return BACKENDS[backend]
    has_module = server_has_module(client)
    if backend == "module" and not has_module:
        raise ModuleMissing(f"backend 'module' needs bloomline's module on the server: redis-server --loadmodule "
                            f"{module_path()}")
    if not has_module:
        return BACKENDS["plain"]
    lacking = replicas_without_module(client)
    if lacking and backend == "module":
        raise _lacking_error("", lacking, made=False)
    return BACKENDS["plain" if lacking else "module"]


def choose_backend(kind: str, backend: str, client: Any, key: str, recorded: Optional[str] = None) -> Backend:
    """The backend for a filter of this kind, as asked for ('auto': the
    one recorded in its meta; for a filter that records none, made before
    backends were recorded, the module if the server has it, else plain).
    A recorded backend binds: another one asked for, or the module missing
    on this server or a replica it can reach, raises (never a switch)."""
    check_name(backend)
    keepers = [b for b in BACKENDS.values() if kind in b.kinds]
    if not keepers:
        storage_for(kind, key)  # raises, naming the kind
    if backend != "auto" and BACKENDS[backend] not in keepers:
        raise ValueError(f"the filter at key {key!r} is of kind {kind!r}, kept by backend "
                         f"{' or '.join(repr(b.name) for b in keepers)}: backend {backend!r} cannot read it (pass "
                         f"{keepers[0].name!r} or 'auto')")
    if recorded is not None and recorded not in (b.name for b in keepers):
        raise ValueError(f"the filter at key {key!r} records backend {recorded!r}, which this bloomline does not "
                         "know for its kind (made by a newer one?)")
    if len(keepers) == 1:
        return keepers[0]
    if recorded is not None and backend not in ("auto", recorded):
        raise ValueError(f"the filter at key {key!r} was made with backend {recorded!r}, and a filter keeps its "
                         f"backend: backend {backend!r} is refused (its replicas and AOF must run the commands it was "
                         f"made with). Pass backend={recorded!r} or 'auto'")
    if recorded == "plain":
        return BACKENDS["plain"]
    has_module = server_has_module(client)
    if recorded == "module":
        if not has_module:
            raise ModuleMissing(
                f"the filter at key {key!r} was made with backend 'module' (its meta records it), and this server "
                f"has no bloomline module. bloomline never switches a filter's backend: if this server was a "
                f"replica without the module, it dropped every add, and read as plain Redis every key would be new "
                f"again. Load the module on every node, replicas too (redis-server --loadmodule {module_path()}), "
                f"and restore the filter if it lost adds")
        lacking = replicas_without_module(client)
        if lacking:
            raise _lacking_error(key, lacking, made=True)
        return BACKENDS["module"]
    if backend == "module" and not has_module:
        raise ModuleMissing(f"backend 'module' needs bloomline's module on the server: redis-server --loadmodule "
                            f"{module_path()}")
    return BACKENDS[backend if backend != "auto" else ("module" if has_module else "plain")]


def window_backend(backend: str, client: Any, key: str, recorded: Optional[str] = None) -> Backend:
    """The backend a windowed filter runs on. Before its meta is read
    (recorded None): 'auto' is the module where the server and every replica
    it can reach have it, else plain, as for a new fixed filter; a backend
    named that keeps none (bf) raises, saying why and what to pass. Once
    read, the backend its meta records binds, as a fixed filter's does."""
    check_name(backend)
    if backend != "auto":
        BACKENDS[backend].refuse_windows()
    if recorded is None:
        return new_backend(backend, client)
    return choose_backend("bits", backend, client, key, recorded)
