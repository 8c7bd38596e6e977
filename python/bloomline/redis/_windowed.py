"""RedisWindowedFilter: "seen within the last window", shared by a fleet
through Redis (the local WindowedBloomFilter's semantics, windowed.py).

**Keys.** One hash tag (``{key}``: one slot, one node), so each step below
is one script: ``{key}:meta`` (the parameters), and a ring of ``G + 1``
slots as the local ring has, slot ``i`` holding the bits of one generation
at ``{key}:w:bits:{i}`` (a string, byte for byte a local filter's payload)
and at ``{key}:w:gen:{i}`` a hash of that generation's ``number`` and its
``count`` of new keys; kept answers at ``{key}:ans:<batch>.<chunk>``.

**Generations.** The current generation is ``floor(t / (window / G))``,
the local class's numbering, with ``t`` the SERVER's TIME, read by the same
script that adds or looks up: no client's clock takes part, so clients
skewed by hours agree, and an add never lands in a generation another
client thinks expired. The live generations are the current one and the
``G`` before it; each is sized as a local generation is
(``_core.window_generation_error_rate``), so the compound false-positive
rate over them meets ``error_rate``. The current generation never goes
back (the newest number in the ring wins over a server clock stepped back).

**Expiry.** A generation's two keys get ``PEXPIREAT`` at the end of its life
(``G + 1`` slices after it began) plus ``MARGIN_MS``, set when it starts;
the meta the same end as the newest generation. A fleet that stops adding
leaves nothing behind once the newest generation's life is over; the next
add makes the meta again. A live generation whose bits are gone (evicted,
deleted) is an error (MissingKeyError), never read as empty; a meta gone
while a generation lives is one too.

**Identity.** Each making of the filter has an ident, kept in the meta and
compared by every script: a handle attached before the filter was deleted
and made again (the same parameters) is refused, MissingKeyError, and never
writes to the new one. Each meta made (at attach, or by an add after an idle
fleet's expiry) has an epoch too; an add names the epoch and generation it
last added under, so a filter lost whole (meta and ring) and made again by
another writer while that generation lives is refused the same way, and so
is that generation gone under the meta it was added under (a restart from
an older snapshot). A clear marks the epoch: the keys forgotten on purpose.

**What "new" means, and the promise.** An add reports a key new when no
live generation had it at the server's time of the add; it then sits in
the current generation (``refresh=True``, the default, puts a seen key
there too, restarting its window; ``refresh=False`` leaves it where it
is). The look-up in the older generations and the add to the current one
are one script, so among processes adding the same key at once, and across
a generation boundary, exactly one is told new per window (a key added at
``t`` is new again once its generation has left the ring: after
``window + window / G`` at most). Each chunk of a batch is one script; a
key repeated within a batch is new at its first place only.

**Re-sends.** A batch has one id; each chunk's answer is kept under it for
``answer_ttl_ms`` (the retry window, as RedisBloomFilter's), and only the
Sender re-sends, the same command, after a lost reply: the kept answer
comes back, whatever generation is current by then. A re-send whose kept
answer is gone answers ``?`` for every key it does not find new (the lost
send may have added it, in this generation or the one before), and the call
raises UnknownOutcome with ``new`` and ``unknown``; every error an add
raises carries them. A caller may retry a batch that raised; it is then a
new batch, and keys the lost one added read "seen" (the facts say which).

**Replicas.** ``wait_replicas=n``: after an add that wrote (a key new,
or any key with refresh=True), WAIT on the filter's node as the other Redis
filters do (``_durable.replicated``); too few acknowledgements raise
NotDurable with the add's facts (its new keys are new: act on them). An
add that raised for another cause waits too when it answered keys new,
which move to its ``unknown`` when the replicas fall short.

**Backends.** 'module' (BLOOMLINE.WADD and WHAS: 'auto' picks it where the
server and its replicas have the module) and 'plain' (Lua, any Redis): the
same steps over the same keys. The module's add replicates with the
generation it chose, so a replica applies the primary's choice, not its
own clock's. A filter keeps the backend it was made with (its meta records
it), as a fixed filter does. 'bf' has no generations: refused, saying so.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt
import redis as _redis

from .. import _core, optimal_params
from .._core import CapacityWarning
from .._facts import batch_shaped, with_facts
from .._window_parts import _check_error_rate, _check_generations, check_refresh, generation_rate
from ..display import remote_filter_html
from ..windowed import WindowedBloomFilter
from ._backend import NEW, ONE, UNSURE, AddOutcome, Part, windows
from ._durable import replicated
from ._errors import NotDurable, UnknownOutcome
from ._meta import delete_matching, eviction_policy, stored_layout
from ._names import WindowKeys, batch_ids, client_of, refuse_other_kinds, tag_of_chain
from ._registry import window_backend
from ._window_meta import (_COMPARED, _REDIS_MAX_BITS, MARGIN_MS, META_VERSION, _check, _claim, _flat, delete_windowed,
                           params_sig_of, reattach, redis_window, run_reattaching, stored_window_layout, window_error)
from ._window_travel import file_bytes, upload
from ._wire import DEFAULT_RETRIES, DEFAULT_WAIT_TIMEOUT_MS, Job, Sender

if TYPE_CHECKING:
    from .._core import BloomFilter, Keys, Layout, Nulls
    from ..sizing import Params
    from ..windowed import Window

__all__ = ["RedisWindowedFilter", "delete_windowed"]


def _note(f: RedisWindowedFilter, counts: dict[int, int]) -> None:
    """Warn once per generation of f whose count of new keys (as an add's replies said) passes the capacity."""
    for gen, count in counts.items():
        if count > f._capacity and gen not in f._warned:
            f._warned.add(gen)
            warnings.warn(
                f"generation {gen} of {f._what} (one {f._w.span:g} s slice of the {f.window:g} s window) has taken "
                f"{count:,} new keys, past its capacity of {f._capacity:,}: its false-positive rate now rises (new "
                "keys reported seen). Make the filter with a larger capacity (the distinct keys of any window)",
                CapacityWarning, stacklevel=4)


def _send(sender: Sender, jobs: list[Any]) -> list[Any]:
    """One command straight on a connection (the Sender's direct, as a single key's), more by its rules."""
    return sender.direct(jobs) if len(jobs) == 1 else sender.run(jobs)


def _settle(f: RedisWindowedFilter, parts: list[Part], replies: list[Any], out: AddOutcome, failed: list[Exception],
            counts: dict[int, int], refresh: bool, making: list[str]) -> None:
    """One window's replies to f's add: into out and counts, and f's newest generation; a failed reply, or one
    under another making of the filter than the first reply's (making: [] until then), into failed."""
    for part, reply in zip(parts, replies):
        if isinstance(reply, Exception):
            failed.append(reply)
            continue
        answer, count, gen, epoch = reply
        out.codes[part.idx[: len(answer)]] = np.frombuffer(answer, dtype=np.uint8)
        text = epoch.decode() if isinstance(epoch, bytes) else str(epoch)
        # One window's commands are all made before its first reply, with the generation and epoch of the adds
        # before it: a filter lost between two of them was made again by the later one, which its epoch's making
        # (the text before any '/' or '#') tells. The keys before it are gone: refused.
        made = text.split("#")[0].split("/")[0]
        if made and making and made != making[0]:
            if not failed:
                failed.append(_redis.ResponseError(f"REMADE {f._w.meta}"))
            continue
        making[:] = making or ([made] if made else [])
        counts[int(gen)] = max(counts.get(int(gen), 0), int(count))
        # The newest generation f wrote to, or may have (a re-sent chunk's '?'); a refresh=False add answered
        # "seen" throughout wrote nothing: its generation need not outlive a failover. An answer kept by an older
        # version says neither.
        if int(gen) >= f._newest and text and (refresh or NEW in answer or UNSURE in answer):
            f._newest, f._epoch = int(gen), text


def _generation_size(capacity: int, error_rate: float, rate: float, g: int, layout: Layout) -> tuple[Params, int]:
    """One generation's parameters, sized as the local class sizes one
    (checks capacity and layout), and its bytes: at most one Redis string."""
    params = optimal_params(capacity, generation_rate(rate, g), layout)
    nbytes = math.ceil(params.num_bits / 512) * 64
    if nbytes * 8 > _REDIS_MAX_BITS:
        raise ValueError(f"capacity={capacity} at error_rate={error_rate} needs {params.num_bits} bits per "
                         "generation, over the 2**32 of one Redis string: a smaller capacity or a higher error_rate")
    return params, nbytes


class RedisWindowedFilter:
    """Keys seen within the last ``window`` (seconds or a timedelta), shared
    by every process attached to ``key`` (the module doc has the design).

    ``RedisWindowedFilter(redis, key, capacity, error_rate, window=...)``
    makes the filter, or attaches to it where one with the same parameters
    is there (one that differs raises ValueError naming the field).
    ``redis``: a redis-py client or a URL. ``capacity``: distinct keys per
    window (each generation is sized for them). ``backend``, ``retries``,
    ``answer_ttl_ms``, ``wait_replicas`` and ``wait_timeout_ms`` as
    RedisBloomFilter's ('bf' keeps no generations)."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        redis: Any,
        key: str,
        capacity: int,
        error_rate: float = 0.01,
        *,
        window: Window,
        generations: int = 4,
        backend: str = "auto",
        layout: Layout = "blocked",
        seed: int = 0,
        retries: int = DEFAULT_RETRIES,
        answer_ttl_ms: Optional[int] = None,
        wait_replicas: int = 0,
        wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty str, got {key!r}")
        window_s = redis_window(window)
        g = _check_generations(generations)
        rate = _check_error_rate(error_rate)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")
        params, nbytes = _generation_size(capacity, error_rate, rate, g, layout)
        client = client_of(redis)
        self._b = window_backend(backend, client, key)
        self._sender = Sender(client, retries=retries, answer_ttl_ms=answer_ttl_ms, wait_replicas=wait_replicas,
                              wait_timeout_ms=wait_timeout_ms)
        self._policy = eviction_policy(client)
        self._capacity, self._error_rate, self._window = int(capacity), rate, window_s
        base = tag_of_chain(key)
        stored_as, version = stored_layout(layout, META_VERSION)
        fields = {"kind": "windowed", "version": version, "capacity": int(capacity), "error_rate": repr(rate),
                  "window": repr(window_s), "generations": g, "layout": stored_as, "seed": seed,
                  "num_bits": params.num_bits, "num_hashes": params.num_hashes, "backend": self._b.name}
        params_sig = params_sig_of(fields)
        # ident: this making of the filter (a meta made here gets a new one; an
        # attach takes the stored one). Every script compares it: a handle of a
        # filter dropped and made again since is refused (REPLACED), and a meta
        # a writer makes again after an idle expiry carries the same ident.
        fields["ident"] = secrets.token_hex(8)
        fields["sig"] = f"{params_sig}|{fields['ident']}"
        self._key = key
        self._what = f"the windowed filter at {key!r}"
        meta = f"{base}:meta"
        refuse_other_kinds(client, key, "windowed filter")
        life_ms = math.ceil((g + 1) * (window_s / g) * 1000) + MARGIN_MS
        bits, gens = (tuple(f"{base}:w:{what}:{i}" for i in range(g + 1)) for what in ("bits", "gen"))
        stored = _claim(self._sender, [meta, *bits, *gens], [life_ms, repr(window_s / g), g + 1, *_flat(fields)],
                        self._error)
        kept = stored_window_layout(key, stored, layout)  # ("standard" takes a filter of the first index)
        if kept != layout:  # (sized as that index sizes: its own num_bits on small filters)
            layout, (params, nbytes) = kept, _generation_size(capacity, error_rate, rate, g, kept)
            fields.update(num_bits=params.num_bits, num_hashes=params.num_hashes)
        fields["layout"], fields["version"] = stored_layout(layout, META_VERSION)
        params_sig = params_sig_of(fields)
        _check(key, stored, fields)
        self._b = window_backend(backend, client, key, recorded=stored.get("backend"))  # the one it was made with
        fields["backend"] = self._b.name
        if stored.get("sig") != f"{params_sig}|{stored.get('ident')}":
            have_version = stored.get("version", "?")
            why = (f"was made by another version of bloomline (meta version {have_version}, this one "
                   f"{fields['version']})" if str(have_version) != str(fields["version"]) else
                   f"has a damaged meta: its sig {stored.get('sig')!r} does not name its parameters and ident "
                   f"{stored.get('ident')!r}")
            raise ValueError(f"the windowed filter at key {self._key!r} {why}: delete it first")
        fields["ident"], fields["sig"] = stored["ident"], str(stored["sig"])
        self._w = WindowKeys(key, meta, bits, gens, params.num_bits, params.num_hashes, layout, seed, nbytes,
                             window_s / g, MARGIN_MS, str(fields["sig"]), _flat(fields))
        self._answers = f"{base}:ans:"
        self._warned: set[int] = set()  # generations that warned of their capacity
        # The newest generation this handle added to: while it lives, its slot
        # must hold it and its meta be there (else the filter was lost:
        # evicted or deleted, not idle and expired).
        self._newest = -1
        self._epoch = ""  # the epoch of the meta this handle's newest generation was added under

    @property
    def ident(self) -> str:
        """This making of the filter: a filter deleted and made again has
        another, and handles attached before are refused (MissingKeyError)."""
        return self._w.sig.rsplit("|", 1)[1]

    # ---- adds ----------------------------------------------------------------------

    def _error(self, e: Exception) -> Exception:
        return window_error(self, e)

    def _add(self, make: Callable[[str], Iterable[Part]], n: int, refresh: bool,
             valid: Optional[npt.NDArray[np.bool_]] = None) -> AddOutcome:
        """Send an add's parts, made by make(answer names) (none after a failed window; made again once, under
        new names, where the filter was made again after this handle's keys all expired: reattach); its outcome."""
        self._sender.forget_writes()
        for again in (False, True):
            names = f"{self._answers}{batch_ids.next()}"  # (an answer kept from the old making would bind to it)
            out = AddOutcome(np.zeros(n, dtype=np.uint8))
            failed: list[Exception] = []
            counts: dict[int, int] = {}  # each generation's count of new keys, as the replies said
            making: list[str] = []  # the making of the meta the first reply added under
            try:
                for window in windows(make(names)):
                    _settle(self, window, _send(self._sender, [p.jobs[0] for p in window]), out, failed, counts,
                            refresh, making)
                    if failed:
                        break
            except Exception as e:  # raised while sending: it carries the facts too
                failed.append(e)
            if again or not failed or out.codes.any():
                break
            try:
                if not reattach(self, failed[0]):
                    break
            except Exception as e:  # (the server's TIME or the claim failed: raised below, with the add's facts)
                failed[0] = e
                break
        unsure = int(np.count_nonzero(out.codes == ord("?")))
        if failed:
            out.error = self._error(failed[0])
        elif unsure:
            out.error = UnknownOutcome(
                f"{unsure} keys of a batch to {self._what} were re-sent after a lost reply whose kept answer was "
                "gone, and found present: the lost send may have added them")
        self._replicated(out, refresh)
        try:  # (after the sends: a warning made an error never cuts an add short, nor hides the add's error)
            if out.error is None or isinstance(out.error, NotDurable):
                _note(self, counts)
        except Exception as e:  # a warning made an error: it carries the add's facts, as the add's own errors do
            raise with_facts(e, out.new, out.unknown, valid) from out.error
        out.raise_error(valid)
        return out

    def _chunks(self, hashed: Any, form: Any) -> Any:
        w = self._w
        step = self._b.window_chunk_keys(w)
        for c, lo in enumerate(range(0, len(hashed), step)):
            _shards, _starts, order, bodies, counts = _core.redis_batch(
                hashed[lo : lo + step], w.num_bits, w.num_hashes, layout=w.layout, seed=w.seed,
                shard_bits=w.nbytes * 8, form=form)  # (one shard: every generation is one string)
            yield c, lo + order, bodies[0], int(counts[0])

    def add_many(self, keys: Keys, *, refresh: bool = True, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """Add a batch at the server's time; True where no live generation
        had the key (at its first place in the batch only): new to exactly
        one caller per window, re-sends included. refresh=False leaves a seen
        key where it is (its window runs from its first add). A fault that
        cannot be survived raises with ``new`` and ``unknown``."""
        hashed, valid, refresh = *_core.hash_valid(keys, self._w.seed, nulls=nulls), check_refresh(refresh)
        out = self._add(lambda names: (Part([self._add_job(f"{names}.{c}", refresh, body, count)], idx)
                                       for c, idx, body, count in self._chunks(hashed, self._b.window_form_add)),
                        len(hashed), refresh, valid)
        return batch_shaped(valid, out.new)

    def add(self, key: Any, /, *, refresh: bool = True) -> bool:
        """Add a key at the server's time; True if no live generation had it
        (one script: the same promise as add_many's)."""
        w = self._w
        _shard, body, count = _core.redis_key(key, w.num_bits, w.num_hashes, w.layout, w.seed, w.nbytes * 8,
                                              self._b.window_form_add)
        refresh = check_refresh(refresh)
        out = self._add(lambda names: [Part([self._add_job(f"{names}.0", refresh, body, count)], ONE)], 1, refresh)
        return bool(out.codes[0] == NEW)

    def _add_job(self, name: str, refresh: bool, body: bytes, count: int) -> Job:
        """An add of a chunk, made as sent: with the generation and meta this handle's adds before it went to."""
        return self._b.window_add_job(self._w, name, self._sender.answer_ttl_ms, refresh, body, count, self._newest,
                                      self._epoch)

    def _replicated(self, out: AddOutcome, refresh: bool) -> None:
        """With wait_replicas: WAIT after an add that wrote (a key new, or
        any with refresh), or failed with keys answered new
        (_durable.replicated)."""
        wrote = bool(out.new.any()) or (refresh and len(out.codes) > 0)
        replicated(self._sender, [self._w.meta.encode()], self._what, out, wrote)

    def update(self, *iterables: Keys, nulls: Nulls = "raise") -> None:
        """Add every key of each iterable, in order."""
        for keys in iterables:
            self.add_many(keys, nulls=nulls)

    # ---- lookups -------------------------------------------------------------------

    def _lookup(self, make: Callable[[], list[Part]], n: int, again: bool = False) -> npt.NDArray[np.bool_]:
        """The answers of the parts make() gives (made again once, as _add's)."""
        out = np.zeros(n, dtype=bool)
        for window in windows(make()):
            for part, reply in zip(window, _send(self._sender, [p.jobs[0] for p in window])):
                if isinstance(reply, Exception):
                    if not again and reattach(self, reply):
                        return self._lookup(make, n, True)
                    raise self._error(reply)
                out[part.idx] = np.frombuffer(reply[0], dtype=np.uint8) == ord("1")
        return out

    def contains_many(self, keys: Keys, *, nulls: Nulls = "raise") -> npt.NDArray[np.bool_]:
        """True where a live generation (by the server's time) may have the
        key; False for nulls with nulls='skip'."""
        hashed, valid = _core.hash_valid(keys, self._w.seed, nulls=nulls)
        return batch_shaped(valid, self._lookup(lambda: [Part([self._has_job(body, count)], idx) for _c, idx, body, count
                                                         in self._chunks(hashed, self._b.window_form_has)], len(hashed)))

    def __contains__(self, key: object) -> bool:
        w = self._w
        k: Any = key  # (refused by the core, naming its type, where it is no key)
        _shard, body, count = _core.redis_key(k, w.num_bits, w.num_hashes, w.layout, w.seed, w.nbytes * 8,
                                              self._b.window_form_has)
        return bool(self._lookup(lambda: [Part([self._has_job(body, count)], ONE)], 1)[0])

    def _has_job(self, body: bytes, count: int) -> Job:
        """A lookup of a chunk, refused where it could not see the keys of this handle's newest generation."""
        return self._b.window_has_job(self._w, body, count, self._newest, self._epoch)

    # ---- facts ---------------------------------------------------------------------

    def _live(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """The current generation by the server's clock, and each live one's (slot, number, new keys, bits set)."""
        reply = run_reattaching(self, lambda: self._b.window_live_job(self._w, self._newest, self._epoch))
        return int(reply[0]), [(int(s), int(n), int(c), int(b)) for s, n, c, b in reply[1:]]

    @property
    def current_generation(self) -> int:
        """The generation adds go to now: floor(server TIME / (window / generations))."""
        return self._live()[0]

    @property
    def live_generations(self) -> tuple[tuple[int, int], ...]:
        """(generation number, count of new keys) of the live generations that were started, oldest first."""
        return tuple(sorted((n, c) for _s, n, c, _b in self._live()[1]))

    def to_filter(self) -> WindowedBloomFilter:
        """Download into a local WindowedBloomFilter (on the system clock): the generations live by the server's."""
        return WindowedBloomFilter.from_bytes(self._to_filter_bytes())

    def _to_filter_bytes(self) -> bytes:
        """What to_filter reads, as a kind-4 file's bytes: the generations live by the server's clock, in one step."""
        reply = run_reattaching(self, lambda: self._b.window_dump_job(self._w, self._newest, self._epoch))
        return file_bytes(reply, self._w, self._capacity, self._error_rate, self._window)

    def _upload_generations(self, generations: list[tuple[int, BloomFilter, int]]) -> int:
        """Write (number, bits, count) generations live by the server's clock into this filter's empty ring."""
        return upload(self._sender, self._b, self._w, self._error, generations)

    def __bool__(self) -> bool:
        """False while no live generation holds a key (none added, all expired, or cleared), as an empty set."""
        return self.approx_count > 0

    @property
    def approx_count(self) -> float:
        """Estimated distinct keys in the live generations (the estimate of
        their union: a key refreshed into several counts once). The bits
        are read after the live generations are named: an estimate."""
        live = self._live()[1]
        values = self._sender.each([Job(k.encode(), b"GET", (k,)) for k in (self._w.bits[s] for s, *_ in live)])
        acc = np.zeros(self._w.nbytes, dtype=np.uint8)
        for v in values:
            if v is not None and len(v) == self._w.nbytes:  # (a generation expired meanwhile: none of its keys)
                np.bitwise_or(acc, np.frombuffer(v, dtype=np.uint8), out=acc)
        ones = int(np.unpackbits(acc).sum())
        return float(_core.estimate_count(ones, self._w.num_bits, self._w.num_hashes, self._w.layout))

    @property
    def expected_fp_rate(self) -> float:
        """The compound rate at the current fill: 1 - prod(1 - each live
        generation's rate, from its bits set)."""
        w = self._w
        miss = 1.0
        for _s, _n, _c, ones in self._live()[1]:
            n = _core.estimate_count(ones, w.num_bits, w.num_hashes, w.layout)
            miss *= 1.0 - (1.0 if math.isinf(n) else _core.expected_rate(n, w.num_bits, w.num_hashes, w.layout))
        return 1.0 - miss

    @property
    def fill_ratio(self) -> float:
        """The fraction of the live generations' bits that are 1, over the whole ring (as the local class's)."""
        return sum(ones for _s, _n, _c, ones in self._live()[1]) / self.num_bits

    @property
    def nbytes(self) -> int:
        """Bytes of the whole ring in Redis, when every generation is made."""
        return self._w.nbytes * len(self._w.bits)

    @property
    def window(self) -> float:
        """The window in seconds."""
        return self._window

    @property
    def generations(self) -> int:
        """G: the window is split into G generations (G + 1 are live)."""
        return self._w.generations

    @property
    def capacity(self) -> int:
        """Distinct keys per window (each generation is sized for them)."""
        return self._capacity

    @property
    def error_rate(self) -> float:
        """The compound false-positive rate of a lookup over the live generations."""
        return self._error_rate

    @property
    def generation_error_rate(self) -> float:
        """The rate each generation is sized for: G + 1 of them compound to error_rate."""
        return _core.window_generation_error_rate(self._error_rate, self._w.generations)

    @property
    def num_bits(self) -> int:
        """Bits of the whole ring: G + 1 generations (each num_bits / (G + 1))."""
        return self._w.num_bits * len(self._w.bits)

    @property
    def num_hashes(self) -> int:
        """k: bits set and tested per key, in each generation."""
        return self._w.num_hashes

    @property
    def layout(self) -> Layout:
        """"blocked" or "standard", as recorded when the filter was made ("standard-v1": the standard layout's
        first index, of a filter made by an earlier bloomline)."""
        return self._w.layout

    @property
    def seed(self) -> int:
        """The hash seed, as recorded when the filter was made."""
        return self._w.seed

    @property
    def key(self) -> str:
        """The filter's name: the key it was made with, under which its Redis keys live."""
        return self._key

    @property
    def backend(self) -> str:
        """Which backend runs: 'module' or 'plain', the one the filter was made with ('bf' keeps no generations)."""
        return self._b.name

    @property
    def wait_replicas(self) -> int:
        """Replicas each add that wrote waits for (0: no WAIT)."""
        return self._sender.wait_replicas

    @property
    def answer_ttl_ms(self) -> int:
        """How long a batch's answer is kept for a re-send."""
        return self._sender.answer_ttl_ms

    def redis_keys(self) -> list[str]:
        """The names of every key the filter may have (its meta and ring; not its kept answers), present or not."""
        return [self._w.meta, *self._w.bits, *self._w.gens]

    # ---- life ----------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every key (each generation and the meta's record of it; the rest of the meta kept), in one
        step: the other handles go on."""
        # (never the reattaching send: a handle of a making deleted since must not clear the new filter)
        if isinstance(reply := self._sender.run([self._b.window_clear_job(self._w)])[0], Exception):
            raise self._error(reply)
        self._newest = -1

    def delete(self) -> None:
        """Remove the filter from Redis: its meta first (an add racing this
        one then raises rather than adding to a half-deleted ring), its
        ring, its kept answers."""
        self._sender.each([Job(k.encode(), b"DEL", (k,)) for k in self.redis_keys()])
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self._answers) + "*"
        delete_matching(self._sender.client, [pattern])
        self._newest = -1  # this handle's next add makes the filter again; other handles' adds are refused

    def _repr_html_(self) -> str:
        return remote_filter_html(self, [("key", self.key), ("backend", self.backend), ("layout", self.layout),
                                         ("window", f"{self.window:g} s in {self.generations} generations"),
                                         ("capacity", f"{self.capacity:,} a generation"),
                                         ("error rate", f"{self.error_rate:g}")])

    def __repr__(self) -> str:
        return (f"<RedisWindowedFilter key={self._key!r} backend='{self.backend}' capacity={self._capacity} "
                f"error_rate={self._error_rate} window={self.window:g}s generations={self.generations} "
                f"layout='{self.layout}' seed={self.seed}>")
