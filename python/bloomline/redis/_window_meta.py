"""A windowed filter's meta in Redis (_windowed.py): claimed where there is
none, compared with what a handle asks for, deleted whole; and a handle
that finds the filter made again after its keys all expired takes the new
making (``reattach``).

An idle fleet's filter expires whole (meta and ring, by their TTLs), and
the next handle to add makes the meta again under its own ident. A handle
attached before is then refused (REPLACED) while its keys may be live: the
filter lost or deleted under it. Once its newest generation is past the
window by the server's clock (or it never added), none of its keys are in
any filter, so writing to the new making cannot give a wrong answer: it
takes the stored ident and goes on. (Refused, a long-lived worker of an
idle fleet failed for good when a newly started one added first.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, cast

import redis as _redis

from .._layouts import layout_matches
from .._window_parts import window_seconds
from ._errors import MissingKeyError
from ._meta import as_dict, delete_matching, read_layout
from ._names import client_of, tag_of_chain
from ._wire import Script, Sender, _error_code

if TYPE_CHECKING:
    from .._core import Layout
    from ._windowed import RedisWindowedFilter

__all__ = ["MARGIN_MS", "META_VERSION", "delete_windowed", "params_sig_of", "reattach", "redis_window", "run_reattaching",
           "stored_window_layout", "window_error"]


def _flat(fields: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(x) for kv in fields.items() for x in kv)


# A generation's keys outlive its last live moment by this much: the end is
# rounded to milliseconds, and a reader between two steps may still name it.
MARGIN_MS = 1_000
META_VERSION = 2  # 2: the meta carries an ident, and sig ends in it
_REDIS_MAX_BITS = 2**32  # one generation is one Redis string (512 MB at most)
# The longest window: every generation's expiry time stays a whole number of
# milliseconds below 2**53 (what a script's number and the module write
# exactly) for any G, for the next hundred thousand years of clocks.
MAX_WINDOW_S = 1e12


def redis_window(window: object) -> float:
    """A window in seconds as a filter in Redis takes it (window_seconds', at most MAX_WINDOW_S)."""
    seconds = window_seconds(window)
    if seconds > MAX_WINDOW_S:
        raise ValueError(f"window must be at most {MAX_WINDOW_S:g} s (about 31,700 years) for a filter in Redis "
                         f"(its generations' expiry times are milliseconds below 2**53), got {window!r}")
    return seconds

# KEYS: meta, bits_0 .. bits_G, gen_0 .. gen_G    ARGV: life_ms, span, ring,
# then field, value, ... The meta made where there is none (with the life of
# one ring), and what is there returned. A meta gone while a generation of
# its ring lives (or bits whose number is gone) was lost, not expired with an
# idle ring: refused as an add refuses it (MISSING), never made again here.
_CLAIM = Script("""
if redis.call('EXISTS', KEYS[1]) == 0 then
  local span, ring = tonumber(ARGV[2]), tonumber(ARGV[3])
  local t = redis.call('TIME')
  local c = math.floor((tonumber(t[1]) + tonumber(t[2]) / 1000000) / span)
  local numbers = {}
  for i = 0, ring - 1 do
    local n = redis.call('HGET', KEYS[2 + ring + i], 'number')
    if n then
      numbers[i] = tonumber(n)
      if numbers[i] > c then c = numbers[i] end
    elseif redis.call('EXISTS', KEYS[2 + i]) == 1 then
      return redis.error_reply('MISSING ' .. KEYS[1])
    end
  end
  for i = 0, ring - 1 do
    if numbers[i] and numbers[i] > c - ring then return redis.error_reply('MISSING ' .. KEYS[1]) end
  end
  redis.call('HSET', KEYS[1], unpack(ARGV, 4))
  local t = redis.call('TIME')  -- epoch: this meta's making (_plain.py's add checks it)
  redis.call('HSET', KEYS[1], 'epoch', t[1] .. '.' .. t[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
""")

def delete_windowed(redis: Any, key: str) -> int:
    """Remove every Redis key of the windowed filter at ``key`` (its meta,
    generations and kept answers), whatever state it is in: the way to
    start over where no handle can attach (its meta lost while a generation
    lives). ``redis``: a redis-py client or a URL. How many keys it deleted.
    Handles attached before are refused afterwards."""
    glob = "".join("\\" + c if c in "*?[]\\" else c for c in tag_of_chain(key))
    return delete_matching(client_of(redis), [f"{glob}:meta", f"{glob}:w:*", f"{glob}:ans:*"])


def _claim(sender: Sender, keys: list[str], args: list[Any], error: Callable[[Exception], Exception]) -> dict[str, str]:
    """What _CLAIM leaves in the meta; its refusal (MISSING) raised as error() makes it."""
    try:
        return as_dict(sender.script(_CLAIM, keys, args))
    except _redis.ResponseError as e:
        raise error(e) from None


# The parameters an attaching handle must match, in the meta's words.
_COMPARED = ("kind", "capacity", "error_rate", "window", "generations", "layout", "seed")


def params_sig_of(fields: dict[str, Any]) -> str:
    """The parameters part of a meta's sig (then `|` and the ident)."""
    return "|".join(str(fields[f]) for f in (*_COMPARED, "num_bits", "num_hashes", "version"))


def stored_window_layout(key: str, stored: dict[str, str], layout: Layout) -> Layout:
    """The layout a handle asking for `layout` takes of the windowed filter
    stored at key: its own where "standard" finds one of the first index;
    ValueError where they differ. (Another kind or version: the checks after
    say so.)"""
    if stored.get("kind") != "windowed" or stored.get("version") not in (str(META_VERSION), str(META_VERSION + 1)):
        return layout
    have = read_layout(dict(stored), META_VERSION, f"the windowed filter at {key!r}")["layout"]
    if not layout_matches(have, layout):
        raise ValueError(f"the windowed filter at key {key!r} differs in layout (stored {have} != given {layout})")
    return cast("Layout", have)


def _check(key: str, stored: dict[str, str], wanted: dict[str, Any]) -> None:
    """The parameters stored at key are those wanted, or a ValueError naming the field."""
    for field in _COMPARED:
        have, want = stored.get(field, ""), str(wanted[field])
        same = (have == want if field not in ("error_rate", "window")
                else bool(have) and float(have) == float(want))
        if not same:
            if field == "kind":
                raise ValueError(f"key {key!r} holds a Redis filter of kind {have or 'unknown'!r}, not a "
                                 "windowed filter: another key, or delete that one first")
            raise ValueError(f"the windowed filter at key {key!r} differs in {field} (stored {have} != "
                             f"given {want})")


def reattach(f: RedisWindowedFilter, e: Exception) -> bool:
    """After e, f's call refused: True where e was REPLACED and f's newest
    generation is past the window by the server's TIME (or f never added),
    f then bound to the stored making (its sig and ident) to send again."""
    if not (isinstance(e, _redis.ResponseError) and _error_code(e) == "REPLACED"):
        return False
    w = f._w
    sec, usec = f._sender.call(w.meta.encode(), b"TIME")
    if f._newest > math.floor((int(sec) + int(usec) / 1e6) / w.span) - len(w.bits):
        return False  # (its keys may be live: the filter was lost or deleted under them)
    life_ms = math.ceil(len(w.bits) * w.span * 1000) + MARGIN_MS
    stored = _claim(f._sender, [w.meta, *w.bits, *w.gens], [life_ms, repr(w.span), len(w.bits), *w.meta_fields],
                    f._error)
    if stored.get("sig", "").rsplit("|", 1)[0] != w.sig.rsplit("|", 1)[0]:
        return False  # (made again with other parameters since: MISMATCH on the next call)
    fields = dict(zip(w.meta_fields[::2], w.meta_fields[1::2]))
    fields["ident"], fields["sig"] = stored["ident"], stored["sig"]
    f._w = dataclasses.replace(w, sig=stored["sig"], meta_fields=_flat(fields))
    f._newest, f._epoch = -1, ""
    return True


def run_reattaching(f: RedisWindowedFilter, make: Callable[[], Any]) -> Any:
    """The reply of the command make() gives (one of f's whole-ring reads),
    made and sent once more where f was refused because the filter was made
    again after its keys all expired (reattach), as its adds and lookups
    are; a refusal raised as f's error."""
    reply = f._sender.run([make()])[0]
    if isinstance(reply, Exception) and reattach(f, reply):
        reply = f._sender.run([make()])[0]
    if isinstance(reply, Exception):
        raise f._error(reply)
    return reply


def window_error(f: RedisWindowedFilter, e: Exception) -> Exception:
    """A refusal of f's call (its code) as the exception f raises; other errors as they are."""
    if isinstance(e, _redis.ResponseError) and _error_code(e) == "REPLACED":
        return MissingKeyError(
            f"{f._what} was deleted and made again since this handle attached (ident {f.ident}), or lost whole "
            "(evicted, a restart without its data) or expired whole and was made again: the keys this handle added are not in it, so its answers would be wrong, "
            "and a clear() by it would wipe the new filter's keys. Attach again", key=f._w.meta)
    if isinstance(e, _redis.ResponseError) and _error_code(e) == "REMADE":
        return MissingKeyError(
            f"{f._what} was lost and made again since this handle's last add, whose generation still lives (its "
            "meta is of another making, or from before a clear this handle saw: evicted or deleted whole, or the "
            "server went back to an older snapshot or a replica): the keys this handle added are not in it, so its "
            "answers would be wrong. A new handle goes on (those keys then read new once more)", key=f._w.meta)
    if isinstance(e, _redis.ResponseError) and _error_code(e) == "MISMATCH":
        # (a MissingKeyError, as REPLACED is: the filter this handle added to is gone, and an add's error carries
        # its facts where the callers of the other refusals catch them)
        return MissingKeyError(f"{f._what} was made again with other parameters since this handle attached: the "
                               "keys this handle added are not in it. Attach again", key=f._w.meta)
    if isinstance(e, _redis.ResponseError) and _error_code(e) in ("MISSING", "WRONGSIZE"):
        words = str(e).split()
        name = words[1] if len(words) > 1 else "?"
        how = (f" (this server's maxmemory-policy is {f._policy!r}: it evicts keys under memory pressure)"
               if f._policy and f._policy != "noeviction" else "")
        state = "is gone" if words[0] == "MISSING" else "has the wrong size"
        return MissingKeyError(
            f"{name!r}, a key of {f._what}, {state} while a generation of the filter lives: evicted{how}, "
            "or deleted. Refused rather than read as an empty generation (every key in it new again): "
            f"delete() the filter, or bloomline.redis.delete_windowed(redis, {f._key!r}), to start over",
            key=name)
    return e
