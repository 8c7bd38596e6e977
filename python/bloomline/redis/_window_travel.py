"""A RedisWindowedFilter to and from a local WindowedBloomFilter's file (kind
4, docs/FORMAT.md), for to_filter, dump and restore (_travel.py), through
the backend's window_dump_job and window_upload_job (the plain backend's
scripts, _plain.py: _WINDOW_LIVE and _WINDOW_UPLOAD).

**Download** (the filter sends the dump, file_bytes reads it). One script
reads the server's TIME, the ring and the bits of every live generation:
the copy is one moment of the filter, whatever the fleet adds meanwhile.
The local filter holds those generations with their numbers and counts; on
a machine whose clock agrees with the server's it answers as the Redis
filter did.

**Upload.** Into a filter just made at the key (its meta claimed, its ring
empty), one script writes each generation of the file that is live by the
server's clock into the slot the add script would have started it in, with
its number, its count, the meta's record of the slot, and the expiry it
would have had. A generation the server's clock has left behind is not
written (it would be gone by now); one newer than the server's current
generation plus one is refused: the file was made by a clock ahead of the
server's, and a ring stuck in a future generation would keep adds there
until the server caught up. A ring written to between the making and the
upload (another writer at the same key) is refused, never merged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from .. import _core
from .._core import BloomFilter
from ._backend import Backend
from ._names import WindowKeys
from ._wire import Sender

Errors = Callable[[Exception], Exception]  # a Redis error reply as the filter raises it (MissingKeyError, ...)


def file_bytes(reply: list[Any], w: WindowKeys, capacity: int, error_rate: float, window: float) -> bytes:
    """The live generations of the filter at w, by the server's clock, read
    in one step (the reply of backend.window_dump_job), as a kind-4 file's
    bytes (WindowedBloomFilter.from_bytes)."""
    generations = len(w.bits) - 1  # (the ring holds G + 1)
    rate = _core.window_generation_error_rate(error_rate, generations)
    live = sorted((int(n), int(count), bytes(bits)) for _slot, n, count, bits in reply[1:])  # oldest first
    filters = [BloomFilter.from_buffer(bits, w.num_bits, w.num_hashes, layout=w.layout, seed=w.seed,
                                       capacity=capacity, error_rate=rate, insert_count=count)
               for _, count, bits in live]
    return _core.encode_window(capacity, error_rate, generations, window, w.layout, w.seed, filters,
                               [count for _, count, _ in live], [n for n, _, _ in live])


def upload(sender: Sender, backend: Backend, w: WindowKeys, error: Errors,
           generations: Sequence[tuple[int, BloomFilter, int]]) -> int:
    """Write the generations (number, bits, count: a kind-4 file's, as
    _core.decode_window gives them) that are live by the server's clock into
    the empty ring at w, made with the file's parameters; returns how many
    were written. ValueError, and nothing written, where the ring was
    written to meanwhile or a generation is ahead of the server's clock."""
    parts: list[tuple[int, int, bytes]] = []
    for number, f, count in generations:
        bits = bytes(memoryview(f))
        if len(bits) != w.nbytes:  # (the same parameters make the same geometry: a check, not a case)
            raise ValueError(f"generation {number} has {len(bits)} bytes, the filter at {w.name!r} {w.nbytes}")
        parts.append((number, count, bits))
    (reply,) = sender.run([backend.window_upload_job(w, parts)])
    if isinstance(reply, Exception):
        text = str(reply)
        if text.startswith("TAKEN"):
            raise ValueError(f"the windowed filter at {w.name!r} was written to by another writer while it was "
                             "restored: nothing was restored") from None
        if text.startswith("AHEAD"):
            _, later, current = text.split()[:3]
            raise ValueError(f"the file's generation {later} is ahead of the server's clock (its current "
                             f"generation is {current}): the file was made by a clock ahead of this server's; "
                             "nothing was restored") from None
        raise error(reply)
    return int(reply[1])
