"""A filter's parameters in Redis, and how a filter comes to exist there.

The meta is a hash at ``{key}:meta``. Creating a filter is idempotent, so a
step re-sent after a cut finishes the job and never wedges the key:

1. claim: one script writes every parameter and ``state=creating`` where
   no meta is (a re-send, or a second creator, reads what is there);
2. make: each shard (or the BF key) is made at its full size where it is
   missing, with its count of new keys, by anyone who finds the state
   ``creating`` (the creator, a process attaching meanwhile, or the next
   one after the creator died);
3. mark: ``state=ready``. From then on a missing key is an error.

A filter whose meta is gone while its bits remain is refused (its bits
would be lost under a new filter): never a silent fresh start.
"""

from __future__ import annotations

import secrets
import warnings
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import optimal_params
from .._layouts import layout_matches
from ._backend import gone
from ._errors import EvictionWarning, MissingKeyError
from ._names import FilterKeys
from ._registry import BACKENDS, storage_for
from ._wire import Job, Script, Sender

if TYPE_CHECKING:
    from .._core import Layout

META_VERSION = 2
"""The meta's version for blocked and standard-v1 filters (what bloomline
before the second index reads too); a filter of the standard layout's second index
is recorded at META_VERSION + 1, so that such a bloomline refuses it instead
of reading its bits by the first index (stored_layout)."""
DEFAULT_SHARD_BITS = 2**31  # 256 MB: far under Redis's 512 MB string limit
"""Bits per Redis string (shard) unless shard_bits says otherwise: 2**31 bits, 256 MB."""
FIELDS = ("kind", "layout", "capacity", "error_rate", "seed", "shards", "num_bits", "num_hashes", "shard_bits")

# KEYS: meta    ARGV: field, value, ...
_CLAIM = Script("""
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return redis.call('HGETALL', KEYS[1])
""")

# KEYS: meta
_MARK_READY = Script("""
if redis.call('HGET', KEYS[1], 'state') == 'creating' then redis.call('HSET', KEYS[1], 'state', 'ready') end
return 1
""")


def _our_index(kind: str) -> bool:
    """Are a filter of this meta kind's bits set by our index? (Not the
    server's own, 'bf'; a kind no backend keeps, a windowed filter's: yes.)"""
    return not any(kind in b.kinds and not b.our_index for b in BACKENDS.values())


def stored_layout(layout: str, version: int, kind: str = "") -> tuple[str, int]:
    """How a meta of base version `version` records `layout`: "standard"
    (the second index) at version + 1, which older bloomline refuses;
    "standard-v1" as "standard" at `version`, as older bloomline wrote it.
    A filter of a kind whose bits no index of ours sets (the server's own,
    Backend.our_index) records either as "standard" at `version`, as older
    bloomline wrote it."""
    if layout == "standard" and _our_index(kind):
        return "standard", version + 1
    return ("standard" if layout == "standard-v1" else layout), version


def read_layout(meta: dict[str, str], version: int, what: str) -> dict[str, str]:
    """meta (of base version `version`) with its layout as a name: a
    "standard" at `version` is "standard-v1". Another version is refused
    (ValueError naming it and `what`)."""
    have = meta.get("version")
    if have == str(version) and not _our_index(meta.get("kind", "")):
        return meta
    if have == str(version) and meta.get("layout") == "standard":
        meta["layout"] = "standard-v1"
    elif have != str(version) and (have != str(version + 1) or meta.get("layout") != "standard"):
        raise ValueError(f"{what} has meta version {have!r}; this bloomline reads version {version} (and "
                         f"{version + 1} for the standard layout) (copy it with an older bloomline's to_filter(), "
                         "then from_filter() here)")
    return meta


def plan(capacity: int, error_rate: float, layout: Layout, seed: int, shards: Optional[int], shard_bits: int,
         kind: str) -> dict[str, Any]:
    """A new filter's parameters (checked, each error naming its parameter),
    its shards as the backend that keeps its kind lays them out."""
    params = optimal_params(capacity, error_rate, layout)  # checks capacity, error_rate, layout
    capacity = int(capacity)  # (1e6 is taken, as the local filters take it; the meta records 1000000)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")
    if isinstance(shard_bits, bool) or not isinstance(shard_bits, int) or shard_bits % 512 or not (
            512 <= shard_bits <= 2**32):
        raise ValueError(f"shard_bits must be a multiple of 512 in [512, 2**32], got {shard_bits!r}")
    # ident: this making of the filter. Its keys' names carry it (each
    # backend's keys_of), so a handle attached to a filter since dropped and
    # made again (or restored over) names keys that no longer exist and is
    # refused.
    return dict(kind=kind, layout=layout, num_bits=params.num_bits, num_hashes=params.num_hashes, seed=seed,
                capacity=capacity, error_rate=error_rate, ident=secrets.token_hex(8),
                **storage_for(kind).geometry(params.num_bits, layout, shards, shard_bits))


def keys_of(name: str, meta: dict[str, Any]) -> FilterKeys:
    """The names of a filter's keys, from its meta."""
    return storage_for(str(meta["kind"]), name).keys_of(name, meta)


def key_patterns(name: str) -> list[str]:
    """SCAN patterns matching every key a filter at `name` may have, whatever
    its backend: its meta, data, counts, kept answers (RedisBloomFilter.drop)."""
    star = "\0"  # where a pattern's * goes, once the rest is escaped

    def pattern(text: str) -> str:
        return "".join("\\" + c if c in "*?[]\\" else c for c in text).replace(star, "*")

    names = [f"{name}:meta", *(n for b in BACKENDS.values() for n in b.key_patterns(name, star))]
    return list(dict.fromkeys(pattern(n) for n in names))


