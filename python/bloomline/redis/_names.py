"""Names in Redis: the client a filter talks through, key names that share
a cluster slot, and the ids that name a batch across processes and its
re-sends (docs/FORMAT.md, "Keys")."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from typing import Any, Optional

import redis as _redis


def client_of(redis: Any) -> Any:
    """A redis-py client, or one made from a URL. Replies are read as bytes
    (bits, answers, counts): a client made with decode_responses=True is
    given a sibling on the same server that does not decode (a Sentinel's
    client too: its sibling asks the same Sentinels for the same service)."""
    if isinstance(redis, str):
        return _redis.Redis.from_url(redis)
    if not redis.get_encoder().decode_responses:
        return redis
    pool = getattr(redis, "connection_pool", None)
    if pool is None:  # a cluster client: its nodes' settings are its own
        raise ValueError("redis: pass a client made with decode_responses=False (bloomline reads bytes), or a URL")
    # (a Sentinel pool names its own pool among its connections' settings: the sibling makes its own)
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kwargs.update(decode_responses=False, connection_class=pool.connection_class)
    if hasattr(pool, "service_name") and hasattr(pool, "sentinel_manager"):  # master_for / slave_for
        sibling = type(pool)(pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
                             check_connection=pool.check_connection, **kwargs)
    else:
        sibling = type(pool)(**kwargs)
    return _redis.Redis(connection_pool=sibling)


# ---- key names ------------------------------------------------------------------


def hash_tag(name: str) -> Optional[str]:
    """The part of a key name Redis Cluster hashes, if not the whole name:
    from the first '{' to the next '}', when not empty."""
    start = name.find("{")
    if start < 0:
        return None
    end = name.find("}", start + 1)
    return name[start + 1 : end] if end > start + 1 else None


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def routable(name: str) -> str:
    """name, unless its braces make it a key no other key can share a slot
    with ('a}b', 'x{}y'): then the name inside an escaped hash tag."""
    if hash_tag(name) is not None or ("{" not in name and "}" not in name):
        return name
    return "{" + _escape(name) + "}"


def sibling(route: str, suffix: str) -> str:
    """A key in the slot of `route` (a routable() name)."""
    return route + suffix if hash_tag(route) is not None else "{" + route + "}" + suffix


def tag_of_chain(key: str) -> str:
    """The hash tag every key of a chain in Redis starts with (one slot)."""
    return "{" + (key if "{" not in key and "}" not in key else _escape(key)) + "}"


class _BatchIds:
    """Batch ids unique across processes and time: a random prefix per
    process (made anew after a fork) and a counter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._prefix = ""
        self._count: Iterator[int] = iter(())

    def next(self) -> str:
        if self._pid != os.getpid():  # (a new process: a fork starts with one thread)
            with self._lock:
                if self._pid != os.getpid():
                    self._prefix, self._count = os.urandom(8).hex(), itertools.count()
                    self._pid = os.getpid()
        return f"{self._prefix}{next(self._count):x}"  # next() of a count is atomic under the GIL


batch_ids = _BatchIds()
