"""RedisWindowedFilter against a real redis-server, in real time with short
windows: the fleet's "new once per window", the window itself, the server's
clock deciding, expiry by TTL, re-sends, and the parameters' errors; on both
backends that keep one (plain's scripts, and bloomline's module, which
'auto' picks where it is loaded), and the module's replication of the
generation it chose."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import subprocess
import sys
import threading
import time
import traceback
import warnings
from typing import Any

import numpy as np
import pytest

from bloomline import CapacityWarning, WindowedBloomFilter

redis = pytest.importorskip("redis")
from bloomline.redis import MissingKeyError, RedisWindowedFilter, UnknownOutcome  # noqa: E402
from bloomline.redis._windowed import MARGIN_MS  # noqa: E402

from conftest import FaultProxy, RedisServer, module_args, start_pair, wait_until  # noqa: E402


@pytest.fixture(params=["plain", "module"])
def window_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A fresh redis-server where 'auto' picks each backend that keeps a
    windowed filter: plain (no module loaded), and bloomline's module."""
    server = RedisServer(tmp_path_factory.mktemp("redis"), *module_args(str(request.param)))
    server.backend = str(request.param)  # type: ignore[attr-defined]
    yield server
    server.stop()


def server_time(r: Any) -> float:
    sec, usec = r.time()
    return float(sec) + usec / 1e6


# ---- a fleet ------------------------------------------------------------------------

FLEET_WINDOW, FLEET_GENERATIONS, FLEET_KEYS = 2.0, 2, 300


def _fleet_worker(url: str, start: float, seconds: float, q: mp.Queue[Any]) -> None:
    """Add the same keys (refresh=False) over and over until start + seconds;
    put (key index, server time before the add, after it) of each key found new."""
    try:
        r = redis.Redis.from_url(url)
        f = RedisWindowedFilter(r, "fleet", 1000, 0.001, window=FLEET_WINDOW, generations=FLEET_GENERATIONS)
        keys = [f"https://news.example/{i}" for i in range(FLEET_KEYS)]
        time.sleep(max(0.0, start - time.time()))
        events: list[tuple[int, float, float]] = []
        while time.time() < start + seconds:
            before = server_time(r)
            new = f.add_many(keys, refresh=False)
            after = server_time(r)
            events.extend((int(i), before, after) for i in np.flatnonzero(new))
            time.sleep(0.01)
        q.put(events)
    except BaseException:  # noqa: BLE001 - the traceback goes to the test
        q.put(traceback.format_exc())