def delete_matching(client: Any, patterns: Sequence[str]) -> int:
    """Delete every key matching one of the patterns (SCAN; every primary of
    a cluster). How many were deleted."""
    deleted = 0
    for pattern in patterns:
        for key in list(client.scan_iter(match=pattern, count=1000)):
            deleted += int(client.delete(key))
    return deleted


def as_dict(reply: Any) -> dict[str, str]:
    items = list(reply.items()) if isinstance(reply, dict) else list(zip(reply[::2], reply[1::2]))
    return {(k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
            for k, v in items}


def read(sender: Sender, meta_key: str) -> Optional[dict[str, str]]:
    meta = as_dict(sender.call(meta_key, b"HGETALL", meta_key))
    if not meta:
        return None
    return read_layout(meta, META_VERSION, f"{meta_key!r}")


def check(name: str, stored: dict[str, str], wanted: dict[str, Any]) -> None:
    """Each field given must match the stored one (ValueError naming it)."""
    for field in FIELDS:
        if field not in wanted:
            continue
        have, want = stored.get(field, ""), wanted[field]
        same = (float(have) == float(want) if field == "error_rate" else
                _layout_answers(stored, str(want)) if field == "layout" else str(have) == str(want))
        if not same:
            shown = f"{float(have)!r} != given {want!r}" if field == "error_rate" else f"{have} != given {want}"
            raise ValueError(f"the filter at key {name!r} differs in {field} (stored {shown})")


def _layout_answers(stored: dict[str, str], want: str) -> bool:
    """Does the stored filter answer a request for layout `want`? The
    server's own ('bf'): by the name it records for it."""
    kind, have = stored.get("kind", ""), stored.get("layout", "")
    if not _our_index(kind):
        return have == stored_layout(want, META_VERSION, kind)[0]
    return layout_matches(have, want)


def _exist(sender: Sender, names: Sequence[str]) -> list[bool]:
    replies = sender.run([Job(n.encode(), b"EXISTS", (n,)) for n in names])
    for r in replies:
        if isinstance(r, Exception):
            raise r
    return [bool(int(r)) for r in replies]


def open_filter(sender: Sender, name: str, new: Optional[dict[str, Any]], wanted: dict[str, Any],
                missing: Optional[Callable[[str], Exception]] = None) -> dict[str, str]:
    """The meta of the filter at `name`, made from `new` if there is none
    (None: attach only), finished if a creator left it half made, its keys
    checked; `wanted`'s fields must match it. missing(meta_key): the error
    when there is no meta to attach to (a chain's stage: a lost key)."""
    meta_key = f"{name}:meta"
    meta = read(sender, meta_key)
    if meta is None and new is None:
        if missing is not None:
            raise missing(meta_key)
        raise ValueError(f"no filter at key {name!r}: pass capacity (and error_rate) to create one")
    if meta is None:
        assert new is not None
        planned = keys_of(name, new).data
        left = [k for k, there in zip(planned, _exist(sender, planned)) if there]
        meta = read(sender, meta_key)  # (a creator may have claimed it meanwhile: its keys, then)
        if left and meta is None:
            raise MissingKeyError(
                f"the filter at key {name!r} lost its meta {meta_key!r} (evicted, expired or deleted) while its "
                f"data remains ({left[0]!r}{' and more' if len(left) > 1 else ''}): made anew, its bits would be "
                f"lost. Drop it (RedisBloomFilter.drop(redis, {name!r})) to start over", key=meta_key)
        if meta is None:
            layout, version = stored_layout(new["layout"], META_VERSION, new["kind"])
            fields = dict(new, layout=layout, version=version, state="creating")
            meta = read_layout(as_dict(sender.script(_CLAIM, [meta_key], [x for kv in fields.items() for x in kv])),
                               META_VERSION, f"{meta_key!r}")
    check(name, meta, wanted)
    keys = keys_of(name, meta)
    if meta.get("state") == "creating":
        _finish(sender, name, meta, keys)
        meta["state"] = "ready"
    else:
        lost = [k for k, there in zip(keys.data, _exist(sender, keys.data)) if not there]
        if lost:
            raise gone(lost[0], f"the filter at {name!r}")
    return meta


def _finish(sender: Sender, name: str, meta: dict[str, str], keys: FilterKeys) -> None:
    storage_for(meta["kind"], name).finish(sender, meta, keys)
    sender.script(_MARK_READY, [f"{name}:meta"])


_policies: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def eviction_policy(client: Any) -> str:
    """The server's maxmemory-policy (read once per client; '' if CONFIG is
    refused), with one EvictionWarning if it may evict a filter's keys."""
    if client in _policies:
        return _policies[client]
    policy = ""
    try:
        nodes = [n.redis_connection for n in client.get_primaries()] if hasattr(client, "get_primaries") else [client]
        for node in nodes:
            got = node.config_get("maxmemory-policy").get("maxmemory-policy", "")
            policy = got.decode() if isinstance(got, bytes) else str(got)
            if policy != "noeviction":
                break
    except Exception:  # noqa: BLE001 - CONFIG renamed or refused (ACLs, managed Redis): nothing to warn about
        policy = ""
    if policy and policy != "noeviction":
        warnings.warn(
            f"this Redis evicts keys under memory pressure (maxmemory-policy {policy!r}): a filter whose key was "
            "evicted refuses every call (MissingKeyError), and an evicted kept answer makes a re-sent batch raise "
            "UnknownOutcome; set maxmemory-policy noeviction, or give Redis room", EvictionWarning, stacklevel=4)
    _policies[client] = policy
    return policy