def test_two_processes_see_each_key_new_once_per_window_and_again_after_it(window_server: Any) -> None:
    """Two processes add the same keys at once for 2.5 windows: every key is
    new to exactly one of them per window (never twice within a window, at
    a generation boundary included), and new again once its window (plus at
    most a slice) has passed."""
    ctx = mp.get_context("spawn")
    q: mp.Queue[Any] = ctx.Queue()
    start, seconds = time.time() + 4.0, 2.5 * FLEET_WINDOW  # (the start leaves time for both to import)
    procs = [ctx.Process(target=_fleet_worker, args=(window_server.url, start, seconds, q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    for res in results:
        assert not isinstance(res, str), res
    times: dict[int, list[tuple[float, float]]] = {}
    for res in results:
        for i, before, after in res:
            times.setdefault(i, []).append((before, after))
    assert sorted(times) == list(range(FLEET_KEYS))
    span = FLEET_WINDOW / FLEET_GENERATIONS
    for i, ts in times.items():
        ts.sort()
        assert len(ts) >= 2, (i, ts)  # new again after its window
        for (b1, a1), (b2, a2) in zip(ts, ts[1:]):
            # new in generation e, then first in e + G + 1: more than a window
            # apart (each add happened between its two readings of TIME)...
            assert a2 - b1 > FLEET_WINDOW, (i, ts)
            # ...and at most a window and a slice apart, and a poll
            assert b2 - a1 < FLEET_WINDOW + span + 0.5, (i, ts)


# ---- the window ---------------------------------------------------------------------


def test_a_key_is_seen_through_its_window_refreshed_or_not(window_server: Any) -> None:
    r = redis.Redis.from_url(window_server.url)
    window, g = 2.0, 4
    span = window / g
    f = RedisWindowedFilter(r, "w", 1000, 0.01, window=window, generations=g)
    added_from = server_time(r)
    assert f.add("kept") and f.add("left") and f.add("once")
    added_by = server_time(r)
    time.sleep(1.2)
    refreshed_from = server_time(r)
    assert f.add("kept") is False  # seen: refreshed into the current generation
    assert f.add("left", refresh=False) is False  # seen: left where it is
    polls = []
    for _ in range(200):  # (bounded: about 4 s of polls)
        before = server_time(r)
        hits = f.contains_many(["kept", "left", "once"]).tolist()
        after = server_time(r)
        polls.append((before, after, hits))
        if not any(hits):
            break
        time.sleep(0.02)
    for before, after, (kept, left, once) in polls:
        if after - added_from <= window:
            assert left and once, polls  # seen through the whole window
        if before - added_by > window + span:
            assert not left and not once, polls  # gone a slice past it
        if after - refreshed_from <= window:
            assert kept, polls  # its window restarted when it was added again
    assert polls[-1][2] == [False, False, False]
    assert f.add("once") is True  # new again


def test_adds_and_lookups_of_batches(window_server: Any, layout: str) -> None:
    f = RedisWindowedFilter(window_server.url, "b", 50_000, 0.001, window=60, generations=3,
                            layout=layout)  # type: ignore[arg-type]
    assert f.add_many([]).tolist() == [] and f.contains_many([]).tolist() == []
    assert f.add_many(["x", "y", "x", None], nulls="skip").tolist() == [True, True, False, False]
    assert f.add_many(["x", "z"], refresh=False).tolist() == [False, True]
    assert f.contains_many(["x", "y", "z", "w", None], nulls="skip").tolist() == [True, True, True, False, False]
    assert "x" in f and "w" not in f
    out = f.add_many(np.arange(20_000, dtype=np.int64))  # several chunks
    assert int(out.sum()) > 19_900 and f.contains_many(list(range(20_000))).all()
    with pytest.raises(ValueError):
        f.add_many(["a", None])
    assert f.approx_count == pytest.approx(20_003, rel=0.05)
    assert 0 < f.expected_fp_rate < 0.001
    f.clear()
    assert "x" not in f and f.approx_count == 0.0
    f.delete()
    assert not redis.Redis.from_url(window_server.url).keys("*")


def test_a_meta_whose_sig_was_changed_by_hand_is_called_damaged_not_another_version(window_server: Any) -> None:
    f = RedisWindowedFilter(window_server.url, "d", 1000, 0.01, window=60)
    f.add("x")
    r = redis.Redis.from_url(window_server.url)
    meta = next(k for k in r.keys("*") if k.endswith(b":meta"))
    r.hset(meta, "sig", "junk")
    with pytest.raises(ValueError, match=r"at key 'd' has a damaged meta: its sig 'junk' does not name its parameters"):
        RedisWindowedFilter(window_server.url, "d", 1000, 0.01, window=60)


def test_capacity_warning_names_the_generation(window_server: Any) -> None:
    f = RedisWindowedFilter(window_server.url, "cap", 100, 0.01, window=60, generations=2)
    with pytest.warns(CapacityWarning, match=r"generation \d+ of the windowed filter at 'cap'"):
        f.add_many([f"k{i}" for i in range(150)])
    f.add_many([f"more{i}" for i in range(50)])  # (warned once per generation: no second warning)


def test_a_capacity_warning_made_an_error_carries_the_adds_answers(window_server: Any) -> None:
    """With warnings as errors the warning comes after the keys were
    recorded for the whole fleet: it carries the add's answers (``new``,
    ``unknown``) as the add's own errors do, a batch's and one key's."""
    f = RedisWindowedFilter(window_server.url, "caperr", 100, 0.01, window=3600, generations=2)
    keys = [f"k{i}" for i in range(150)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        with pytest.raises(CapacityWarning, match="past its capacity of 100") as caught:
            f.add_many(keys, refresh=False)
    new, unknown = caught.value.new, caught.value.unknown  # type: ignore[attr-defined]
    assert new.shape == (150,) and not unknown.any() and new.sum() >= 140  # (a few false positives read "seen")
    assert not f.add_many(keys).any()
    one = RedisWindowedFilter(window_server.url, "caperr1", 2, 0.01, window=3600, generations=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        assert one.add("a") and one.add("b")
        with pytest.raises(CapacityWarning) as caught:
            one.add("c", refresh=False)
    assert caught.value.new.tolist() == [True] and caught.value.unknown.tolist() == [False]  # type: ignore[attr-defined]
    assert one.add("c") is False


def test_same_numbering_and_sizing_as_the_local_filter(window_server: Any) -> None:
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "n", 50_000, 0.001, window=3.0, generations=3)
    local = WindowedBloomFilter(50_000, 0.001, window=3.0, generations=3)
    assert (f.num_bits, f.num_hashes) == (local.num_bits, local.num_hashes)
    assert f.generation_error_rate == local.generation_error_rate
    assert (f.window, f.generations, f.capacity, f.error_rate, f.backend) == (3.0, 3, 50_000, 0.001,
                                                                             window_server.backend)
    before = math.floor(server_time(r) / 1.0)
    gen = f.current_generation
    after = math.floor(server_time(r) / 1.0)
    assert before <= gen <= after


def test_auto_picks_the_module_where_it_is_loaded_and_a_filter_keeps_its_backend(module_server: Any,
                                                                                 redis_server: Any) -> None:
    f = RedisWindowedFilter(module_server.url, "m", 1000, 0.01, window=60, generations=2)
    assert f.backend == "module"
    assert f.add("a") is True and f.add("a") is False
    p = RedisWindowedFilter(module_server.url, "p", 1000, 0.01, window=60, generations=2, backend="plain")
    assert p.backend == "plain" and p.add("a") is True
    # The backend a filter was made with binds: 'auto' takes it, another named is refused.
    assert RedisWindowedFilter(module_server.url, "p", 1000, 0.01, window=60, generations=2).backend == "plain"
    with pytest.raises(ValueError, match="made with backend 'plain', and a filter keeps its backend: backend "
                                         "'module' is refused"):
        RedisWindowedFilter(module_server.url, "p", 1000, 0.01, window=60, generations=2, backend="module")
    with pytest.raises(ValueError, match="made with backend 'module', and a filter keeps its backend"):
        RedisWindowedFilter(module_server.url, "m", 1000, 0.01, window=60, generations=2, backend="plain")
    with pytest.raises(ValueError, match="backend 'module' needs bloomline's module on the server"):
        RedisWindowedFilter(redis_server.url, "m", 1000, 0.01, window=60, generations=2, backend="module")
    # Both backends keep the same keys: the module's ring reads as the plain scripts' do.
    assert [count for _number, count in f.live_generations] == [1] and f.approx_count == pytest.approx(1, abs=0.01)


def test_the_module_replicates_the_generation_it_chose(tmp_path: Any) -> None:
    """A replica, and the AOF, get the add with the generation and epoch the
    primary chose in place of the client's "-" (a replica never picks by its
    own clock); a client cannot send one."""
    primary, replica = start_pair(tmp_path, [*module_args("module"), "--appendonly", "yes", "--appendfsync",
                                             "always"], module_args("module"))
    try:
        p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        f = RedisWindowedFilter(p, "rep", 10_000, 0.001, window=7 * 86400, generations=3, wait_replicas=1)
        keys = np.arange(5_000, dtype=np.uint64)
        assert f.add_many(keys).sum() >= 4_990 and f.add("x") is True
        names = f.redis_keys()

        def state(c: Any) -> list[Any]:  # each key's value (bits byte for byte) and its expiry to the millisecond
            return [(c.type(k), c.get(k) if c.type(k) == b"string" else c.hgetall(k),
                     c.execute_command("PEXPIRETIME", k)) for k in names]

        wait_until(lambda: state(p) == state(r))
        assert p.hget(names[0], "epoch") and sum(t == b"string" for t, _v, _e in state(r)) == 1
        aof = b"".join(x.read_bytes() for x in (tmp_path / "p").rglob("*.aof*") if x.is_file())
        gen = str(f.current_generation).encode()
        assert aof.count(b"bloomline.wadd") >= 2 and b"$1\r\n-\r\n$1\r\n-\r\n" not in aof
        assert b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(gen), gen, len(p.hget(names[0], "epoch")),
                                                     p.hget(names[0], "epoch")) in aof
        w = f._w
        with pytest.raises(redis.ResponseError, match="at is the primary's"):
            p.execute_command("BLOOMLINE.WADD", w.meta, "{rep}:ans:x", *w.bits, *w.gens, 1000, "F", w.nbytes,
                              repr(w.span), 1, w.margin_ms, w.sig, -1, "", "", gen, "-", b"")
    finally:
        primary.stop()
        replica.stop()


def _wadd(r: Any, f: Any, keys: Any, **over: Any) -> Any:
    """BLOOMLINE.WADD as the module backend sends it, any argument replaced."""
    from bloomline import _core

    w = f._w
    body = _core.redis_batch(_core.hash_valid(keys, w.seed, nulls="raise")[0], w.num_bits, w.num_hashes,
                             layout=w.layout, seed=w.seed, shard_bits=w.nbytes * 8, form="positions")[3][0]
    blob = body[body.index(b"\r\n") + 2 : -2]  # (the core frames it as one RESP argument)
    a = dict(ttl_ms=60_000, mode="F", bytes=w.nbytes, span=repr(w.span), refresh=1, margin_ms=w.margin_ms,
             sig=w.sig, newest=-1, epoch="", fields="\0".join(w.meta_fields), at="-", made="-", positions=blob)
    a.update(over)
    return r.execute_command("BLOOMLINE.WADD", w.meta, f"{f.key}:ans:{over.get('answer', 'x')}", *w.bits, *w.gens,
                             *(a[n] for n in ("ttl_ms", "mode", "bytes", "span", "refresh", "margin_ms", "sig",
                                              "newest", "epoch", "fields", "at", "made", "positions")))


def test_the_module_refuses_what_it_cannot_apply_and_changes_nothing(module_server: Any) -> None:
    """Values the scripts would never send, or a ring's hashes tampered
    with: each an error reply, every check made before the first write (a
    refused add changes nothing, so nothing need replicate), the server up."""
    r = redis.Redis.from_url(module_server.url)
    # (a week: no generation begins during the test, which compares states to the millisecond)
    f = RedisWindowedFilter(r, "hostile", 1000, 0.01, window=7 * 86400, generations=2)
    assert f.backend == "module" and f.add_many(["a", "b"]).all()
    slot = f.current_generation % 3
    gen = f"{{hostile}}:w:gen:{slot}"

    def state() -> list[Any]:
        return [(r.type(k), r.get(k) if r.type(k) == b"string" else r.hgetall(k), r.execute_command("PEXPIRETIME", k))
                for k in f.redis_keys()]

    before = state()
    for over, words in ((dict(span="1e-12"), "no generation number"), (dict(span="nan"), "span must be"),
                        (dict(bytes=f._w.nbytes + 1), "bytes must be a multiple of 64"),
                        (dict(bytes=2**40), "bytes must be"), (dict(refresh=2), "refresh must be 0 or 1"),
                        (dict(made="forged"), "made is the primary's"), (dict(at="5"), "at is the primary's"),
                        (dict(margin_ms=10**12), "margin_ms must be"),
                        (dict(margin_ms=0), "margin_ms must be an integer in \\[1000"),
                        (dict(positions=b"B\x02"), "malformed")):
        with pytest.raises(redis.ResponseError, match=words):
            _wadd(r, f, ["c"], **over)
        assert state() == before, over
    for field, value in (("count", "+5"), ("count", "007"), ("count", str(2**63 - 1)), ("number", str(2**62))):
        r.hset(gen, field, value)
        tampered = state()
        with pytest.raises(redis.ResponseError, match=f"{field} is no integer in"):
            f.add("c")
        assert state() == tampered and r.ping()
        f.delete()
        f = RedisWindowedFilter(r, "hostile", 1000, 0.01, window=7 * 86400, generations=2)
        assert f.add_many(["a", "b"]).all()
    assert "c" not in f


def test_the_module_makes_a_generation_larger_than_one_argument(module_server: Any) -> None:
    """A generation's string is made in place, not by an argument of its
    size: a server whose proto-max-bulk-len is below it still starts it."""
    r = redis.Redis.from_url(module_server.url)
    r.config_set("proto-max-bulk-len", 1024 * 1024)
    f = RedisWindowedFilter(r, "large", 1_000_000, 0.001, window=600, generations=2)
    assert f._w.nbytes > 1024 * 1024
    assert f.add_many(["a", "b"]).all() and f.contains_many(["a", "b", "c"]).tolist() == [True, True, False]


@pytest.fixture
def small_disk(tmp_path: Any) -> Any:
    """A 2 MB tmpfs (root only: skipped where mount is refused), unmounted after."""
    where = tmp_path / "disk"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("backend", ["module", "plain"])
def test_a_server_whose_disk_is_full_refuses_the_add_and_the_call_raises(small_disk: Any, backend: str) -> None:
    """The server's AOF on a full disk: Redis refuses writes (MISCONF); the
    add raises with its facts, nothing of its batch is reported new or
    added, and lookups go on answering what was added before."""
    # (everysec: with "always" a failed AOF write stops the server; here it refuses writes from then on)
    server = RedisServer(small_disk, *module_args(backend), "--appendonly", "yes", "--appendfsync", "everysec")
    try:
        f = RedisWindowedFilter(server.url, "full", 1_000_000, 0.01, window=600, generations=2, backend=backend)
        done: list[str] = []
        refused = None
        for i in range(2_000):  # (bounded: 2 MB fills long before)
            batch = [f"https://full.example/{i}/{j}" for j in range(500)]
            try:
                f.add_many(batch)
            except redis.ResponseError as e:
                refused = (batch, e)
                break
            done += batch
        assert refused is not None, "2,000 batches and the disk never filled"
        batch, e = refused
        assert "MISCONF" in str(e) and not e.new.any()  # type: ignore[attr-defined]
        assert not f.contains_many(batch).any() and f.contains_many(done).all()
        # The server is up (PING is refused too, as a write would be).
        assert len(done) >= 500 and redis.Redis.from_url(server.url).dbsize() > 0
    finally:
        server.stop()


def test_a_handle_goes_on_in_a_forked_child(window_server: Any) -> None:
    """A handle made before a fork, used by the parent and the child at
    once: the child gets connections of its own (never the parent's
    sockets), and each key both add is new to exactly one of them."""
    import os

    f = RedisWindowedFilter(window_server.url, "forked", 100_000, 0.001, window=600, generations=2)
    assert f.add("before")
    shared = [f"https://shared.example/{i}" for i in range(20_000)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its answers to the parent, then out without the parent's atexit
        code = 1
        try:
            flags = [bool(f.add("before"))] + [bool(x) for x in f.add_many(shared)]
            os.write(write, json.dumps(flags).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    mine = f.add_many(shared[::-1])[::-1]
    with os.fdopen(read, "rb") as r:
        theirs = json.loads(r.read() or b"null")
    _pid, status = os.waitpid(pid, 0)
    assert status == 0 and theirs is not None
    assert theirs[0] is False  # added before the fork: seen in the child too
    assert (np.asarray(theirs[1:]) ^ mine).all()  # new to exactly one of them
    assert f.contains_many(shared).all()


# ---- the server's clock -------------------------------------------------------------

# A client whose wall clock is an hour ahead. faketime is not installed here,
# so the child patches time.time and time.time_ns, the clocks any generation
# could come from (monotonic has no epoch to number generations by).
_SKEWED = r"""
import json, math, sys, time
_real, _real_ns = time.time, time.time_ns
time.time = lambda: _real() + 3600.0
time.time_ns = lambda: _real_ns() + 3_600_000_000_000
from bloomline.redis import RedisWindowedFilter
f = RedisWindowedFilter(sys.argv[1], "skew", 1000, 0.01, window=30.0, generations=2)
added = f.add_many([f"k{i}" for i in range(200)]).tolist()
print(json.dumps({"local": math.floor(time.time() / 15.0), "server": f.current_generation, "added": added}))
"""


def test_a_client_whose_clock_is_an_hour_off_agrees(window_server: Any) -> None:
    f = RedisWindowedFilter(window_server.url, "skew", 1000, 0.01, window=30.0, generations=2)
    assert f.add_many([f"k{i}" for i in range(100)]).all()
    before = f.current_generation
    child = subprocess.run([sys.executable, "-c", _SKEWED, window_server.url], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    assert seen["local"] - before >= 3600 / 15 - 1  # its own clock is an hour (240 generations) ahead
    assert before <= seen["server"] <= f.current_generation  # yet it adds where this client does
    assert seen["added"] == [False] * 100 + [True] * 100  # ours seen, its own new
    assert f.add_many([f"k{i}" for i in range(200)]).tolist() == [False] * 200


# ---- expiry -------------------------------------------------------------------------


def test_generations_expire_by_ttl_and_an_idle_filter_leaves_nothing(window_server: Any) -> None:
    # A short retry window, so that kept answers may live briefly too.
    # (2.7 s: the least the retry window of 3 tries of 0.5 s allows.)
    r = redis.Redis(port=window_server.port, socket_timeout=0.5)
    window, g = 2.0, 2  # (its keys live 2-3 s from the add: time for the reads below on a loaded machine)
    span = window / g
    f = RedisWindowedFilter(r, "ttl", 1000, 0.01, window=window, generations=g, retries=2, answer_ttl_ms=2700)
    assert f.add("a")
    ((gen, count),) = [(n, c) for n, c in f.live_generations if c]  # (the add's, even past a boundary)
    assert count == 1
    end_ms = (gen + g + 1) * span * 1000  # the end of its life: G + 1 slices from its start
    slot = gen % (g + 1)
    for name in (f.redis_keys()[0], f.redis_keys()[1 + slot], f.redis_keys()[1 + g + 1 + slot]):
        # Its expiry, in server time, lies between the clock read before
        # the PTTL plus the TTL and the clock read after it plus the TTL.
        before_ms = server_time(r) * 1000
        ttl = r.pttl(name)
        after_ms = server_time(r) * 1000
        assert ttl > 0, name
        assert end_ms - 50 <= after_ms + ttl and before_ms + ttl <= end_ms + MARGIN_MS + 50, (name, ttl)
    wait_until(lambda: r.dbsize() == 0, seconds=(g + 1) * span + MARGIN_MS / 1000 + 3)
    assert f.add("a") is True  # the next add makes it again


# ---- faults -------------------------------------------------------------------------


def _load_scripts(url: str) -> None:
    """One add straight to the server: its script is cached there, so the
    proxy's fault falls on a send that runs (not on a NOSCRIPT reply)."""
    RedisWindowedFilter(url, "warm", 1000, 0.01, window=60, generations=2).add("x")


def test_a_lost_reply_is_answered_from_the_kept_answer(window_server: Any) -> None:
    _load_scripts(window_server.url)
    proxy = FaultProxy(window_server.port, "cut_after", match=b":ans:", limit=1)
    try:
        f = RedisWindowedFilter(f"redis://127.0.0.1:{proxy.port}/0", "lost", 1000, 0.01, window=60, generations=2)
        assert f.add_many(["a", "b", "c"]).tolist() == [True, True, True]  # the re-send's kept answer
        assert proxy.faults == 1 and f._sender.stats["resent"] == 1 and not f._sender.stats["NOSCRIPT"]
        assert f.add_many(["a", "b", "d"]).tolist() == [False, False, True]
    finally:
        proxy.close()


def test_a_clear_whose_reply_was_lost_runs_once(window_server: Any) -> None:
    """The clear runs, its reply is held past the client's timeout, and
    another handle adds a key meanwhile: the re-sent clear must not wipe it
    (that key would be new twice in its window)."""
    from bloomline.redis._plain import _WINDOW_CLEAR

    redis.Redis(port=window_server.port).script_load(_WINDOW_CLEAR.text)  # sent by its SHA: the proxy knows it
    other = RedisWindowedFilter(window_server.url, "cl", 1000, 0.01, window=60, generations=2)
    proxy = FaultProxy(window_server.port, "stall", match=_WINDOW_CLEAR.sha, limit=1, stall_s=1.5)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=0.5)
        f = RedisWindowedFilter(client, "cl", 1000, 0.01, window=60, generations=2, retries=3)
        assert other.add("before") is True
        added: list[bool] = []

        def add_while_stalled() -> None:
            deadline = time.monotonic() + 5
            while proxy.faults == 0 and time.monotonic() < deadline:  # (bounded) the clear has run
                time.sleep(0.01)
            added.append(other.add("j"))

        t = threading.Thread(target=add_while_stalled)
        t.start()
        f.clear()
        t.join()
        assert proxy.faults == 1, f._sender.stats
        assert added == [True]
        assert "before" not in other  # the clear ran...
        assert "j" in other and other.add("j") is False  # ...once: the add made after it is kept
    finally:
        proxy.close()


def test_a_resend_whose_answer_is_gone_raises_with_its_facts(redis_server: Any) -> None:
    r = redis.Redis.from_url(redis_server.url)
    _load_scripts(redis_server.url)
    proxy = FaultProxy(redis_server.port, "stall", match=b":ans:", limit=1, stall_s=0.6)
    try:
        # The stalled first send runs; its answer is deleted before the re-send arrives.
        client = redis.Redis(port=proxy.port, socket_timeout=0.3)
        f = RedisWindowedFilter(client, "gone", 1000, 0.01, window=60, generations=2, retries=2,
                                answer_ttl_ms=5000)
        def delete_answers() -> None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # (bounded)
                kept = r.keys("{gone}:ans:*")
                if kept:
                    r.delete(*kept)
                    return
                time.sleep(0.01)

        t = threading.Thread(target=delete_answers)
        t.start()
        with pytest.raises(UnknownOutcome) as info:
            f.add_many(["a", "b"])
        t.join()
        assert info.value.unknown.tolist() == [True, True]  # type: ignore[attr-defined]
        # (more than once if a re-send also met a stall of this loaded machine)
        assert f._sender.stats["resent"] >= 1 and not f._sender.stats["NOSCRIPT"]
    finally:
        proxy.close()


def test_a_live_generation_lost_is_an_error_not_an_empty_generation(window_server: Any) -> None:
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "lost", 1000, 0.01, window=86400, generations=2)  # (no generation begins here)
    assert f.add("a")
    slot = f.current_generation % 3
    r.delete(f.redis_keys()[1 + slot])  # its bits, as an eviction would
    with pytest.raises(MissingKeyError, match=r"'\{lost\}:w:bits:\d', a key of the windowed filter at 'lost', is gone"):
        f.add("a")
    with pytest.raises(MissingKeyError):
        "a" in f  # noqa: B015 - the lookup raises
    f.delete()
    assert f.add("a") is True  # made anew


def test_a_live_generation_whose_number_is_lost_is_an_error_not_a_fresh_start(window_server: Any) -> None:
    """The hash that says which generation a slot holds, evicted while its
    bits stay: the add must not start the slot afresh (every key in it would
    be new again), nor a lookup read it as empty; nor when its bits went
    too. The fault harness's eviction case found this."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "lostgen", 1000, 0.01, window=86400, generations=2)  # (no generation begins here)
    assert f.add("a")
    slot = f.current_generation % 3
    r.delete(f"{{lostgen}}:w:gen:{slot}")
    with pytest.raises(MissingKeyError, match=r"'\{lostgen\}:w:gen:\d', a key of the windowed filter at 'lostgen'"):
        f.add("a")
    with pytest.raises(MissingKeyError):
        "a" in f  # noqa: B015 - the lookup raises
    assert r.strlen(f"{{lostgen}}:w:bits:{slot}") > 0  # nothing was wiped
    # Bits and record both gone (evicted together): the meta's record of the
    # slot says the generation started, so it is lost, not never started.
    r.delete(f"{{lostgen}}:w:bits:{slot}")
    with pytest.raises(MissingKeyError, match=r"'\{lostgen\}:w:gen:\d', a key of the windowed filter"):
        f.add("a")
    with pytest.raises(MissingKeyError):
        "a" in f  # noqa: B015 - the lookup raises
    f.delete()
    assert f.add("a") is True  # made anew
    # Everything of the live generation evicted, its meta too: a handle that
    # added to that generation knows it lives, so the filter is lost, not idle.
    r.delete(*f.redis_keys())
    with pytest.raises(MissingKeyError, match=r"'\{lostgen\}:meta', a key of the windowed filter"):
        f.add("a")
    f.delete()


def test_a_handle_of_a_filter_deleted_and_made_again_is_refused(window_server: Any) -> None:
    """Each making of the filter has an ident: a handle attached before the
    filter was deleted and made again (same parameters) is refused on every
    call while its keys may be live, never writing into the new one (they
    would be new twice). A handle that never added has no keys to lose: it
    takes the new making and goes on (_window_meta.reattach)."""
    r = redis.Redis.from_url(window_server.url)
    old = RedisWindowedFilter(r, "remade", 1000, 0.01, window=60, generations=2)
    idle = RedisWindowedFilter(r, "remade", 1000, 0.01, window=60, generations=2)  # attached, never added
    assert idle.ident == old.ident
    assert old.add("a")
    old.delete()
    other = RedisWindowedFilter(r, "remade", 1000, 0.01, window=60, generations=2)
    assert other.add("x")
    r.delete(*other.redis_keys())  # (deleted with no handle's delete(): old's newest generation still counts)
    new = RedisWindowedFilter(r, "remade", 1000, 0.01, window=60, generations=2)
    assert new.ident != old.ident
    assert new.add("a") is True
    with pytest.raises(MissingKeyError, match=r"'remade' was deleted and made again since this handle attached"):
        other.add("b")
    with pytest.raises(MissingKeyError, match="made again"):
        other.add_many(["b", "c"])
    with pytest.raises(MissingKeyError, match="made again"):
        "a" in other  # noqa: B015 - the lookup raises
    assert "b" not in new and "a" in new
    # (old's delete() forgot its newest generation: like idle, it has no keys to lose)
    assert "a" in idle and idle.ident == new.ident and idle.add("b") is True and "b" in new
    assert old.add("a") is False and old.ident == new.ident
    assert RedisWindowedFilter(r, "remade", 1000, 0.01, window=60, generations=2).ident == new.ident


def test_a_clear_on_a_server_whose_clock_is_behind_the_last_clears_refuses_no_handle(window_server: Any) -> None:
    """The last clear was marked by a server whose clock ran ahead (the
    meta's mark is a minute past this server's TIME, as a failover to a
    slower replica leaves it). A handle added since; a clear here must mark
    after that one, or the handle's keys would read as gone with a clear the
    server went back past, and every add of it would be refused."""
    r = redis.Redis.from_url(window_server.url)
    a = RedisWindowedFilter(r, "ahead", 1000, 0.01, window=60, generations=2)
    assert a.add("warm") is True
    a.clear()  # (the meta's epoch now has a clear's mark)
    meta = "{ahead}:meta"
    making = r.hget(meta, "epoch").decode().split("/")[0]
    sec, usec = r.time()
    r.hset(meta, "epoch", f"{making}/{sec + 60}.{usec}")  # the last clear's mark, by a clock a minute ahead
    assert a.add("x") is True  # added under that mark
    RedisWindowedFilter(r, "ahead", 1000, 0.01, window=60, generations=2).clear()  # by this server's clock
    s, u = r.hget(meta, "epoch").decode().split("/")[1].split(".")  # (seconds, then microseconds)
    assert int(s) * 10**6 + int(u) > (sec + 60) * 10**6 + usec
    assert a.add("y") is True and a.add("x") is True  # x forgotten by the clear, a goes on


def test_an_error_while_taking_the_new_making_carries_the_adds_facts(window_server: Any) -> None:
    """A handle that never added, refused because the filter was made
    again, reads the server's TIME to take the new making; when that read
    fails (every connection cut before it runs), the add raises with its
    facts: nothing new, every key unknown."""
    r = redis.Redis.from_url(window_server.url)
    proxy = FaultProxy(window_server.port, "cut_before", match=b"$4\r\nTIME\r\n")
    try:
        idle = RedisWindowedFilter(redis.Redis(port=proxy.port, socket_timeout=2), "taken", 1000, 0.01, window=60,
                                   generations=2, retries=1)
        RedisWindowedFilter(r, "taken", 1000, 0.01, window=60, generations=2).delete()
        assert RedisWindowedFilter(r, "taken", 1000, 0.01, window=60, generations=2).add("x") is True
        with pytest.raises(redis.ConnectionError) as info:
            idle.add_many(["a", "b"])
        assert proxy.faults >= 1
        assert info.value.new.tolist() == [False, False]  # type: ignore[attr-defined]
        assert info.value.unknown.tolist() == [True, True]  # type: ignore[attr-defined]
    finally:
        proxy.close()


def test_a_ring_lost_whole_and_started_again_by_another_writer_is_an_error(window_server: Any) -> None:
    """Every key of the filter deleted (as a full eviction would), then a
    handle that never added makes it again: a handle that added to a
    generation still live finds that generation gone from its slot, and
    raises rather than report its keys new a second time, on its adds and
    on its lookups alike (a crawler that checks before it adds would fetch
    the page again on a "not seen")."""
    r = redis.Redis.from_url(window_server.url)
    writer = RedisWindowedFilter(r, "whole", 1000, 0.01, window=60, generations=2)
    late = RedisWindowedFilter(r, "whole", 1000, 0.01, window=60, generations=2)
    assert writer.add("a") and "a" in writer
    r.delete(*writer.redis_keys())
    assert late.add("b") is True  # it cannot tell this from an idle fleet's expiry
    lost = (r"the windowed filter at 'whole' was lost and made again since this handle's last add, whose generation "
            r"still lives \(its meta is of another making")
    with pytest.raises(MissingKeyError, match=lost):
        writer.add("a")
    with pytest.raises(MissingKeyError):
        writer.add_many(["a", "c"])
    with pytest.raises(MissingKeyError, match=lost):
        "a" in writer  # noqa: B015 - the lookup raises
    with pytest.raises(MissingKeyError, match=lost):
        writer.contains_many(["a", "b"])
    with pytest.raises(MissingKeyError, match=lost):
        writer.to_filter()  # (a checkpoint without its keys)
    with pytest.raises(MissingKeyError, match=lost):
        writer.approx_count  # noqa: B018 - the read raises
    assert "b" in late and "a" not in late  # (a handle with no keys to lose reads the new making)
    assert "b" in late.to_filter() and late.approx_count > 0


def test_clear_by_one_handle_lets_the_others_go_on(window_server: Any) -> None:
    """clear() forgets every key on purpose: the other handles' next adds
    find their generation emptied by it, not lost, and see keys new again."""
    r = redis.Redis.from_url(window_server.url)
    one = RedisWindowedFilter(r, "cleared", 1000, 0.01, window=60, generations=2)
    two = RedisWindowedFilter(r, "cleared", 1000, 0.01, window=60, generations=2)
    assert one.add("a") and two.add("b")
    one.clear()
    assert "a" not in two and "b" not in one
    assert two.add("a") is True and one.add("b") is True
    assert two.add("b") is False and one.add("a") is False


# ---- parameters ---------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(window=0), ValueError, "window must be a positive number of seconds or a timedelta, got 0"),
    (dict(window="7d"), TypeError, "window must be .* got str \\('7d'\\)"),
    (dict(window=1e15), ValueError, "window must be at most 1e\\+12 s .* got 1000000000000000.0"),
    (dict(window=60, generations=0), ValueError, "generations must be in \\[1, 64\\], got 0"),
    (dict(window=60, generations=2.5), TypeError, "generations must be an int, got float \\(2.5\\)"),
    (dict(window=60, error_rate=1.5), ValueError, "error_rate must be in \\(0, 1\\), got 1.5"),
    (dict(window=60, capacity=0), ValueError, "capacity.*0"),
    (dict(window=60, seed=-1), ValueError, "seed must be an int in \\[0, 2\\*\\*64\\), got -1"),
    (dict(window=60, backend="nope"), ValueError, "backend must be one of .* got 'nope'"),
    (dict(window=60, backend="bf"), ValueError, "backend 'bf' cannot keep a RedisWindowedFilter: .*'plain'"),
    (dict(window=60, key=""), ValueError, "key must be a non-empty str, got ''"),
])
def test_bad_parameters_name_the_parameter_and_value(redis_server: Any, kwargs: dict[str, Any], error: type,
                                                     words: str) -> None:
    args: dict[str, Any] = dict(key="bad", capacity=1000, error_rate=0.01)
    args.update(kwargs)
    with pytest.raises(error, match=words):
        RedisWindowedFilter(redis_server.url, args.pop("key"), args.pop("capacity"), args.pop("error_rate"), **args)


def test_the_longest_window_keeps_its_keys(window_server: Any) -> None:
    """A window of 1e12 s (the longest: every generation's expiry time a
    whole number of milliseconds below 2**53, as both backends write it)."""
    for g in (1, 4):
        f = RedisWindowedFilter(window_server.url, f"longest{g}", 1000, 0.01, window=1e12, generations=g)
        assert f.add("x") is True and f.add("x") is False
        assert f.contains_many(["x", "y"]).tolist() == [True, False]


def test_attaching_with_other_parameters_names_the_field(window_server: Any) -> None:
    RedisWindowedFilter(window_server.url, "att", 1000, 0.01, window=60, generations=2)
    RedisWindowedFilter(window_server.url, "att", 1000, 0.01, window=60, generations=2)  # the same: attaches
    with pytest.raises(ValueError, match=r"differs in window \(stored 60.0 != given 120.0\)"):
        RedisWindowedFilter(window_server.url, "att", 1000, 0.01, window=120, generations=2)
    with pytest.raises(ValueError, match=r"differs in generations \(stored 2 != given 3\)"):
        RedisWindowedFilter(window_server.url, "att", 1000, 0.01, window=60, generations=3)


def test_refresh_must_be_true_or_false(window_server: Any) -> None:
    """refresh='no' was sent as True (bool() of it), None as False."""
    f = RedisWindowedFilter(window_server.url, "refresh", 1000, 0.01, window=60, generations=2)
    for refresh in ("no", None, 2):
        with pytest.raises(TypeError, match=rf"refresh must be True or False, got {type(refresh).__name__}"):
            f.add("a", refresh=refresh)
        with pytest.raises(TypeError, match=rf"refresh must be True or False, got {type(refresh).__name__}"):
            f.add_many(["a"], refresh=refresh)
    assert "a" not in f and f.add("a", refresh=np.False_) and not f.add_many(["a"], refresh=True)[0]
